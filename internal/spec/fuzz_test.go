package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/events/schema"

	"github.com/tunejet/tunejet/internal/settings"
)

// FuzzParseYAML and FuzzParseJSON feed Parse any bytes, seeded from
// testdata/fuzz/<name>/ (the test files' inputs and the examples). Parse
// must return within parseDeadline, never panic, and either refuse the
// input with *settings.Error values or return a spec that is whole: it passes
// Validate and the event's own checks and schema, encodes as JSON, and
// parses back, from JSON and from YAML, to the same spec. Input that is
// valid JSON is never a syntax error, and its name and param_space must
// read as encoding/json reads them. The two targets differ only in their
// seeds and the file name.
func FuzzParseYAML(f *testing.F) { fuzzParse(f, "exp.yaml") }

// FuzzParseJSON is FuzzParseYAML seeded with JSON experiment files.
func FuzzParseJSON(f *testing.F) { fuzzParse(f, "exp.json") }

// parseDeadline bounds one Parse: it catches a hang, far above the time
// any input takes.
const parseDeadline = 10 * time.Second

func fuzzParse(f *testing.F, filename string) {
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parseWithin(t, filename, data)
		if err != nil {
			if json.Valid(data) {
				checkNoSyntaxError(t, err)
			}
			return
		}
		checkWhole(t, s)
		if json.Valid(data) {
			checkReadsAsJSON(t, data, s)
		}
	})
}

// parseWithin runs Parse on data, failing the test on a panic, an overrun
// of parseDeadline, or an error that is not made of *settings.Error values.
func parseWithin(t *testing.T, filename string, data []byte) (*events.ExperimentSpec, error) {
	t.Helper()
	type result struct {
		s     *events.ExperimentSpec
		err   error
		panic string
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{panic: fmt.Sprintf("%v\n%s", p, debug.Stack())}
			}
		}()
		s, err := Parse(filename, data)
		done <- result{s: s, err: err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(parseDeadline):
		t.Fatalf("Parse did not return within %v", parseDeadline)
	}
	switch {
	case r.panic != "":
		t.Fatalf("Parse panicked: %s", r.panic)
	case r.err != nil:
		checkErrors(t, filename, r.err)
	}
	return r.s, r.err
}

// checkNoSyntaxError checks that Parse, refusing a valid JSON document,
// did not call it a syntax error.
func checkNoSyntaxError(t *testing.T, err error) {
	t.Helper()
	var se *settings.Error
	if errors.As(err, &se) && strings.HasPrefix(se.Msg, "syntax error") {
		t.Fatalf("Parse refused valid JSON: %v", err)
	}
}

// checkErrors checks that err is one *settings.Error or several joined, each naming
// the file.
func checkErrors(t *testing.T, filename string, err error) {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var se *settings.Error
		if !errors.As(e, &se) || se.File != filename {
			t.Fatalf("Parse error %q (%T) is not an *settings.Error of %s", e, e, filename)
		}
	}
}

// checkWhole checks that s, a spec Parse returned, is ready to submit and
// survives being written out as an experiment file and read again.
func checkWhole(t *testing.T, s *events.ExperimentSpec) {
	t.Helper()
	if err := Validate(s); err != nil {
		t.Fatalf("Parse returned a spec that Validate refuses: %v", err)
	}
	if err := (&events.ExperimentSubmitted{Spec: *s}).Validate(); err != nil {
		t.Fatalf("Parse returned a spec that the event refuses: %v", err)
	}
	wire, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("Parse returned a spec that JSON cannot hold: %v", err)
	}
	if err := submittedSchema(t).Validate(mustJSONValue(t, `{"spec": `+string(wire)+`}`)); err != nil {
		t.Fatalf("Parse returned a spec that the event schema refuses: %v\n%s", err, wire)
	}
	file := fileForm(t, wire)
	asJSON, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	again := map[string][]byte{"again.json": asJSON}
	if asYAML, err := yaml.Marshal(file); err != nil {
		t.Fatal(err)
	} else if yamlReadsBack(asYAML) {
		again["again.yaml"] = asYAML
	}
	for name, data := range again {
		back, err := Parse(name, data)
		if err != nil {
			t.Fatalf("the spec written out as %s does not parse: %v\n%s", name, err, data)
		}
		wire2, err := json.Marshal(back)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(wire, wire2) {
			t.Fatalf("the spec written out as %s parses to another spec:\n%s\n%s\nfrom\n%s", name, wire, wire2, data)
		}
	}
}

// yamlReadsBack reports whether go-yaml reads what it wrote. It does not
// always: a multi-line string with leading spaces and blank lines is
// written with a block indentation indicator that does not match its
// lines (yaml/go-yaml#76). That is no fault of Parse, so the YAML leg of
// the round trip is skipped then.
func yamlReadsBack(data []byte) bool {
	var v any
	return yaml.Unmarshal(data, &v) == nil
}

// fileForm turns the JSON of a parsed spec back into an experiment file's
// values: a Go trainable by its name, numbers as int64 or float64.
func fileForm(t *testing.T, wire []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(wire))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	tr := m["trainable"].(map[string]any)
	if _, ok := tr["command"]; !ok {
		m["trainable"] = tr["name"]
	}
	return plainNumbers(m).(map[string]any)
}

// plainNumbers replaces each json.Number in v by an int64, or a float64
// when it is not an integer that int64 holds.
func plainNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = plainNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = plainNumbers(e)
		}
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// checkReadsAsJSON checks that Parse read the name and param_space of data,
// a valid JSON document, as encoding/json reads them.
func checkReadsAsJSON(t *testing.T, data []byte, s *events.ExperimentSpec) {
	t.Helper()
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return // not an object, or a number out of float64's range
	}
	// An absent, null or empty param_space is the same space.
	got := map[string]any{"param_space": nilIfEmpty(mustJSONAny(t, s.ParamSpace))}
	want := map[string]any{"param_space": nilIfEmpty(doc["param_space"])}
	if name, ok := doc["name"].(string); ok {
		got["name"], want["name"] = s.Name, name
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(sameNumber)); diff != "" {
		t.Fatalf("Parse read the JSON document differently from encoding/json (-json +parse):\n%s", diff)
	}
}

// mustJSONAny returns v as encoding/json decodes its JSON, with
// json.Number numbers.
func mustJSONAny(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func nilIfEmpty(v any) any {
	if m, ok := v.(map[string]any); ok && len(m) == 0 {
		return nil
	}
	return v
}

// sameNumber compares two JSON numbers as float64 values, the precision
// of a number in an experiment file.
func sameNumber(a, b json.Number) bool {
	x, errA := a.Float64()
	y, errB := b.Float64()
	return errA == nil && errB == nil && x == y
}

var (
	schemaOnce sync.Once
	schemaErr  error
	schemaSub  *jsonschema.Schema
)

// submittedSchema is the JSON Schema of io.tunejet.experiment.submitted.
func submittedSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	schemaOnce.Do(func() {
		const typ = "io.tunejet.experiment.submitted"
		b, err := schema.FS.ReadFile(typ + ".json")
		if err != nil {
			schemaErr = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			schemaErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		url := "https://tunejet.invalid/events/schema/" + typ + ".json"
		if schemaErr = c.AddResource(url, doc); schemaErr == nil {
			schemaSub, schemaErr = c.Compile(url)
		}
	})
	if schemaErr != nil {
		t.Fatal(schemaErr)
	}
	return schemaSub
}

func mustJSONValue(t *testing.T, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
