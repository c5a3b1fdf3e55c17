package show

import (
	"math"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/state"
)

func TestJSONAndCell(t *testing.T) {
	tests := []struct {
		name       string
		v          any
		json, cell string
	}{
		{"nothing", nil, "null", ""},
		{"a number", 0.000123456789, "0.000123456789", "0.00012346"},
		{"a string", "a<b&c", `"a<b&c"`, "a<b&c"},
		{"a bool", true, "true", "true"},
		{"a mapping, keys sorted", map[string]any{"z": 1.0, "a": map[string]any{"object_ref": "py_put_0"}}, `{"a":{"object_ref":"py_put_0"},"z":1}`, `{"a":{"object_ref":"py_put_0"},"z":1}`},
		{"a list with a null", []any{1.0, []any{2.0, nil}}, `[1,[2,null]]`, `[1,[2,null]]`},
		{"NaN inside", map[string]any{"x": math.NaN(), "y": []any{math.Inf(-1)}}, `{"x":"NaN","y":["-Infinity"]}`, `{"x":"NaN","y":["-Infinity"]}`},
		{"NaN alone", math.NaN(), `"NaN"`, "NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := JSON(tt.v); got != tt.json {
				t.Errorf("JSON = %s, want %s", got, tt.json)
			}
			if got := Cell(tt.v); got != tt.cell {
				t.Errorf("Cell = %s, want %s", got, tt.cell)
			}
		})
	}
}

func TestProgress(t *testing.T) {
	tests := []struct {
		p    state.Progress
		want string
	}{
		{state.Progress{}, ""},
		{state.Progress{Ended: 30, Total: 200}, "30/200 trials done (15%)"},
		{state.Progress{Ended: 30, Total: 200, ETA: 5*time.Minute + 20400*time.Millisecond}, "30/200 trials done (15%), ETA 5m20s"},
		{state.Progress{Ended: 199, Total: 200, ETA: 300 * time.Millisecond}, "199/200 trials done (99%), ETA <1s"},
		{state.Progress{Ended: 200, Total: 200}, "200/200 trials done (100%)"},
		{state.Progress{Ended: 7, Total: -1}, "7/unbounded trials done (num_samples -1)"},
	}
	for _, tt := range tests {
		if got := Progress(tt.p); got != tt.want {
			t.Errorf("Progress(%+v) = %q, want %q", tt.p, got, tt.want)
		}
	}
}

func TestLastLineAndCut(t *testing.T) {
	if got := LastLine("Traceback (most recent call last):\n  File \"x\"\nValueError: bad\n\n  \n"); got != "ValueError: bad" {
		t.Errorf("LastLine = %q", got)
	}
	if got := LastLine("  one line "); got != "one line" {
		t.Errorf("LastLine = %q", got)
	}
	if got := Cut("éééééé", 5); got != "éé..." {
		t.Errorf("Cut = %q", got)
	}
	if got := Cut("ééé", 5); got != "ééé" {
		t.Errorf("Cut = %q", got)
	}
}
