package events

import "testing"

func TestResultValue(t *testing.T) {
	result := map[string]any{
		"loss": 1.5, "a/b": 2.0, "val": map[string]any{"loss": 0.5, "deep": map[string]any{"acc": 0.9}}, "x": 3.0,
	}
	tests := []struct {
		metric string
		want   any
		ok     bool
	}{
		{"loss", 1.5, true},
		{"a/b", 2.0, true}, // a key with a slash wins over nesting
		{"val/loss", 0.5, true},
		{"val/deep/acc", 0.9, true},
		{"val/missing", nil, false},
		{"x/y", nil, false}, // x is no mapping
		{"missing", nil, false},
	}
	for _, tt := range tests {
		got, ok := ResultValue(result, tt.metric)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ResultValue(%q) = %v, %v; want %v, %v", tt.metric, got, ok, tt.want, tt.ok)
		}
	}
}
