package storage_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/internal/storage"
)

// ray reads a file Ray Tune wrote (testdata/ray, see its README).
func ray(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "ray", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// rayResults are the results of testdata/ray/result.json, as Ray logged
// them (each with the trial's config under "config"), and that config.
func rayResults(t *testing.T) (results []map[string]any, config map[string]any) {
	t.Helper()
	for line := range strings.Lines(string(ray(t, "result.json"))) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("result.json line %q: %v", line, err)
		}
		results = append(results, r)
	}
	return results, results[0]["config"].(map[string]any)
}

// TestResultLinesReadAsRays: result.json (Ray: tune/logger/json.py,
// JsonLoggerCallback.log_trial_result) holds one JSON object per line, the
// result with the trial's config; tunejet's lines hold the same objects.
func TestResultLinesReadAsRays(t *testing.T) {
	results, config := rayResults(t)
	var got []byte
	for _, r := range results {
		withoutConfig := maps.Clone(r)
		delete(withoutConfig, "config")
		var err error
		if got, err = storage.AppendResultLine(got, withoutConfig, config); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.HasSuffix(got, []byte("\n")) || bytes.Count(got, []byte("\n")) != len(results) {
		t.Fatalf("result.json is not one line per result:\n%s", got)
	}
	var lines []map[string]any
	for line := range strings.Lines(string(got)) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		lines = append(lines, r)
	}
	if diff := cmp.Diff(results, lines); diff != "" {
		t.Errorf("result.json differs from Ray's (-ray +tunejet):\n%s", diff)
	}
}

// TestResultLineIsMarshal: a result.json line is json.Marshal of the
// result with the config merged in, a reported "config" replaced.
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
		got, err := storage.AppendResultLine([]byte("x"), r, config)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "x"+string(want)+"\n" {
			t.Errorf("line %s, want %s", got[1:], want)
		}
	}
	if _, err := storage.AppendResultLine(nil, map[string]any{"loss": math.NaN()}, nil); err == nil {
		t.Error("a NaN result encoded without an error, as json.Marshal refuses it")
	}
}

// readCSV reads a progress.csv as one map per row, column to value.
func readCSV(t *testing.T, data []byte) (header []string, rows []map[string]string) {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatalf("progress.csv: %v\n%s", err, data)
	}
	header = recs[0]
	for _, rec := range recs[1:] {
		row := map[string]string{}
		for i, v := range rec {
			row[header[i]] = v
		}
		rows = append(rows, row)
	}
	return header, rows
}

// sameCell compares two progress.csv values as pandas reads them: numbers
// by value, booleans by value (Python writes True, JSON true), anything
// else as text.
func sameCell(a, b string) bool {
	if fa, err := strconv.ParseFloat(a, 64); err == nil {
		fb, err := strconv.ParseFloat(b, 64)
		return err == nil && fa == fb
	}
	if ba, err := strconv.ParseBool(a); err == nil {
		bb, err := strconv.ParseBool(b)
		return err == nil && ba == bb
	}
	return a == b
}

func sameRows(t *testing.T, got, want []map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if !slices.Equal(slices.Sorted(maps.Keys(got[i])), slices.Sorted(maps.Keys(want[i]))) {
			t.Errorf("row %d has columns %v, want %v", i+1, slices.Sorted(maps.Keys(got[i])), slices.Sorted(maps.Keys(want[i])))
			continue
		}
		for k, w := range want[i] {
			if !sameCell(got[i][k], w) {
				t.Errorf("row %d, column %s: %q, want %q", i+1, k, got[i][k], w)
			}
		}
	}
}

// TestProgressReadsAsRays: progress.csv (Ray: tune/logger/csv.py,
// CSVLoggerCallback.log_trial_result) has the first result's flattened
// keys, without config, as columns; a later result's other keys are left
// out and its missing ones left empty. tunejet's file holds the same
// columns and values.
func TestProgressReadsAsRays(t *testing.T) {
	results, _ := rayResults(t)
	var p storage.Progress
	var got []byte
	for _, r := range results {
		got = p.AppendRow(got, r)
	}
	wantHeader, want := readCSV(t, ray(t, "progress.csv"))
	header, rows := readCSV(t, got)
	if !slices.Equal(header, slices.Sorted(slices.Values(wantHeader))) || !slices.Equal(p.Header, header) {
		t.Errorf("header %v (Progress.Header %v), want Ray's columns sorted: %v", header, p.Header, wantHeader)
	}
	sameRows(t, rows, want)
}

// TestProgressGoesOnFromRaysHeader: rows appended to a stored progress.csv
// follow its columns in its order, so a file cut back (CutProgress) and
// continued reads as one file.
func TestProgressGoesOnFromRaysHeader(t *testing.T) {
	results, _ := rayResults(t)
	kept, header := storage.CutProgress(ray(t, "progress.csv"), 1)
	p := storage.Progress{Header: header}
	got := kept
	for _, r := range results[1:] {
		got = p.AppendRow(got, r)
	}
	wantHeader, want := readCSV(t, ray(t, "progress.csv"))
	gotHeader, rows := readCSV(t, got)
	if !slices.Equal(gotHeader, wantHeader) {
		t.Errorf("header %v, want Ray's %v", gotHeader, wantHeader)
	}
	sameRows(t, rows, want)
}

// TestProgressIsEncodingCSV: rows are what encoding/csv writes for the
// flattened result, values formatted as JSON without quotes.
func TestProgressIsEncodingCSV(t *testing.T) {
	results := []map[string]any{
		{"training_iteration": 1, "loss": 0.5, "done": false, "note": "plain", "nested": map[string]any{"a": 1, "b": "x"}},
		{"training_iteration": 2, "loss": 1e-7, "done": true, "note": "comma, \"quote\"\nnewline", "nested": map[string]any{"a": 2}},
		{"training_iteration": 3, "loss": nil, "note": " leading space", "extra": "not a column", "nested": map[string]any{"b": []any{1, "a"}}},
		{"training_iteration": 4, "note": `\.`, "loss": -3.0, "done": map[string]any{"x": 1}},
		{"training_iteration": 5, "note": "", "loss": math.Inf(1)},
	}
	var p storage.Progress
	var got []byte
	for _, r := range results {
		got = p.AppendRow(got, r)
	}
	var want bytes.Buffer
	cw := csv.NewWriter(&want)
	header := slices.Sorted(maps.Keys(storage.Flatten(results[0])))
	_ = cw.Write(header)
	for _, r := range results {
		flat := storage.Flatten(r)
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

// rayFailures are the failures of testdata/ray/error.txt.
var rayFailures = []struct {
	at  time.Time
	msg string
}{
	{time.Date(2026, 1, 2, 3, 4, 9, 0, time.UTC), "ray::ImplicitFunc.train() (pid=4242, ip=127.0.0.1, repr=train_fn)\n" +
		"  File \"train.py\", line 7, in train_fn\n    raise ValueError(\"loss diverged\")\nValueError: loss diverged"},
	{time.Date(2026, 1, 2, 3, 5, 11, 0, time.UTC), "The actor died unexpectedly before finishing this task."},
}

// TestErrorsAreRays: error.txt (Ray: tune/experiment/trial.py,
// Trial.handle_error) is byte for byte Ray's.
func TestErrorsAreRays(t *testing.T) {
	var got []byte
	for i, f := range rayFailures {
		got = storage.AppendFailure(got, i+1, f.at, f.msg)
	}
	if want := ray(t, "error.txt"); string(got) != string(want) {
		t.Errorf("error.txt\n%s\nwant Ray's\n%s", got, want)
	}
}

// TestParamsAreRays: params.json (Ray: tune/logger/json.py,
// JsonLoggerCallback.update_config) is Ray's, and a final newline.
func TestParamsAreRays(t *testing.T) {
	_, config := rayResults(t)
	got, err := storage.Params(config)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(ray(t, "params.json")) + "\n"; string(got) != want {
		t.Errorf("params.json\n%s\nwant Ray's\n%s", got, want)
	}
}

// TestCutRaysFiles: the files are cut back to a count of results or
// failures, whole lines and whole entries (an error spans lines).
func TestCutRaysFiles(t *testing.T) {
	results := ray(t, "result.json")
	lines := slices.Collect(strings.Lines(string(results)))
	errors := ray(t, "error.txt")
	first := storage.AppendFailure(nil, 1, rayFailures[0].at, rayFailures[0].msg)
	tests := []struct {
		name      string
		cut       func() ([]byte, int)
		want      string
		wantCount int
	}{
		{"no results", func() ([]byte, int) { return storage.CutResults(results, 0) }, "", 0},
		{"two results", func() ([]byte, int) { return storage.CutResults(results, 2) }, lines[0] + lines[1], 2},
		{"more results than stored", func() ([]byte, int) { return storage.CutResults(results, 5) }, string(results), 3},
		{"a line cut short", func() ([]byte, int) { return storage.CutResults(results[:len(results)-3], 5) }, lines[0] + lines[1], 2},
		{"no failures", func() ([]byte, int) { return storage.CutErrors(errors, 0) }, "", 0},
		{"one failure of several lines", func() ([]byte, int) { return storage.CutErrors(errors, 1) }, string(first), 1},
		{"more failures than stored", func() ([]byte, int) { return storage.CutErrors(errors, 5) }, string(errors), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, n := tt.cut()
			if string(got) != tt.want || n != tt.wantCount {
				t.Errorf("kept %d:\n%q\nwant %d:\n%q", n, got, tt.wantCount, tt.want)
			}
		})
	}
}

// TestCutProgress: the header and the first records are kept, rewritten
// with "\n" line ends; a file without a header keeps nothing.
func TestCutProgress(t *testing.T) {
	data := ray(t, "progress.csv")
	wantHeader, rows := readCSV(t, data)
	for n := range 5 {
		got, header := storage.CutProgress(data, n)
		if !slices.Equal(header, wantHeader) {
			t.Fatalf("cut to %d: header %v, want %v", n, header, wantHeader)
		}
		if bytes.Contains(got, []byte("\r")) {
			t.Errorf("cut to %d keeps \\r line ends:\n%q", n, got)
		}
		_, kept := readCSV(t, got)
		sameRows(t, kept, rows[:min(n, len(rows))])
	}
	if got, header := storage.CutProgress(nil, 3); got != nil || header != nil {
		t.Errorf("an empty file cut to %q with header %v", got, header)
	}
}

// BenchmarkResultFiles is the cost of one report's result.json line and
// progress.csv row.
func BenchmarkResultFiles(b *testing.B) {
	config := map[string]any{"lr": 0.01, "model": map[string]any{"layers": 2.0}}
	result := map[string]any{
		"training_iteration": 7.0, "loss": 0.125, "eval": map[string]any{"acc": 0.5}, "done": false,
		"trial_id": "3f9a2_00001", "date": "2026-01-02_03-04-05", "timestamp": 1767322245.0, "time_this_iter_s": 0.01,
	}
	var p storage.Progress
	var line, row []byte
	b.ReportAllocs()
	for b.Loop() {
		line, _ = storage.AppendResultLine(line[:0], result, config)
		row = p.AppendRow(row[:0], result)
	}
}
