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
