package api_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/api/schema"
	eventschema "github.com/tunejet/tunejet/events/schema"
	"github.com/tunejet/tunejet/internal/schematest"
)

// messages are the API's JSON documents: each schema file, the Go type it
// describes, and its golden examples in testdata/golden.
var messages = []struct {
	schema string
	typ    reflect.Type
	golden []string
}{
	{"restore-request", reflect.TypeFor[api.RestoreRequest](), []string{"restore-request"}},
	{"restore-reply", reflect.TypeFor[api.RestoreReply](), []string{"restore-reply", "restore-reply.refused"}},
	{"suggest-request", reflect.TypeFor[api.SuggestRequest](), []string{"suggest-request"}},
	{"suggest-reply", reflect.TypeFor[api.SuggestReply](), []string{"suggest-reply", "suggest-reply.refused"}},
}

func readDoc(t *testing.T, fsys interface{ ReadFile(string) ([]byte, error) }, name string) any {
	t.Helper()
	b, err := fsys.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return doc
}

// compile compiles a schema (which also checks it against the draft
// 2020-12 meta-schema).
func compile(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	url := "https://tunejet.invalid/api/schema/" + name + ".json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(url, readDoc(t, schema.FS, name+".json")); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return sch
}

func validate(t *testing.T, sch *jsonschema.Schema, data []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(v)
}

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGolden: every golden message validates against its schema, decodes
// into its Go type, and encodes back to the same JSON.
func TestGolden(t *testing.T) {
	for _, m := range messages {
		sch := compile(t, m.schema)
		for _, g := range m.golden {
			t.Run(g, func(t *testing.T) {
				data := readGolden(t, g)
				if err := validate(t, sch, data); err != nil {
					t.Errorf("does not validate against %s:\n%v", m.schema, err)
				}
				v := reflect.New(m.typ)
				dec := json.NewDecoder(bytes.NewReader(data))
				dec.DisallowUnknownFields()
				if err := dec.Decode(v.Interface()); err != nil {
					t.Fatalf("decode into %s: %v", m.typ, err)
				}
				again, err := json.Marshal(v.Interface())
				if err != nil {
					t.Fatal(err)
				}
				var want, got any
				if err := json.Unmarshal(data, &want); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(again, &got); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("round trip through %s (-golden +encoded):\n%s", m.typ, diff)
				}
			})
		}
	}
}

// TestSchemasReject: the schemas refuse what the restorer cannot act on.
func TestSchemasReject(t *testing.T) {
	tests := []struct {
		schema, golden string
		edit           func(map[string]any)
	}{
		{"restore-request", "restore-request", func(m map[string]any) { delete(m, "path") }},
		{"restore-request", "restore-request", func(m map[string]any) { m["path"] = "" }},
		{"restore-request", "restore-request", func(m map[string]any) { m["resume"].(map[string]any)["errored"] = "retry" }},
		{"restore-request", "restore-request", func(m map[string]any) { m["trainable"] = map[string]any{} }},
		{"restore-request", "restore-request", func(m map[string]any) { m["param_space"] = []any{1} }},
		{"restore-reply", "restore-reply", func(m map[string]any) { delete(m, "ok") }},
		{"restore-reply", "restore-reply", func(m map[string]any) { m["source"] = "backup" }},
		{"restore-reply", "restore-reply", func(m map[string]any) { m["seq"] = -1 }},
		{"restore-reply", "restore-reply.refused", func(m map[string]any) { m["code"] = "nope" }},
		{"restore-reply", "restore-reply.refused", func(m map[string]any) { m["trainable_from"] = "file" }},
		{"suggest-request", "suggest-request", func(m map[string]any) { delete(m, "history") }},
		{"suggest-request", "suggest-request", func(m map[string]any) { m["mode"] = "minimize" }},
		{"suggest-request", "suggest-request", func(m map[string]any) { m["history"].([]any)[0].(map[string]any)["state"] = "failed" }},
		{"suggest-reply", "suggest-reply", func(m map[string]any) { delete(m, "config") }},
		{"suggest-reply", "suggest-reply", func(m map[string]any) { m["config"] = []any{1.0} }},
		{"suggest-reply", "suggest-reply.refused", func(m map[string]any) { m["code"] = "no_state" }},
	}
	for i, tt := range tests {
		var m map[string]any
		if err := json.Unmarshal(readGolden(t, tt.golden), &m); err != nil {
			t.Fatal(err)
		}
		tt.edit(m)
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(t, compile(t, tt.schema), data); err == nil {
			t.Errorf("case %d: %s accepts %s", i, tt.schema, data)
		}
	}
}

// TestSchemaCodesAreTheCodes: restore-reply's code enum is api.Codes(),
// suggest-reply's the two codes a searcher answers with.
func TestSchemaCodesAreTheCodes(t *testing.T) {
	var all []string
	for _, c := range api.Codes() {
		all = append(all, string(c))
	}
	for _, tt := range []struct {
		schema string
		want   []string
	}{
		{"restore-reply", all},
		{"suggest-reply", []string{string(api.CodeBadRequest), string(api.CodeInternal)}},
	} {
		doc := readDoc(t, schema.FS, tt.schema+".json").(map[string]any)
		var got []string
		for _, c := range doc["properties"].(map[string]any)["code"].(map[string]any)["enum"].([]any) {
			got = append(got, c.(string))
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s code enum (-api +schema):\n%s", tt.schema, diff)
		}
	}
}

// TestSchemasShareTheEventsDefinitions: the trainable and the resume
// config are the events' types, described as the events' schemas do.
func TestSchemasShareTheEventsDefinitions(t *testing.T) {
	submitted := readDoc(t, eventschema.FS, "io.tunejet.experiment.submitted.json").(map[string]any)
	restored := readDoc(t, eventschema.FS, "io.tunejet.experiment.restored.json").(map[string]any)
	for _, m := range messages[:2] { // the restorer's messages
		doc := readDoc(t, schema.FS, m.schema+".json").(map[string]any)
		if diff := cmp.Diff(submitted["$defs"].(map[string]any)["Trainable"], doc["$defs"].(map[string]any)["Trainable"]); diff != "" {
			t.Errorf("%s: $defs/Trainable differs from the events' (-events +api):\n%s", m.schema, diff)
		}
	}
	req := readDoc(t, schema.FS, "restore-request.json").(map[string]any)
	if diff := cmp.Diff(restored["properties"].(map[string]any)["resume"], req["properties"].(map[string]any)["resume"]); diff != "" {
		t.Errorf("restore-request resume differs from experiment.restored's (-events +api):\n%s", diff)
	}
}

// TestSchemaHeaders: each file is named by its title, declares draft
// 2020-12, and stays open so the contract can grow.
func TestSchemaHeaders(t *testing.T) {
	for _, m := range messages {
		doc := readDoc(t, schema.FS, m.schema+".json").(map[string]any)
		if doc["title"] != m.schema {
			t.Errorf("%s.json: title %v", m.schema, doc["title"])
		}
		if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s.json: $schema %v", m.schema, doc["$schema"])
		}
		if doc["additionalProperties"] != nil {
			t.Errorf("%s.json: additionalProperties must stay open so the contract can grow", m.schema)
		}
	}
}

// TestSchemasDescribeTypes walks each Go type with reflection next to its
// schema: every json field is a property of the right JSON type, the
// schema has no property the type lacks, and "required" lists exactly the
// fields without omitempty.
func TestSchemasDescribeTypes(t *testing.T) {
	for _, m := range messages {
		root := readDoc(t, schema.FS, m.schema+".json").(map[string]any)
		schematest.CheckType(t, m.schema, root, m.typ)
	}
}
