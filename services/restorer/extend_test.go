package restorer

import (
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/state"
)

// A restore's num_samples counts grid_search variants as Ray does
// (num_samples × the grid), and never takes trials away.
func TestExtendAddsTrialsAndNeverRemovesAny(t *testing.T) {
	created := func() *state.Experiment {
		st := state.New("exp")
		st.Spec = &events.ExperimentSpec{ParamSpace: map[string]any{
			"a":  map[string]any{"grid_search": []any{1, 2}},
			"lr": map[string]any{"uniform": []any{0.0, 1.0}},
		}, TuneConfig: events.TuneConfig{NumSamples: 2}}
		st.NextIndex = 4 // 2 samples × a grid of 2
		return st
	}
	for _, tt := range []struct {
		n       int
		want    int
		refused string
	}{
		{0, 2, ""},   // keep
		{3, 3, ""},   // 6 trials
		{-1, -1, ""}, // until stopped
		{1, 0, "num_samples 1 makes 2 trials, and the experiment has created 4"},
		{-2, 0, "must be a count >= 1, or -1"},
	} {
		st := created()
		err := extend(st, tt.n)
		switch {
		case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
			t.Errorf("extend(%d): %v, want a refusal saying %q", tt.n, err, tt.refused)
		case tt.refused != "" && st.Spec.TuneConfig.NumSamples != 2:
			t.Errorf("extend(%d) was refused and changed num_samples to %d", tt.n, st.Spec.TuneConfig.NumSamples)
		case tt.refused == "" && (err != nil || st.Spec.TuneConfig.NumSamples != tt.want):
			t.Errorf("extend(%d): %v, num_samples %d; want nil and %d", tt.n, err, st.Spec.TuneConfig.NumSamples, tt.want)
		}
	}
}
