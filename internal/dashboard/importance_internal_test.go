package dashboard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/importance"
	"github.com/tunejet/tunejet/internal/state"
)

func TestImportanceMetricAndMode(t *testing.T) {
	one := events.TuneConfig{Metric: "loss", Mode: "min"}
	several := events.TuneConfig{Metrics: []string{"loss", "acc"}, Modes: []string{"min", "max"}}
	for _, c := range []struct {
		name                 string
		tc                   events.TuneConfig
		metric, fallback     string
		wantMetric, wantMode string
	}{
		{"the experiment's", one, "", "score", "loss", "min"},
		{"named", one, "loss", "", "loss", "min"},
		{"another", one, "score", "", "score", ""},
		{"the first of several", several, "", "", "loss", "min"},
		{"one of several", several, "acc", "", "acc", "max"},
		{"none: the first reported", events.TuneConfig{}, "", "score", "score", ""},
	} {
		m, mode := metricAndMode(c.tc, c.metric, c.fallback)
		if m != c.wantMetric || mode != c.wantMode {
			t.Errorf("%s: %q, %q; want %q, %q", c.name, m, mode, c.wantMetric, c.wantMode)
		}
	}
}

// BenchmarkImportanceAnswer10k is the work of one request for an
// experiment of 10,000 finished trials: copying their columns out of the
// state, then fitting the forest.
func BenchmarkImportanceAnswer10k(b *testing.B) {
	space := map[string]any{
		"x1": map[string]any{"uniform": []any{0.0, 1.0}}, "x2": map[string]any{"uniform": []any{0.0, 1.0}},
		"lr":  map[string]any{"loguniform": []any{1e-4, 1e-1}},
		"opt": map[string]any{"choice": []any{"sgd", "adam", "rmsprop", "adagrad"}},
		"n":   map[string]any{"randint": []any{1, 100}},
	}
	l := newLive("bench")
	l.st.Spec = &events.ExperimentSpec{ParamSpace: space, TuneConfig: events.TuneConfig{Metric: "loss", Mode: "min"}}
	rng := rand.New(rand.NewPCG(1, 2))
	opts := []string{"sgd", "adam", "rmsprop", "adagrad"}
	for i := range 10000 {
		x1, x2 := rng.Float64(), rng.Float64()
		id := fmt.Sprint("t", i)
		l.st.Trials[id] = &state.Trial{ID: id, Status: events.StatusTerminated,
			Config:     map[string]any{"x1": x1, "x2": x2, "lr": math.Pow(10, -4+3*rng.Float64()), "opt": opts[rng.IntN(4)], "n": 1 + rng.IntN(99)},
			LastResult: map[string]any{"loss": 10*x1 + x2}}
		l.st.Order = append(l.st.Order, id)
	}
	for b.Loop() {
		in, err := l.importanceInput("")
		if err != nil {
			b.Fatal(err)
		}
		if len(in.target) != 10000 {
			b.Fatalf("%d trials count; want 10000", len(in.target))
		}
		if _, err := importance.Fanova(in.params, in.target, importanceSeed); err != nil {
			b.Fatal(err)
		}
	}
}
