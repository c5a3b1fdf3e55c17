package tune_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/tune"
)

func TestDomainsSample(t *testing.T) {
	tests := []struct {
		name   string
		domain map[string]any
		check  func(v any) bool
	}{
		{"GridSearch", tune.GridSearch(1, 2), func(v any) bool { return v == 1 || v == 2 }},
		{"Choice", tune.Choice("a", "b"), func(v any) bool { return v == "a" || v == "b" }},
		{"Uniform", tune.Uniform(-1, 1), floatIn(-1, 1)},
		{"QUniform", tune.QUniform(0, 1, 0.5), func(v any) bool { return v == 0.0 || v == 0.5 || v == 1.0 }},
		{"LogUniform", tune.LogUniform(1e-4, 1e-1), floatIn(1e-4, 1e-1)},
		{"QLogUniform", tune.QLogUniform(1, 100, 1), floatIn(1, 100)},
		{"RandInt", tune.RandInt(0, 3), func(v any) bool { return v == 0 || v == 1 || v == 2 }},
		{"QRandInt", tune.QRandInt(0, 10, 5), func(v any) bool { return v == 0 || v == 5 || v == 10 }},
		{"LogRandInt", tune.LogRandInt(1, 3), func(v any) bool { return v == 1 || v == 2 }},
		{"QLogRandInt", tune.QLogRandInt(1, 20, 10), func(v any) bool { return v == 10 || v == 20 }},
		{"RandN", tune.RandN(0, 1), floatIn(-10, 10)},
		{"QRandN", tune.QRandN(0, 10, 5), func(v any) bool { f, ok := v.(float64); return ok && int(f)%5 == 0 && f == float64(int(f)) }},
		{"Literal", tune.Literal(map[string]any{"uniform": 1}), func(v any) bool { return fmt.Sprint(v) == "map[uniform:1]" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tuner, err := tune.NewTuner("fn", tune.WithParamSpace(tune.ParamSpace{"x": tt.domain}))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tuner.Spec(); err != nil {
				t.Fatalf("Spec: %v", err)
			}
			space, err := search.ParseSpace(tune.ParamSpace{"x": tt.domain})
			if err != nil {
				t.Fatalf("ParseSpace: %v", err)
			}
			for i := range 200 {
				if c, _ := space.Trial(i, 1); !tt.check(c["x"]) {
					t.Fatalf("trial %d: x = %v (%T)", i, c["x"], c["x"])
				}
			}
		})
	}
}

func floatIn(low, high float64) func(any) bool {
	return func(v any) bool {
		f, ok := v.(float64)
		return ok && f >= low && f <= high
	}
}

func TestSpecRefusesMisspelledDomain(t *testing.T) {
	tuner, err := tune.NewTuner("fn", tune.WithParamSpace(tune.ParamSpace{
		"lr": map[string]any{"log_uniform": []float64{1e-4, 1e-1}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tuner.Spec()
	want := `param_space.lr.log_uniform: unknown distribution, did you mean "loguniform"?`
	if !errors.Is(err, tune.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
		t.Errorf("Spec error = %v, want ErrInvalidConfig with %s", err, want)
	}
}

// Literal keeps a map that reads like a domain, or like a misspelled one,
// as a constant; unwrapped, such a map is refused.
func ExampleLiteral() {
	sched := map[string]any{"log_uniform": "warmup"}
	for _, space := range []tune.ParamSpace{{"sched": sched}, {"sched": tune.Literal(sched)}} {
		tuner, _ := tune.NewTuner("train", tune.WithParamSpace(space))
		_, err := tuner.Spec()
		fmt.Println(err)
	}
	// Output:
	// invalid tuner configuration: param_space.sched.log_uniform: unknown distribution, did you mean "loguniform"? (for a constant mapping, write {literal: {log_uniform: ...}})
	// <nil>
}
