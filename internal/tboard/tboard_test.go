package tboard_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/tboard"
	"github.com/tunejet/tunejet/internal/tboard/tboardtest"
)

// The rules these tests hold the writer to are Ray's TBXLoggerCallback,
// ray-project/ray python/ray/tune/logger/tensorboardx.py at commit
// 0aa04de2a76609ffc040b6c85ea1e23954c31576: log_trial_result drops
// config, pid, timestamp, time_total_s and training_iteration, flattens
// the rest with "/", logs every int or float (a bool is an int) that is
// not NaN as a scalar tagged "ray/tune/<key>" at step timesteps_total or
// training_iteration; log_trial_end writes tensorboardX's three hparams
// summaries of the trial's evaluated params and its last scalars.

var result = map[string]any{
	"training_iteration": 3.0, "timestamp": 1767323045.0, "time_total_s": 1.5, "pid": 42.0,
	"loss": 0.25, "done": true, "eval": map[string]any{"acc": 0.75, "note": "x"},
	"nan": math.NaN(), "missing": nil, "trial_id": "abcde_00000", "hist": []any{1.0, 2.0},
}

func TestScalarsAreRaysAndReadBack(t *testing.T) {
	flat := storage.Flatten(result)
	data := tboard.AppendStart(nil, 100.5)
	data = tboard.AppendResult(data, tboard.WallTime(result, time.Time{}), tboard.Step(result), tboard.Scalars(flat))
	evs := tboardtest.ReadData(t, data)
	if len(evs) != 2 {
		t.Fatalf("%d events, want the start and one result", len(evs))
	}
	if evs[0].FileVersion != "brain.Event:2" || evs[0].WallTime != 100.5 || evs[0].Writer != "tunejet" {
		t.Errorf("start event %+v, want file_version brain.Event:2 at 100.5 written by tunejet", evs[0])
	}
	got := evs[1]
	if got.Step != 3 || got.WallTime != 1767323045 {
		t.Errorf("result event at step %d, wall time %v; want 3 and the result's timestamp", got.Step, got.WallTime)
	}
	want := map[string]float32{"ray/tune/loss": 0.25, "ray/tune/done": 1, "ray/tune/eval/acc": 0.75}
	if diff := cmp.Diff(want, got.Scalars()); diff != "" {
		t.Errorf("scalars (-want +got):\n%s", diff)
	}
}

func TestStepIsTimestepsTotalWhenSet(t *testing.T) {
	for _, tc := range []struct {
		result map[string]any
		want   int64
	}{
		{map[string]any{"training_iteration": 4.0}, 4},
		{map[string]any{"training_iteration": 4.0, "timesteps_total": 4000.0}, 4000},
		{map[string]any{"training_iteration": 4.0, "timesteps_total": 0.0}, 4},
		{map[string]any{"training_iteration": 4.0, "timesteps_total": nil}, 4},
	} {
		if got := tboard.Step(tc.result); got != tc.want {
			t.Errorf("Step(%v) = %d, want %d", tc.result, got, tc.want)
		}
	}
}

func TestHParamsAreTheEvaluatedParams(t *testing.T) {
	space, err := search.ParseSpace(map[string]any{
		"lr":     map[string]any{"loguniform": []any{1e-4, 1e-1}},
		"model":  map[string]any{"act": map[string]any{"choice": []any{"relu", "tanh"}}, "layers": 2.0},
		"bn":     map[string]any{"choice": []any{true, false}},
		"shape":  map[string]any{"choice": []any{[]any{1.0, 2.0}, []any{3.0}}},
		"epochs": 10.0,
	})
	if err != nil {
		t.Fatal(err)
	}
	config := map[string]any{"lr": 0.01, "model": map[string]any{"act": "tanh", "layers": 2.0}, "bn": false, "shape": []any{3.0}, "epochs": 10.0}
	params := tboard.EvaluatedParams(space, config)
	if diff := cmp.Diff(map[string]any{"lr": 0.01, "model/act": "tanh", "bn": false, "shape": []any{3.0}}, params); diff != "" {
		t.Fatalf("evaluated params (-want +got):\n%s", diff)
	}
	evs := tboardtest.ReadData(t, tboard.AppendHParams(nil, 200, params, []string{"ray/tune/loss", "ray/tune/done"}))
	if len(evs) != 3 {
		t.Fatalf("%d events, want tensorboardX's three (experiment, session start, session end)", len(evs))
	}
	var tags []string
	for _, ev := range evs {
		if len(ev.Values) != 1 || ev.Values[0].Plugin != "hparams" || ev.WallTime != 200 {
			t.Fatalf("event %+v: want one hparams summary at 200", ev)
		}
		tags = append(tags, ev.Values[0].Tag)
	}
	if want := []string{"_hparams_/experiment", "_hparams_/session_start_info", "_hparams_/session_end_info"}; !cmp.Equal(tags, want) {
		t.Errorf("tags %v, want %v", tags, want)
	}
	exp, start, end := evs[0].Values[0], evs[1].Values[0], evs[2].Values[0]
	// The list is left out: tensorboardX takes only strings, bools and numbers.
	if diff := cmp.Diff(map[string]string{"lr": "DATA_TYPE_FLOAT64", "model/act": "DATA_TYPE_STRING", "bn": "DATA_TYPE_BOOL"}, exp.HParamTypes); diff != "" {
		t.Errorf("experiment's hparams (-want +got):\n%s", diff)
	}
	if !cmp.Equal(exp.Metrics, []string{"ray/tune/loss", "ray/tune/done"}) {
		t.Errorf("experiment's metrics %v", exp.Metrics)
	}
	if diff := cmp.Diff(map[string]any{"lr": 0.01, "model/act": "tanh", "bn": false}, start.HParams); diff != "" {
		t.Errorf("session start's hparams (-want +got):\n%s", diff)
	}
	if end.Status != "STATUS_SUCCESS" {
		t.Errorf("session end's status %q, want STATUS_SUCCESS", end.Status)
	}
	if got := tboard.AppendHParams(nil, 200, map[string]any{}, []string{"ray/tune/loss"}); len(got) != 0 {
		t.Errorf("hparams without evaluated params: %d bytes, want none (Ray writes none)", len(got))
	}
}

// file is an event file: its start, results 1..n (each its own scalar
// "ray/tune/i"), then, if ended, the hparams.
func file(n int, ended bool) []byte {
	data := tboard.AppendStart(nil, 1)
	for i := 1; i <= n; i++ {
		data = tboard.AppendResult(data, float64(i), int64(i), []tboard.Scalar{{Tag: "ray/tune/i", Value: float64(i)}})
	}
	if ended {
		data = tboard.AppendHParams(data, 99, map[string]any{"x": 1.0}, []string{"ray/tune/i"})
	}
	return data
}

func TestCutKeepsTheFirstResults(t *testing.T) {
	full := file(3, true)
	for _, tc := range []struct {
		name   string
		data   []byte
		n      int
		want   []byte
		wantN  int
		wantIs []float32 // the results kept
	}{
		{"nothing to cut", file(3, false), 3, file(3, false), 3, []float32{1, 2, 3}},
		{"later results", file(3, false), 1, file(1, false), 1, []float32{1}},
		{"none", file(3, false), 0, file(0, false), 0, nil},
		{"the hparams of an end not counted yet", full, 3, file(3, false), 3, []float32{1, 2, 3}},
		{"fewer than asked", file(2, false), 5, file(2, false), 2, []float32{1, 2}},
		{"a last record cut short", file(3, false)[:len(file(3, false))-3], 3, file(2, false), 2, []float32{1, 2}},
		{"a header cut short", append(file(2, false), 1, 2, 3), 3, file(2, false), 2, []float32{1, 2}},
		{"a corrupt record", corrupt(file(3, false), len(file(2, false))+14), 3, file(2, false), 2, []float32{1, 2}},
		{"results after hparams", append(file(2, true), file(3, false)[len(file(2, false)):]...), 3,
			append(file(2, true), file(3, false)[len(file(2, false)):]...), 3, []float32{1, 2, 3}},
		{"not tunejet's", tboard.AppendResult(nil, 1, 1, nil), 3, nil, 0, nil},
		{"empty", nil, 3, nil, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keep, n := tboard.Cut(tc.data, tc.n)
			if n != tc.wantN || !cmp.Equal(keep, tc.want, cmp.Comparer(func(a, b []byte) bool { return string(a) == string(b) })) {
				t.Fatalf("Cut(%d) kept %d bytes holding %d results, want %d bytes holding %d", tc.n, len(keep), n, len(tc.want), tc.wantN)
			}
			if len(keep) == 0 {
				return
			}
			var is []float32
			for _, ev := range tboardtest.ReadData(t, keep)[1:] {
				if v, ok := ev.Scalars()["ray/tune/i"]; ok {
					is = append(is, v)
				}
			}
			if !cmp.Equal(is, tc.wantIs) {
				t.Errorf("kept results %v, want %v", is, tc.wantIs)
			}
		})
	}
}

func corrupt(b []byte, at int) []byte {
	b[at] ^= 0xff
	return b
}

func TestOursOnlyForTunejetsFiles(t *testing.T) {
	if !tboard.Ours(file(0, false)) {
		t.Error("a file tunejet started is not Ours")
	}
	other := tboard.AppendResult(nil, 1, 1, []tboard.Scalar{{Tag: "loss", Value: 1}})
	if tboard.Ours(other) || tboard.Ours(nil) || tboard.Ours(file(0, false)[:10]) {
		t.Error("a file tunejet did not start, or one cut short, is Ours")
	}
}

func TestFileNameIsRays(t *testing.T) {
	if got := tboard.FileName(time.Unix(1767323045, 500), "host-1"); got != "events.out.tfevents.1767323045.host-1" {
		t.Errorf("FileName = %q", got)
	}
}
