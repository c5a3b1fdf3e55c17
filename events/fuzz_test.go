package events_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tunejet/tunejet/events"
)

// The fuzz targets feed the decoders messages mutated from the golden
// files (binary mode) and their structured-mode forms. Whatever the input,
// a decoder must not panic, and an event it accepts must be whole: valid,
// and the same event after encoding it again and decoding that. Where the
// lean path takes a message, the SDK path must accept it too and agree.
// Their seed corpora are in testdata/fuzz/<FuzzName>; `go test` runs them.

// headerText writes a header as "Key: value" lines, one per value, sorted:
// the form the fuzz targets take headers in.
func headerText(h map[string][]string) string {
	var lines []string
	for k, vs := range h {
		for _, v := range vs {
			lines = append(lines, k+": "+v)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// parseHeaderText is the inverse of headerText; a line without ": " is a
// header with an empty value.
func parseHeaderText(s string) map[string][]string {
	h := map[string][]string{}
	if s == "" {
		return h
	}
	for _, line := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(line, ": ")
		h[k] = append(h[k], v)
	}
	return h
}

// goldenMessages are the golden files, by type.
func goldenMessages(tb testing.TB) []golden {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no golden files in %s: %v", goldenDir, err)
	}
	var out []golden
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var g golden
		if err := json.Unmarshal(b, &g); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		out = append(out, g)
	}
	return out
}

// structuredBody is a golden message in structured content mode.
func structuredBody(tb testing.TB, g golden) []byte {
	tb.Helper()
	ev := map[string]any{"data": g.Data}
	for k, v := range g.Header {
		if name, ok := strings.CutPrefix(k, "ce-"); ok {
			ev[name] = v[0]
		}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

var structuredHeader = map[string][]string{events.HeaderContentType: {"application/cloudevents+json"}}

// checkAccepted checks an event a decoder accepted: it validates, it
// survives an encode and decode unchanged (but for nil versus empty slices
// and maps, which omitempty writes alike), and encoding it again gives the
// same message.
func checkAccepted(t *testing.T, ev *events.Event) {
	t.Helper()
	if err := ev.Validate(); err != nil {
		t.Fatalf("Decode accepted an event that does not validate: %v\n%#v", err, ev)
	}
	m, err := events.Encode(ev)
	if err != nil {
		t.Fatalf("Decode accepted an event that does not encode: %v\n%#v", err, ev)
	}
	again, err := events.Decode(m.Subject, m.Header, m.Data)
	if err != nil {
		t.Fatalf("the event Decode accepted, encoded again, does not decode: %v\nsubject %s\nheader %v\ndata %s", err, m.Subject, m.Header, m.Data)
	}
	if diff := cmp.Diff(ev, again, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("decode, encode, decode changed the event (-first +second):\n%s", diff)
	}
	m2, err := events.Encode(again)
	if err != nil {
		t.Fatalf("the event decoded again does not encode: %v", err)
	}
	if diff := cmp.Diff(m, m2); diff != "" {
		t.Fatalf("the event encodes differently after a decode (-first +second):\n%s", diff)
	}
}

func FuzzDecodeBinary(f *testing.F) {
	for _, g := range goldenMessages(f) {
		f.Add(g.Subject, headerText(g.Header), []byte(g.Data))
	}
	f.Fuzz(func(t *testing.T, subject, header string, data []byte) {
		h := parseHeaderText(header)
		ev, err := events.Decode(subject, h, data)
		lean, leanOK, leanErr := events.DecodeLean(subject, h, data)
		sdk, sdkErr := events.DecodeSDK(subject, h, data)
		if leanOK {
			// The lean path takes only what the SDK path accepts, and gives
			// the same answer.
			if (leanErr == nil) != (sdkErr == nil) {
				t.Fatalf("the lean path says %v, the SDK path %v", leanErr, sdkErr)
			}
			if diff := cmp.Diff(sdk, lean); diff != "" {
				t.Fatalf("lean and SDK decodes differ (-sdk +lean):\n%s", diff)
			}
		}
		if (err == nil) != (sdkErr == nil) {
			t.Fatalf("Decode says %v, the SDK path %v", err, sdkErr)
		}
		if err != nil {
			return
		}
		checkAccepted(t, ev)
	})
}

func FuzzDecodeStructured(f *testing.F) {
	for _, g := range goldenMessages(f) {
		f.Add(g.Subject, structuredBody(f, g))
	}
	f.Add("tunejet.mnist_tune.runner.trial.reported.3f9a2_00001", []byte(foreignReported))
	f.Fuzz(func(t *testing.T, subject string, body []byte) {
		ev, err := events.Decode(subject, structuredHeader, body)
		if err != nil {
			return
		}
		checkAccepted(t, ev)
	})
}

// FuzzLeanReported: the lean reader of trial.reported data gives what
// encoding/json gives for the same bytes, or declines.
func FuzzLeanReported(f *testing.F) {
	for _, g := range goldenMessages(f) {
		if strings.Contains(g.Subject, ".trial.reported.") {
			f.Add([]byte(g.Data))
		}
	}
	f.Add([]byte(`{"trial_id":"3f9a2_00001","attempt":2,"earlier":[{"training_iteration":1,"x":1},{"training_iteration":2}],"result":{"training_iteration":3,"nested":{"a":[1,2,{"b":null}],"c":true,"d":false},"s":"ünï","e":{},"f":[]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lean, ok := events.LeanReported(data)
		if !ok {
			return
		}
		var want events.TrialReported
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("the lean reader took data encoding/json rejects (%v): %q", err, data)
		}
		if diff := cmp.Diff(&want, lean); diff != "" {
			t.Fatalf("lean reader and encoding/json differ on %q (-json +lean):\n%s", data, diff)
		}
	})
}
