package syncer

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestResultLineIsMarshal: the result.json line is json.Marshal of the
// result with the config merged in, as Ray writes it.
func TestResultLineIsMarshal(t *testing.T) {
	config := map[string]any{"lr": 0.01, "layers": []any{64.0, 32.0}, "name": "<a&b>"}
	results := []map[string]any{
		{},
		{"training_iteration": 3, "loss": 0.25, "done": false, "trial_id": "3f9a2_00001", "date": "2026-11-30_10-00-00"},
		{"config": "replaced by the trial's", "nested": map[string]any{"b": 1.5e-9, "a": "x,y"}, "n": nil, "big": 1e21},
		{"ünïcode": "ö", `quote"key`: `"q"`, "list": []any{1, "two", nil}},
	}
	for _, r := range results {
		row := maps.Clone(r)
		row["config"] = config
		want, err := json.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendResultLine([]byte("x"), r, config)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "x"+string(want)+"\n" {
			t.Errorf("line %s, want %s", got[1:], want)
		}
	}
	if _, err := appendResultLine(nil, map[string]any{"loss": math.NaN()}, nil); err == nil {
		t.Error("a NaN result encoded without an error, as json.Marshal refuses it")
	}
}

// TestCSVRowIsEncodingCSV: progress.csv rows are what encoding/csv writes
// for the flattened result, values formatted as JSON without quotes.
func TestCSVRowIsEncodingCSV(t *testing.T) {
	results := []map[string]any{
		{"training_iteration": 1, "loss": 0.5, "done": false, "note": "plain", "nested": map[string]any{"a": 1, "b": "x"}},
		{"training_iteration": 2, "loss": 1e-7, "done": true, "note": "comma, \"quote\"\nnewline", "nested": map[string]any{"a": 2}},
		{"training_iteration": 3, "loss": nil, "note": " leading space", "extra": "not a column", "nested": map[string]any{"b": []any{1, "a"}}},
		{"training_iteration": 4, "note": `\.`, "loss": -3.0, "done": map[string]any{"x": 1}},
		{"training_iteration": 5, "note": "", "loss": math.Inf(1)},
	}
	f := &trialFiles{}
	var got []byte
	var scratch []byte
	for _, r := range results {
		got, scratch = csvRow(got, scratch, f, r)
	}
	var want bytes.Buffer
	cw := csv.NewWriter(&want)
	header := slices.Sorted(maps.Keys(flatten(results[0])))
	_ = cw.Write(header)
	for _, r := range results {
		flat := flatten(r)
		rec := make([]string, len(header))
		for i, k := range header {
			v, ok := flat[k]
			switch {
			case !ok || v == nil:
			case k == "note":
				rec[i] = v.(string)
			default:
				b, err := json.Marshal(v)
				if err != nil {
					rec[i] = "+Inf"
					continue
				}
				rec[i] = strings.Trim(string(b), `"`)
			}
		}
		_ = cw.Write(rec)
	}
	cw.Flush()
	if string(got) != want.String() {
		t.Errorf("progress.csv\n%s\nwant\n%s", got, want.String())
	}
}
