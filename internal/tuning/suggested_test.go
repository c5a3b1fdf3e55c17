package tuning

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/internal/search"
)

func TestSuggestedConfig(t *testing.T) {
	paramSpace := map[string]any{
		"lr":    map[string]any{"loguniform": []any{1e-4, 1e-1}},
		"opt":   map[string]any{"layers": map[string]any{"randint": []any{1, 5}}, "act": map[string]any{"choice": []any{"relu", "tanh"}}},
		"bs":    map[string]any{"quniform": []any{8, 64, 8}},
		"epoch": 10,
	}
	space, err := search.ParseSpace(paramSpace)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		config map[string]any
		want   map[string]any
		errs   []string
	}{
		{name: "valid, as decoded from JSON",
			config: map[string]any{"lr": 0.01, "opt": map[string]any{"layers": 3.0, "act": "tanh"}, "bs": 16.0, "epoch": 99.0},
			want:   map[string]any{"lr": 0.01, "opt": map[string]any{"layers": 3, "act": "tanh"}, "bs": 16.0, "epoch": 10}},
		{name: "unknown key and missing domains",
			config: map[string]any{"lr": 0.01, "momentum": 0.9},
			errs: []string{
				"config.momentum: not a key of param_space",
				"config.bs: missing: a suggestion gives every domain of param_space a value",
				"config.opt.act: missing: a suggestion gives every domain of param_space a value",
				"config.opt.layers: missing: a suggestion gives every domain of param_space a value",
			}},
		{name: "values the domains cannot produce",
			config: map[string]any{"lr": 1.0, "opt": map[string]any{"layers": 5, "act": "gelu"}, "bs": 12},
			errs: []string{
				"config.bs: must be a multiple of the quniform domain's step 8, got 12",
				"config.lr: must be within the loguniform domain's [0.0001, 0.1], got 1",
				`config.opt.act: not one of the choice values of param_space, got string "gelu"`,
				"config.opt.layers: must be within the randint domain's [1, 4], got 5",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SuggestedConfig(paramSpace, space, tt.config)
			var msgs []string
			if err != nil {
				msgs = strings.Split(err.Error(), "\n")
			}
			if !slices.Equal(msgs, tt.errs) {
				t.Fatalf("problems:\n got %q\nwant %q", msgs, tt.errs)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("config %#v, want %#v", got, tt.want)
			}
		})
	}
}
