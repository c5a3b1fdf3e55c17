package archtest

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// natsClient is the NATS client module: its packages (nats.go, jetstream,
// micro) are internal/bus's to use.
const natsClient = "github.com/nats-io/nats.go"

// TestServicesSpeakThroughTheBus: a service reaches NATS only through
// internal/bus's verbs. No package under services/ imports the NATS client
// (its tests may, to break things on purpose), and none reaches for the
// bus's raw connection (Bus.NC, Bus.JS).
func TestServicesSpeakThroughTheBus(t *testing.T) {
	for _, p := range listPackages(t) {
		if from, _ := layer(p.ImportPath); from != "services" {
			continue
		}
		for _, imp := range p.Imports {
			if imp == natsClient || strings.HasPrefix(imp, natsClient+"/") {
				t.Errorf("%s imports %s: services use internal/bus, never the NATS client", p.ImportPath, imp)
			}
		}
	}
	for _, file := range serviceFiles(t) {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", file, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && (sel.Sel.Name == "NC" || sel.Sel.Name == "JS") {
				t.Errorf("%s uses .%s: services use internal/bus's verbs, never its raw connection", file, sel.Sel.Name)
			}
			return true
		})
	}
}

// serviceFiles lists the non-test Go files of the packages under services/.
func serviceFiles(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"/services/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var files []string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			Dir     string
			GoFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		for _, f := range p.GoFiles {
			files = append(files, filepath.Join(p.Dir, f))
		}
	}
	if len(files) == 0 {
		t.Fatal("no service files found")
	}
	return files
}
