package show

import (
	"math"
	"testing"
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
