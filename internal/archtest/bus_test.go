package archtest

import (
	"slices"
	"strings"
	"testing"
)

// The NATS modules: the client (nats.go, with its jetstream and micro
// packages) and the server.
const (
	natsClient = "github.com/nats-io/nats.go"
	natsServer = "github.com/nats-io/nats-server/v2"
)

// natsUsers are the only packages that import a NATS module, with the
// modules each may import:
//   - internal/bus holds the connection and the JetStream handle behind
//     its verbs, and embeds the server (StartEmbedded);
//   - internal/ckpt is the checkpoint transport: checkpoints are objects
//     of a JetStream Object Store, which it reads and writes;
//   - internal/bus/bustest, the test helpers, starts real servers and
//     hands tests a raw JetStream handle to break things on purpose.
//
// Everyone else, the services, the dashboard, tune and the CLI included,
// speaks through internal/bus. Tests (_test.go files) may import either.
var natsUsers = map[string][]string{
	"internal/bus":         {natsClient, natsServer},
	"internal/ckpt":        {natsClient},
	"internal/bus/bustest": {natsClient, natsServer},
}

// TestOnlyTheBusSpeaksNATS: no package but natsUsers imports the NATS
// client or server, and those only the modules listed for them. The bus's
// raw connection is unexported, so the compiler keeps everyone else off
// it.
func TestOnlyTheBusSpeaksNATS(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		allowed, listed := natsUsers[rel]
		seen[rel] = listed
		for _, imp := range p.Imports {
			for _, mod := range []string{natsClient, natsServer} {
				if under(imp, []string{mod}) && !slices.Contains(allowed, mod) {
					t.Errorf("%s imports %s: only %s import %s; the others speak through internal/bus's verbs", p.ImportPath, imp, strings.Join(usersOf(mod), ", "), mod)
				}
			}
		}
	}
	for rel := range natsUsers {
		if !seen[rel] {
			t.Errorf("natsUsers lists %s, which is not a package of the module", rel)
		}
	}
}

// usersOf lists the natsUsers allowed mod, sorted.
func usersOf(mod string) []string {
	var out []string
	for rel, mods := range natsUsers {
		if slices.Contains(mods, mod) {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}

// busExposesNATS are the only exported identifiers of internal/bus whose
// signature mentions a NATS type (a type of nats.go, its jetstream
// package, or the server), each with why. Everything else the bus exports
// speaks the domain (events, RunnerInfo, WorkQueue, Delivery, Liveness,
// Lease), so that a caller never holds a JetStream handle it could use
// behind the bus's back.
var busExposesNATS = []string{
	// The checkpoint transport's handle: checkpoints are the objects of a
	// JetStream Object Store (ckpt.Objects), which internal/ckpt reads and
	// writes (Open, Info, Stage, Fetch, Restage), and ckpt's functions take
	// the handle. The bus opens it with its connection and replica count.
	// Some callers still use the handle's own methods (the restored
	// state's GetBytes and PutBytes, GetInfo, Get, Delete): a checkpoint
	// type of ckpt's own would take those over and end this entry.
	"Bus.Checkpoints",
	// A bus on a connection made elsewhere: by bustest (Server.Bus, whose
	// tests also hold the raw connection) and by tests and benchmarks.
	// Nothing else can call it: no other package may import NATS, and
	// the bus hands out no connection (Dial and Embedded.Dial build their
	// own).
	"New",
	// The embedded server itself, for bustest and the tests and benchmarks
	// that inspect it (Connz) or connect to it in-process.
	"Embedded.Server",
	// The codec between an event and a NATS message, for the tests and
	// benchmarks that publish or fetch behind the bus's back on bustest's
	// raw JetStream handle; without such a handle it is of no use.
	"ToNATS",
	"FromJS",
}

// TestBusAPIHidesNATS: no exported identifier of internal/bus — a
// function's parameters and results, a variable's type, an exported field
// or method — mentions a NATS type, but those busExposesNATS lists: the
// bus hands the packages outside natsUsers no NATS type but those.
func TestBusAPIHidesNATS(t *testing.T) {
	path := module + "/internal/bus"
	natsType := func(p string) bool { return under(p, []string{natsClient, natsServer}) }
	seen := map[string]bool{}
	for _, e := range exposed(t, exportImporter(t, path), path, natsType) {
		where := strings.TrimPrefix(e.where, path+".")
		seen[where] = true
		if !slices.Contains(busExposesNATS, where) {
			t.Errorf("internal/bus.%s exposes %s: the bus gives its callers domain verbs and types, not NATS ones (or list it, with why, in busExposesNATS)", where, e.what)
		}
	}
	for _, where := range busExposesNATS {
		if !seen[where] {
			t.Errorf("busExposesNATS lists internal/bus.%s, which exposes no NATS type (any more): remove it", where)
		}
	}
}
