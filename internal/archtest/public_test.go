package archtest

import (
	"encoding/json"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// publicPackages are the packages users import: their exported API must
// not mention an internal package.
var publicPackages = []string{module + "/tune/...", module + "/api/...", module + "/events/..."}

// TestAPIIsTheContract: api, like events, is the contract: it imports only
// the standard library and events, and events does not import it.
func TestAPIIsTheContract(t *testing.T) {
	for _, p := range listPackages(t) {
		from, _ := layer(p.ImportPath)
		for _, imp := range p.Imports {
			rel := strings.TrimPrefix(imp, module+"/")
			switch {
			case from == "api" && !strings.HasPrefix(imp, module) && strings.Contains(imp, "."):
				t.Errorf("%s imports %s: api imports only the standard library and events", p.ImportPath, imp)
			case from == "api" && strings.HasPrefix(imp, module) && !strings.HasPrefix(rel, "events") && !strings.HasPrefix(rel, "api"):
				t.Errorf("%s imports %s: api imports only the standard library and events", p.ImportPath, imp)
			case from == "events" && strings.HasPrefix(rel, "api"):
				t.Errorf("%s imports %s: events does not import api", p.ImportPath, imp)
			}
		}
	}
}

// TestPublicAPIHidesInternals: no exported identifier of a public package
// — a function's parameters and results, a variable's or constant's type,
// a type's definition, an exported field or method — mentions a type of an
// internal package, so that a user never needs one.
func TestPublicAPIHidesInternals(t *testing.T) {
	imp := exportImporter(t, publicPackages...)
	for _, path := range publicList(t) {
		for _, e := range exposed(t, imp, path, isInternal) {
			t.Errorf("%s exposes %s, of an internal package", e.where, e.what)
		}
	}
}

// exposed lists the types of the packages banned reports that the
// exported API of the package at path reaches.
func exposed(t *testing.T, imp types.Importer, path string, banned func(string) bool) []exposedType {
	t.Helper()
	pkg, err := imp.Import(path)
	if err != nil {
		t.Fatalf("import %s: %v", path, err)
	}
	w := exposure{pkg: pkg, banned: banned, seen: map[types.Type]bool{}}
	for _, name := range pkg.Scope().Names() {
		obj := pkg.Scope().Lookup(name)
		if !obj.Exported() {
			continue
		}
		w.object(path+"."+name, obj)
	}
	return w.found
}

// publicList lists the public packages (not internal, not commands).
func publicList(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-f", "{{if ne .Name \"main\"}}{{.ImportPath}}{{end}}"}, publicPackages...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var paths []string
	for _, p := range strings.Fields(string(out)) {
		if !isInternal(p) {
			paths = append(paths, p)
		}
	}
	return paths
}

// exportImporter imports packages from the export data the go command
// builds for the packages matching patterns and their dependencies.
func exportImporter(t *testing.T, patterns ...string) types.Importer {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-export", "-deps", "-json=ImportPath,Export"}, patterns...)...).Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	files := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		files[p.ImportPath] = p.Export
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := files[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
}

func isInternal(path string) bool {
	return strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// exposedType is a banned type (what, as path.Name) that an exported
// identifier (where, as path.Name, path.Type.Method or path.Type.Field)
// mentions.
type exposedType struct{ where, what string }

// exposure walks what a package exports and notes every type it reaches
// of a package banned reports, at each place that mentions it. It follows
// the package's own types (their fields and methods, named after the
// type) and stops at other packages' types.
type exposure struct {
	pkg    *types.Package
	banned func(path string) bool
	seen   map[types.Type]bool
	found  []exposedType
}

func (w *exposure) object(where string, obj types.Object) {
	if tn, ok := obj.(*types.TypeName); ok && tn.IsAlias() {
		w.typ(where, types.Unalias(tn.Type()))
		return
	}
	w.typ(where, obj.Type())
}

func (w *exposure) typ(where string, t types.Type) {
	if n, ok := t.(*types.Named); ok && n.Obj().Pkg() != nil && w.banned(n.Obj().Pkg().Path()) {
		w.found = append(w.found, exposedType{where, n.Obj().Pkg().Path() + "." + n.Obj().Name()})
		return // noted at every mention, not only the first
	}
	if t == nil || w.seen[t] {
		return
	}
	w.seen[t] = true
	switch t := t.(type) {
	case *types.Alias:
		w.typ(where, types.Unalias(t))
	case *types.Named:
		w.named(where, t)
	case *types.Pointer:
		w.typ(where, t.Elem())
	case *types.Slice:
		w.typ(where, t.Elem())
	case *types.Array:
		w.typ(where, t.Elem())
	case *types.Map:
		w.typ(where, t.Key())
		w.typ(where, t.Elem())
	case *types.Chan:
		w.typ(where, t.Elem())
	case *types.Signature:
		w.tuple(where, t.Params())
		w.tuple(where, t.Results())
	case *types.Struct:
		for f := range t.Fields() {
			if f.Exported() {
				w.typ(where+"."+f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for e := range t.EmbeddedTypes() {
			w.typ(where, e)
		}
		for m := range t.Methods() {
			if m.Exported() {
				w.typ(where+"."+m.Name(), m.Type())
			}
		}
	}
}

func (w *exposure) tuple(where string, vars *types.Tuple) {
	for v := range vars.Variables() {
		w.typ(where, v.Type())
	}
}

func (w *exposure) named(where string, t *types.Named) {
	obj := t.Obj()
	if obj.Pkg() == nil {
		return // error, comparable
	}
	for a := range t.TypeArgs().Types() {
		w.typ(where, a)
	}
	if obj.Pkg() != w.pkg {
		return // another package's type: checked as that package
	}
	where = obj.Pkg().Path() + "." + obj.Name() // its members, wherever it is reached from
	w.typ(where, t.Underlying())
	for m := range t.Methods() {
		if m.Exported() {
			w.typ(where+"."+m.Name(), m.Type())
		}
	}
}
