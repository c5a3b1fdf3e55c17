package events_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/events/schema"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const goldenDir = "testdata/golden"

// golden is the file form of an encoded message.
type golden struct {
	Subject string              `json:"subject"`
	Header  map[string][]string `json:"header"`
	Data    json.RawMessage     `json:"data"`
}

func goldenPath(typ string) string { return filepath.Join(goldenDir, typ+".json") }

func marshalGolden(t *testing.T, m *events.Message) []byte {
	t.Helper()
	b, err := json.MarshalIndent(golden{Subject: m.Subject, Header: m.Header, Data: m.Data}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func readGolden(t *testing.T, typ string) golden {
	t.Helper()
	b, err := os.ReadFile(goldenPath(typ))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s: %v", goldenPath(typ), err)
	}
	return g
}

// TestGolden pins the wire format: encoding the fixture of each type gives
// exactly its golden file, and decoding the golden file gives the fixture.
// Run with -update to rewrite the files after a deliberate change.
func TestGolden(t *testing.T) {
	for _, typ := range events.Types() {
		t.Run(typ, func(t *testing.T) {
			want := fixture(typ)
			m, err := events.Encode(want)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got := marshalGolden(t, m)
			if *update {
				if err := os.MkdirAll(goldenDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(goldenPath(typ), got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			file, err := os.ReadFile(goldenPath(typ))
			if err != nil {
				t.Fatalf("%v (run go test ./events -run TestGolden -update)", err)
			}
			if diff := cmp.Diff(string(file), string(got)); diff != "" {
				t.Errorf("encoded message differs from %s (-file +encoded):\n%s", goldenPath(typ), diff)
			}

			g := readGolden(t, typ)
			ev, err := events.Decode(g.Subject, g.Header, g.Data)
			if err != nil {
				t.Fatalf("Decode golden: %v", err)
			}
			if diff := cmp.Diff(want, ev); diff != "" {
				t.Errorf("decoded golden differs from the fixture (-fixture +decoded):\n%s", diff)
			}
		})
	}
}

// TestEveryTypeIsCovered checks that each event type has a fixture, a golden
// file and a schema, and that there are no files for types that do not exist.
func TestEveryTypeIsCovered(t *testing.T) {
	known := map[string]bool{}
	for _, typ := range events.Types() {
		known[typ+".json"] = true
		if fixture(typ) == nil {
			t.Errorf("%s: no fixture in fixtures_test.go", typ)
		}
		if _, err := os.Stat(goldenPath(typ)); err != nil {
			t.Errorf("%s: no golden file: %v", typ, err)
		}
		if _, err := schema.FS.ReadFile(typ + ".json"); err != nil {
			t.Errorf("%s: no schema file: %v", typ, err)
		}
	}
	if n := len(fixtures()); n != len(events.Types()) {
		t.Errorf("%d fixtures for %d types", n, len(events.Types()))
	}
	golden, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range golden {
		if !known[filepath.Base(f)] {
			t.Errorf("golden file %s is not an event type", f)
		}
	}
	schemas, err := schema.FS.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range schemas {
		if filepath.Ext(f.Name()) == ".json" && !known[f.Name()] {
			t.Errorf("schema file %s is not an event type", f.Name())
		}
	}
}

// TestGoldenDataIsCompactJSON checks that the golden data is what Encode
// puts on the wire, byte for byte once compacted.
func TestGoldenDataIsCompactJSON(t *testing.T) {
	for _, typ := range events.Types() {
		g := readGolden(t, typ)
		m, err := events.Encode(fixture(typ))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, g.Data); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), m.Data) {
			t.Errorf("%s: golden data %s, Encode wrote %s", typ, buf.Bytes(), m.Data)
		}
	}
}
