// Package archtest checks the package boundaries of docs/architecture.md
// ("Packages"): the import direction cmd → tune → services → internal →
// events, a service never imports another service, events imports only
// the standard library and the CloudEvents SDK, and examples use only the
// public API; the pure packages do no I/O (pure_test.go); only the bus
// speaks NATS, and its API hands out no NATS type but a listed few
// (bus_test.go); the public API hides internal types (public_test.go).
package archtest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/tunejet/tunejet"

type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// layer gives each package of the module its place in the import order.
func layer(path string) (string, int) {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	top := strings.SplitN(rel, "/", 2)[0]
	switch top {
	case "events", "api": // the contract (public_test.go: api imports only events)
		return top, 0
	case "sdk": // data for the layers above (the Python package a runner carries)
		return top, 0
	case "internal":
		return top, 1
	case "services":
		return top, 2
	case "tune":
		return top, 3
	case "cmd", "examples", "bench":
		return top, 4
	}
	return top, -1
}

func TestImportDirection(t *testing.T) {
	for _, p := range listPackages(t) {
		from, fromLayer := layer(p.ImportPath)
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				if from == "events" && strings.Contains(imp, ".") && !strings.HasPrefix(imp, "github.com/cloudevents/sdk-go/v2/") {
					t.Errorf("%s imports %s: events may import only the standard library and the CloudEvents SDK", p.ImportPath, imp)
				}
				continue
			}
			to, toLayer := layer(imp)
			switch {
			case to == "cmd":
				t.Errorf("%s imports %s: nothing imports cmd", p.ImportPath, imp)
			case from == "examples" && to != "tune":
				t.Errorf("%s imports %s: examples use only the public API (tune)", p.ImportPath, imp)
			case from == "services" && to == "services" && service(p.ImportPath) != service(imp):
				t.Errorf("%s imports %s: a service never imports another service", p.ImportPath, imp)
			case toLayer > fromLayer:
				t.Errorf("%s imports %s: imports flow cmd → tune → services → internal → events", p.ImportPath, imp)
			}
		}
	}
}

func service(path string) string {
	parts := strings.Split(strings.TrimPrefix(path, module+"/"), "/")
	if len(parts) < 2 {
		return ""
	}
	return parts[1]
}
