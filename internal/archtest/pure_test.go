package archtest

import (
	"slices"
	"strings"
	"testing"
)

// purePackages compute and do no I/O: the tuner's rules (sched, stopper,
// tpe, gp, nsga2, the multi-objective arithmetic of moo, and tuner, which
// builds them from the spec with the reader of settings), the search
// space, the fold (state), the resume rules (restore) and the bytes of
// TensorBoard's event files (tboard). Their callers bring the events in
// and take the decisions out, so the same inputs give the same answer in
// a test, a replay and a restored run. Each names that package alone, not
// those under it (internal/state/statetest starts servers,
// internal/restore/restorestate reads the Object Store).
var purePackages = []string{
	"internal/sched",
	"internal/stopper",
	"internal/tpe",
	"internal/gp",
	"internal/nsga2",
	"internal/moo",
	"internal/search",
	"internal/state",
	"internal/tuning",
	"internal/settings",
	"internal/restore",
	"internal/tboard",
	"internal/importance",
}

// pureMayImport is what a pure package may import from the module besides
// the other pure packages: the contract.
var pureMayImport = []string{"events"}

// ioImports are the packages that reach a disk, a network or a process,
// with why a pure package may not import them. A path matches itself and
// everything under it.
var ioImports = []struct{ path, why string }{
	{"os", "files, processes and the environment"},
	{"io/ioutil", "files"},
	{"syscall", "the kernel"},
	{"net", "the network"},
	{"plugin", "loading code"},
	{"github.com/nats-io", "NATS"},
	{"gocloud.dev", "buckets"},
}

// TestPurePackagesDoNoIO: a pure package imports nothing that does I/O,
// and from the module only other pure packages and the contract, so that
// neither the bus, the checkpoint store, storage nor blobsync (nor a
// package that imports them) gets in. Its tests may do what they like.
func TestPurePackagesDoNoIO(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		if !slices.Contains(purePackages, rel) {
			continue
		}
		seen[rel] = true
		for _, imp := range p.Imports {
			if impRel, ok := strings.CutPrefix(imp, module+"/"); ok {
				if !slices.Contains(purePackages, impRel) && !under(impRel, pureMayImport) {
					t.Errorf("%s imports %s: a pure package imports from the module only pure packages (%s) and %s", p.ImportPath, imp, strings.Join(purePackages, ", "), strings.Join(pureMayImport, ", "))
				}
				continue
			}
			for _, x := range ioImports {
				if under(imp, []string{x.path}) {
					t.Errorf("%s imports %s (%s): a pure package does no I/O", p.ImportPath, imp, x.why)
				}
			}
		}
	}
	for _, rel := range purePackages {
		if !seen[rel] {
			t.Errorf("purePackages lists %s, which is not a package of the module", rel)
		}
	}
}

// under reports whether path is one of roots or a package under one.
func under(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, r+"/") {
			return true
		}
	}
	return false
}
