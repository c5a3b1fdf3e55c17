package search

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/internal/settings"
)

func TestParseSpaceDomains(t *testing.T) {
	tests := []struct {
		name  string
		space map[string]any
		grid  int
	}{
		{"plain values", map[string]any{"a": 1, "b": "x", "c": []any{1, 2}, "d": map[string]any{"e": nil}}, 1},
		{"grid_search", map[string]any{"a": map[string]any{"grid_search": []any{1, 2, 3}}}, 3},
		{"choice", map[string]any{"a": map[string]any{"choice": []any{"x", map[string]any{"y": 1}}}}, 1},
		{"uniform list", map[string]any{"a": map[string]any{"uniform": []any{0, 1.5}}}, 1},
		{"uniform low == high", map[string]any{"a": map[string]any{"uniform": []any{1, 1}}}, 1},
		{"uniform mapping", map[string]any{"a": map[string]any{"uniform": map[string]any{"lower": 0, "upper": 1}}}, 1},
		{"quniform", map[string]any{"a": map[string]any{"quniform": []any{0, 1, 0.1}}}, 1},
		{"quniform mapping", map[string]any{"a": map[string]any{"quniform": map[string]any{"lower": 0.2, "upper": 1, "q": 0.2}}}, 1},
		{"loguniform", map[string]any{"a": map[string]any{"loguniform": []any{1e-4, 1e-1}}}, 1},
		{"loguniform base", map[string]any{"a": map[string]any{"loguniform": []any{1, 1024, 2}}}, 1},
		{"loguniform mapping", map[string]any{"a": map[string]any{"loguniform": map[string]any{"lower": 1, "upper": 8, "base": 2}}}, 1},
		{"qloguniform", map[string]any{"a": map[string]any{"qloguniform": []any{1e-4, 1e-1, 5e-5}}}, 1},
		{"qloguniform base", map[string]any{"a": map[string]any{"qloguniform": []any{1, 64, 1, 2}}}, 1},
		{"randint", map[string]any{"a": map[string]any{"randint": []any{0, 10}}}, 1},
		{"randint floats from JSON", map[string]any{"a": map[string]any{"randint": []any{0.0, 10.0}}}, 1},
		{"randint mapping", map[string]any{"a": map[string]any{"randint": map[string]any{"lower": -5, "upper": 5}}}, 1},
		{"qrandint", map[string]any{"a": map[string]any{"qrandint": []any{0, 100, 10}}}, 1},
		{"qrandint default q", map[string]any{"a": map[string]any{"qrandint": []any{1, 3}}}, 1},
		{"qrandint mapping", map[string]any{"a": map[string]any{"qrandint": map[string]any{"lower": 3, "upper": 9, "q": 3}}}, 1},
		{"lograndint", map[string]any{"a": map[string]any{"lograndint": []any{16, 256}}}, 1},
		{"lograndint base", map[string]any{"a": map[string]any{"lograndint": []any{1, 1024, 2}}}, 1},
		{"lograndint mapping", map[string]any{"a": map[string]any{"lograndint": map[string]any{"lower": 1, "upper": 8, "base": 2}}}, 1},
		{"qlograndint", map[string]any{"a": map[string]any{"qlograndint": []any{1, 1000, 10}}}, 1},
		{"qlograndint one multiple", map[string]any{"a": map[string]any{"qlograndint": []any{3, 5, 4}}}, 1},
		{"qlograndint mapping", map[string]any{"a": map[string]any{"qlograndint": map[string]any{"lower": 8, "upper": 64, "q": 8, "base": 2}}}, 1},
		{"randn", map[string]any{"a": map[string]any{"randn": []any{10, 2}}}, 1},
		{"qrandn", map[string]any{"a": map[string]any{"qrandn": []any{10, 2, 0.5}}}, 1},
		{"qrandn mapping", map[string]any{"a": map[string]any{"qrandn": map[string]any{"mean": 0, "sd": 1, "q": 1}}}, 1},
		{"literal", map[string]any{"a": map[string]any{"literal": map[string]any{"log_uniform": []any{1, 2}}}}, 1},
		{"literal in a list", map[string]any{"a": []any{map[string]any{"literal": map[string]any{"uniform": 1}}}}, 1},
		{"literal in a choice", map[string]any{"a": map[string]any{"choice": []any{map[string]any{"literal": map[string]any{"randn": nil}}}}}, 1},
		{"ordinary single keys", map[string]any{"a": map[string]any{"object_ref": "x"}, "b": map[string]any{"name": "sgd"}, "c": map[string]any{"range": 1}}, 1},
		{"randn empty list", map[string]any{"a": map[string]any{"randn": []any{}}}, 1},
		{"randn null", map[string]any{"a": map[string]any{"randn": nil}}, 1},
		{"randn mapping", map[string]any{"a": map[string]any{"randn": map[string]any{"sd": 3}}}, 1},
		{"two keys is an object", map[string]any{"a": map[string]any{"uniform": 1, "x": 2}}, 1},
		{"nested grids", map[string]any{
			"a": map[string]any{"grid_search": []any{1, 2}},
			"m": map[string]any{"b": map[string]any{"grid_search": []any{1, 2, 3}}},
		}, 6},
		{"domain in a list", map[string]any{"l": []any{map[string]any{"grid_search": []any{1, 2}}}}, 2},
		{"typed Go values", map[string]any{"a": map[string]any{"grid_search": []int{1, 2}}, "b": map[string]int{"c": 1}, "d": float32(1)}, 2},
		{"json.Number", map[string]any{"a": map[string]any{"randint": []any{json.Number("1"), json.Number("3")}}}, 1},
		{"nil space", nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSpace(tt.space)
			if err != nil {
				t.Fatalf("ParseSpace: %v", err)
			}
			if got := s.GridSize(); got != tt.grid {
				t.Errorf("GridSize() = %d, want %d", got, tt.grid)
			}
			s.Trial(0, 1) // must not panic
		})
	}
}

func TestParseSpaceErrors(t *testing.T) {
	dom := func(kw string, arg any) map[string]any {
		return map[string]any{"m": map[string]any{"lr": map[string]any{kw: arg}}}
	}
	tests := []struct {
		name  string
		space map[string]any
		want  string
	}{
		{"uniform low > high", dom("uniform", []any{0.5, 0.1}), "param_space.m.lr: uniform: low (0.5) must be <= high (0.1)"},
		{"uniform non-numeric", dom("uniform", []any{"a", 1}), `param_space.m.lr: uniform: low must be a number, got string "a"`},
		{"uniform bool bound", dom("uniform", []any{0, true}), `param_space.m.lr: uniform: high must be a number, got boolean true`},
		{"uniform too few", dom("uniform", []any{0}), "param_space.m.lr: uniform: expects [low, high], got 1 values"},
		{"uniform too many", dom("uniform", []any{0, 1, 2}), "param_space.m.lr: uniform: expects [low, high], got 3 values"},
		{"uniform scalar", dom("uniform", 3), "param_space.m.lr: uniform: expects [low, high] or {lower, upper}, got integer 3"},
		{"uniform unknown argument", dom("uniform", map[string]any{"low": 0, "upper": 1}), `param_space.m.lr: uniform: unknown argument "low", expects {lower, upper}`},
		{"uniform missing argument", dom("uniform", map[string]any{"lower": 0}), `param_space.m.lr: uniform: missing argument "upper", expects {lower, upper}`},
		{"quniform q zero", dom("quniform", []any{0, 1, 0}), "param_space.m.lr: quniform: q (0) must be > 0"},
		{"quniform q negative", dom("quniform", []any{0, 1, -0.1}), "param_space.m.lr: quniform: q (-0.1) must be > 0"},
		{"quniform bound not divisible", dom("quniform", []any{0.15, 1, 0.1}), "param_space.m.lr: quniform: low (0.15) is not divisible by q (0.1)"},
		{"quniform low > high", dom("quniform", []any{2, 1, 1}), "param_space.m.lr: quniform: low (2) must be <= high (1)"},
		{"loguniform low zero", dom("loguniform", []any{0, 1}), "param_space.m.lr: loguniform: low (0) must be > 0"},
		{"loguniform low > high", dom("loguniform", []any{1, 0.1}), "param_space.m.lr: loguniform: low (1) must be <= high (0.1)"},
		{"loguniform base one", dom("loguniform", []any{1, 10, 1}), "param_space.m.lr: loguniform: base (1) must be > 0 and != 1"},
		{"qloguniform q zero", dom("qloguniform", []any{1, 10, 0}), "param_space.m.lr: qloguniform: q (0) must be > 0"},
		{"qloguniform bound not divisible", dom("qloguniform", []any{1, 10, 3}), "param_space.m.lr: qloguniform: low (1) is not divisible by q (3)"},
		{"randint float", dom("randint", []any{0, 1.5}), "param_space.m.lr: randint: high must be an integer, got number 1.5"},
		{"randint empty range", dom("randint", []any{3, 3}), "param_space.m.lr: randint: low (3) must be < high (3); high is exclusive"},
		{"qrandint q zero", dom("qrandint", []any{0, 10, 0}), "param_space.m.lr: qrandint: q (0) must be > 0"},
		{"qrandint low > high", dom("qrandint", []any{4, 2}), "param_space.m.lr: qrandint: low (4) must be <= high (2)"},
		{"qrandint not multiple", dom("qrandint", []any{1, 10, 3}), "param_space.m.lr: qrandint: low (1) and high (10) must be multiples of q (3)"},
		{"lograndint low zero", dom("lograndint", []any{0, 10}), "param_space.m.lr: lograndint: low (0) must be > 0"},
		{"lograndint empty range", dom("lograndint", []any{8, 8}), "param_space.m.lr: lograndint: low (8) must be < high (8); high is exclusive"},
		{"lograndint float", dom("lograndint", []any{1, 2.5}), "param_space.m.lr: lograndint: high must be an integer, got number 2.5"},
		{"lograndint base one", dom("lograndint", []any{1, 10, 1}), "param_space.m.lr: lograndint: base (1) must be > 0 and != 1"},
		{"lograndint too many", dom("lograndint", []any{1, 10, 2, 3}), "param_space.m.lr: lograndint: expects [low, high, base (default 10)], got 4 values"},
		{"qlograndint missing q", dom("qlograndint", []any{1, 10}), "param_space.m.lr: qlograndint: expects [low, high, q, base (default 10)], got 2 values"},
		{"qlograndint q zero", dom("qlograndint", []any{1, 10, 0}), "param_space.m.lr: qlograndint: q (0) must be > 0"},
		{"qlograndint q float", dom("qlograndint", []any{1, 10, 0.5}), "param_space.m.lr: qlograndint: q must be an integer, got number 0.5"},
		{"qlograndint low negative", dom("qlograndint", []any{-4, 10, 2}), "param_space.m.lr: qlograndint: low (-4) must be > 0"},
		{"qlograndint low > high", dom("qlograndint", []any{10, 5, 5}), "param_space.m.lr: qlograndint: low (10) must be < high (5)"},
		{"qlograndint no multiple", dom("qlograndint", []any{5, 9, 10}), "param_space.m.lr: qlograndint: no multiple of q (10) lies within [low (5), high (9)]"},
		{"randn sd zero", dom("randn", []any{0, 0}), "param_space.m.lr: randn: sd (0) must be > 0"},
		{"qrandn missing q", dom("qrandn", []any{0, 1}), "param_space.m.lr: qrandn: expects [mean, sd, q], got 2 values"},
		{"qrandn missing mean", dom("qrandn", map[string]any{"sd": 1, "q": 1}), `param_space.m.lr: qrandn: missing argument "mean", expects {mean, sd, q}`},
		{"qrandn q zero", dom("qrandn", []any{0, 1, 0}), "param_space.m.lr: qrandn: q (0) must be > 0"},
		{"qrandn sd negative", dom("qrandn", []any{0, -1, 1}), "param_space.m.lr: qrandn: sd (-1) must be > 0"},
		{"NaN", map[string]any{"a": []any{1, math.NaN()}}, "param_space.a.1: expected a finite number, got NaN; JSON cannot hold it"},
		{"NaN json.Number", map[string]any{"a": json.Number("NaN")}, "param_space.a: expected a finite number, got NaN; JSON cannot hold it"},
		{"infinite bound", dom("uniform", []any{0, math.Inf(1)}), "param_space.m.lr.uniform.1: expected a finite number, got +Inf; JSON cannot hold it"},
		{"randn too many", dom("randn", []any{0, 1, 2}), "param_space.m.lr: randn: expects [mean (default 0), sd (default 1)], got 3 values"},
		{"choice empty", dom("choice", []any{}), "param_space.m.lr: choice: expects a non-empty list of values, got an empty list"},
		{"choice scalar", dom("choice", "a"), `param_space.m.lr: choice: expects a non-empty list of values, got string "a"`},
		{"grid_search empty", dom("grid_search", []any{}), "param_space.m.lr: grid_search: expects a non-empty list of values, got an empty list"},
		{"grid_search nested domain", dom("grid_search", []any{1, map[string]any{"uniform": []any{0, 1}}}), "param_space.m.lr: grid_search: value 1 contains a domain (uniform); domains inside grid_search values are not supported"},
		{"domain in a list", map[string]any{"l": []any{1, map[string]any{"choice": []any{}}}}, "param_space.l.1: choice: expects a non-empty list of values, got an empty list"},
		{"unsupported type", map[string]any{"a": map[string]any{"b": struct{}{}}}, "param_space.a.b: unsupported value of type struct {}"},
		{"first key in order", map[string]any{"b": map[string]any{"choice": []any{}}, "a": map[string]any{"grid_search": []any{}}}, "param_space.a: grid_search: expects a non-empty list of values, got an empty list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSpace(tt.space)
			if err == nil {
				t.Fatal("ParseSpace: no error")
			}
			if err = settings.Prefix("param_space", err); err.Error() != tt.want {
				t.Errorf("error:\n got %s\nwant %s", err, tt.want)
			}
			var ke *settings.Error
			if !errors.As(err, &ke) {
				t.Errorf("error %T is not a *settings.Error", err)
			}
		})
	}
}

func TestErrorKey(t *testing.T) {
	_, err := ParseSpace(map[string]any{"model": map[string]any{"layers": []any{map[string]any{"randint": []any{2, 1}}}}})
	var ke *settings.Error
	if !errors.As(err, &ke) {
		t.Fatalf("error %v is not a *settings.Error", err)
	}
	if ke.Key != "model.layers.0" {
		t.Errorf("Key = %q, want model.layers.0", ke.Key)
	}
}

func TestOnlyGrid(t *testing.T) {
	s := mustParse(t, map[string]any{
		"a": map[string]any{"grid_search": []any{1, 2}},
		"m": map[string]any{"z": map[string]any{"randn": nil}, "b": map[string]any{"uniform": []any{0, 1}}},
	})
	want := `param_space.m.b: uniform is a random domain; search_alg "grid" allows only grid_search and plain values`
	if err := settings.Prefix("param_space", s.OnlyGrid()); err == nil || err.Error() != want {
		t.Errorf("OnlyGrid() = %v, want %s", err, want)
	}
	g := mustParse(t, map[string]any{"a": map[string]any{"grid_search": []any{1, 2}}, "b": 3})
	if err := g.OnlyGrid(); err != nil {
		t.Errorf("OnlyGrid() on a grid-only space = %v", err)
	}
}

func TestFlatKeys(t *testing.T) {
	s := mustParse(t, map[string]any{
		"lr":    map[string]any{"loguniform": []any{1e-4, 1e-1}},
		"model": map[string]any{"depth": 3, "act": map[string]any{"choice": []any{"relu"}}, "opt": map[string]any{"name": "sgd"}},
		"empty": map[string]any{},
		"list":  []any{map[string]any{"a": 1}},
		"lit":   map[string]any{"literal": map[string]any{"a": 1}},
	})
	want := []string{"empty", "list", "lit", "lr", "model/act", "model/depth", "model/opt/name"}
	if diff := cmp.Diff(want, s.FlatKeys()); diff != "" {
		t.Errorf("FlatKeys (-want +got):\n%s", diff)
	}
}

func TestNumTrials(t *testing.T) {
	s := mustParse(t, map[string]any{
		"a": map[string]any{"grid_search": []any{1, 2, 3}},
		"b": map[string]any{"grid_search": []any{1, 2, 3}},
	})
	tests := []struct{ samples, want int }{{1, 9}, {3, 27}, {0, 0}, {-1, -1}}
	for _, tt := range tests {
		if got := s.NumTrials(tt.samples); got != tt.want {
			t.Errorf("NumTrials(%d) = %d, want %d", tt.samples, got, tt.want)
		}
	}
}

func mustParse(t *testing.T, space map[string]any) *Space {
	t.Helper()
	s, err := ParseSpace(space)
	if err != nil {
		t.Fatalf("ParseSpace: %v", err)
	}
	return s
}

func TestParseSpaceCycle(t *testing.T) {
	m := map[string]any{}
	m["self"] = m
	_, err := ParseSpace(m)
	if err == nil || !strings.HasSuffix(err.Error(), ": nested more than 100 levels deep") {
		t.Errorf("ParseSpace of a cyclic map: %v", err)
	}
}

// TestSampleFromIsTheDrivers: a sample_from domain names the driver's
// function; Trial leaves it null for the driver, which does not count as
// a random domain (grid search takes it), and TakeSampled takes its value
// from the driver's config, nothing else.
func TestSampleFromIsTheDrivers(t *testing.T) {
	s, err := ParseSpace(map[string]any{
		"x":  map[string]any{"grid_search": []any{1.0, 2.0}},
		"wd": map[string]any{"sample_from": "<lambda>"},
		"m":  map[string]any{"layers": []any{map[string]any{"sample_from": "layer"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.OnlyGrid(); err != nil {
		t.Errorf("OnlyGrid: %v; sample_from is not a random domain", err)
	}
	if got := s.SampledByDriver(); len(got) != 2 || strings.Join(got[0], ".") != "m.layers.0" || strings.Join(got[1], ".") != "wd" {
		t.Fatalf("SampledByDriver = %v", got)
	}
	config, _ := s.Trial(1, 7)
	if config["wd"] != nil || config["x"] != 2.0 {
		t.Fatalf("Trial(1) = %v; want wd null for the driver, x from the grid", config)
	}
	resolved := map[string]any{"x": 99.0, "wd": 0.5, "m": map[string]any{"layers": []any{3.0}}}
	if err := s.TakeSampled(config, resolved); err != nil {
		t.Fatal(err)
	}
	if config["wd"] != 0.5 || config["x"] != 2.0 || config["m"].(map[string]any)["layers"].([]any)[0] != 3.0 {
		t.Errorf("TakeSampled: %v; want wd and the layer from the driver, x kept", config)
	}
	if err := s.TakeSampled(config, map[string]any{"x": 1.0}); err == nil || !strings.Contains(err.Error(), "wd") && !strings.Contains(err.Error(), "m.layers.0") {
		t.Errorf("TakeSampled of a config without the values: %v", err)
	}
	if _, err := ParseSpace(map[string]any{"wd": map[string]any{"sample_from": 3.0}}); err == nil || !strings.Contains(err.Error(), "expected the name of the driver's function") {
		t.Errorf("sample_from of a number: %v", err)
	}
}
