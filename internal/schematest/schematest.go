// Package schematest checks that a JSON Schema describes a Go type: the
// events' and the api package's schemas are held to their structs by it.
package schematest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// CheckType walks root, a schema document, next to typ: every json field
// is a property of the right JSON type, the schema has no property the
// struct lacks, and "required" lists exactly the fields without omitempty.
// path names root in failures.
func CheckType(t testing.TB, path string, root map[string]any, typ reflect.Type) {
	t.Helper()
	walker{t: t, root: root}.check(path, root, typ)
}

type walker struct {
	t    testing.TB
	root map[string]any
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

func (w walker) resolve(node map[string]any) map[string]any {
	ref, ok := node["$ref"].(string)
	if !ok {
		return node
	}
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		w.t.Fatalf("$ref %q: want #/$defs/<name>", ref)
	}
	def, ok := w.root["$defs"].(map[string]any)[name].(map[string]any)
	if !ok {
		w.t.Fatalf("$ref %q: no such definition", ref)
	}
	return w.resolve(def)
}

var jsonKind = map[reflect.Kind]string{
	reflect.Struct: "object", reflect.Map: "object", reflect.Slice: "array", reflect.String: "string",
	reflect.Bool: "boolean", reflect.Int: "integer", reflect.Int64: "integer", reflect.Uint64: "integer",
	reflect.Float64: "number",
}

func (w walker) check(path string, node map[string]any, typ reflect.Type) {
	node = w.resolve(node)
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Implements(jsonMarshaler) {
		if node["anyOf"] == nil && node["enum"] == nil {
			w.t.Errorf("%s: %s marshals itself; want anyOf or enum", path, typ)
		}
		return
	}
	want := jsonKind[typ.Kind()]
	if want == "" && typ.Kind() != reflect.Interface {
		w.t.Fatalf("%s: no JSON type known for %s", path, typ)
	}
	if want != "" && node["type"] != want {
		w.t.Errorf("%s: schema type %v, want %q (Go %s)", path, node["type"], want, typ)
	}
	if typ.Kind() == reflect.Uint64 && fmt.Sprint(node["minimum"]) != "0" {
		w.t.Errorf("%s: unsigned, want minimum 0", path)
	}
	if typ.Kind() == reflect.Struct {
		w.checkStruct(path, node, typ)
	}
}

func (w walker) checkStruct(path string, node map[string]any, typ reflect.Type) {
	props, _ := node["properties"].(map[string]any)
	var required []string
	seen := map[string]bool{}
	// The fields encoding/json writes: an embedded struct without a json
	// name is flattened into its parent.
	for _, f := range reflect.VisibleFields(typ) {
		if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			w.t.Fatalf("%s.%s: every field needs a json name", path, f.Name)
		}
		seen[name] = true
		if !slices.Contains(strings.Split(opts, ","), "omitempty") {
			required = append(required, name)
		}
		p, ok := props[name].(map[string]any)
		if !ok {
			w.t.Errorf("%s: field %q (%s.%s) is not a schema property", path, name, typ.Name(), f.Name)
			continue
		}
		w.check(path+"."+name, p, f.Type)
	}
	for name := range props {
		if !seen[name] {
			w.t.Errorf("%s: schema property %q is not a field of %s", path, name, typ)
		}
	}
	var got []string
	if r, ok := node["required"].([]any); ok {
		for _, x := range r {
			got = append(got, x.(string))
		}
	}
	slices.Sort(got)
	slices.Sort(required)
	if diff := cmp.Diff(required, got); diff != "" {
		w.t.Errorf("%s: required (-fields without omitempty +schema):\n%s", path, diff)
	}
}
