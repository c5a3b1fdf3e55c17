package settings

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type inner struct {
	Cmd string `json:"cmd" settings:"required"`
}

type mode string

type config struct {
	Name    string    `json:"name"`
	Mode    mode      `json:"mode"`
	Seed    *int64    `json:"seed"`
	On      *bool     `json:"on"`
	Rate    *float64  `json:"rate"`
	Tags    []string  `json:"tags"`
	Weights []float64 `json:"weights"`
	Inner   inner     `json:"inner"`
	Opt     *inner    `json:"opt"`
	State   int       `json:"state" settings:"-"`
}

func TestDecode(t *testing.T) {
	seed, on := int64(math.MaxInt64), false
	tests := []struct {
		name string
		m    map[string]any
		want config
		errs []string
	}{
		{"every kind", map[string]any{
			"name": "a", "mode": "min", "seed": math.MaxInt64, "on": false, "tags": []any{"x", "y"},
			"weights": []any{1, 0.5}, "inner": map[string]any{"cmd": "c"}, "opt": map[string]any{"cmd": "d"},
		}, config{Name: "a", Mode: "min", Seed: &seed, On: &on, Tags: []string{"x", "y"},
			Weights: []float64{1, 0.5}, Inner: inner{Cmd: "c"}, Opt: &inner{Cmd: "d"}}, nil},
		{"nulls keep the defaults", map[string]any{"name": nil, "seed": nil, "opt": nil, "inner": nil},
			config{Name: "default"}, nil},
		{"wrong types", map[string]any{
			"name": 1, "mode": true, "seed": 1.5, "on": "yes", "rate": math.Inf(1), "tags": "x",
			"weights": []any{1, "2", math.NaN()}, "inner": []any{}, "opt": map[string]any{"cmd": 3},
		}, config{Name: "default"}, []string{
			"inner: expected a mapping, got a list",
			"mode: expected a string, got boolean true",
			"name: expected a string, got integer 1",
			"on: expected a boolean, got string \"yes\"",
			"opt.cmd: expected a string, got integer 3",
			"rate: expected a finite number, got number +Inf",
			"seed: expected an integer, got number 1.5",
			"tags: expected a list of strings, got string \"x\"",
			"weights.1: expected a finite number, got string \"2\"",
			"weights.2: expected a finite number, got number NaN",
		}},
		{"below", map[string]any{"tags": []any{"x", 2}, "inner": map[string]any{"cmnd": "c"}, "opt": map[string]any{}},
			config{Name: "default"}, []string{
				"inner.cmnd: unknown key, did you mean \"cmd\"?",
				"inner.cmd: required",
				"opt.cmd: required",
				"tags.1: expected a string, got integer 2",
			}},
		{"state is no setting", map[string]any{"state": 1}, config{Name: "default"}, []string{
			"state: unknown key; valid keys: inner, mode, name, on, opt, rate, seed, tags, weights",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := config{Name: "default"}
			var p Problems
			Decode(&p, "test", tt.m, &got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			var errs []string
			for _, e := range p.List() {
				errs = append(errs, e.Error())
			}
			if diff := cmp.Diff(tt.errs, errs); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeExtra: a caller's reader takes a key of a type Decode cannot
// read, and For gives the reader of a plain type to a reader of more.
func TestDecodeExtra(t *testing.T) {
	var dst struct {
		Name  string         `json:"name"`
		Space map[string]any `json:"space"`
	}
	var p Problems
	name := For(&dst.Name)
	Decode(&p, "test", map[string]any{"name": 3, "space": map[string]any{"a": 1}}, &dst, Fields{
		"name": func(p *Problems, v any) {
			if n, ok := v.(int); ok {
				v = strings.Repeat("x", n)
			}
			name(p, v)
		},
		"space": func(_ *Problems, v any) { dst.Space = v.(map[string]any) },
	})
	if dst.Name != "xxx" || dst.Space["a"] != 1 || p.Len() != 0 {
		t.Errorf("got %+v, problems %v", dst, p.Err())
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"space"`) {
			t.Errorf("Decode without a reader of space: panic %v", r)
		}
	}()
	Decode(&p, "test", nil, &dst)
}
