package tune_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/tune"
)

// TestWatch: Watch follows an experiment of a deployment given only its
// name and the NATS options, and returns what it saw: here a finished
// experiment, with its counts and results, its table drawn.
func TestWatch(t *testing.T) {
	d := startDeployment(t, 2, map[string]tune.Trainable{"steps": steps(2)})
	d.fit(t, "steps", tune.WithName("watched"), tune.WithRunConfig(storage(t)),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1.0, 2.0)}))

	var table strings.Builder
	st, err := tune.Watch(t.Context(), "watched", d.nats(), tune.WithProgress(&table))
	if err != nil {
		t.Fatal(err)
	}
	if st.Name != "watched" || st.Status != "COMPLETED" || st.Counts[events.StatusTerminated] != 2 ||
		st.Results.Len() != 2 || st.Results.NumTerminated() != 2 {
		t.Errorf("Watch: %+v; want watched COMPLETED with 2 TERMINATED trials and their results", st)
	}
	if !strings.Contains(table.String(), "Experiment watched: COMPLETED") {
		t.Errorf("Watch drew:\n%s\nwant the final table", table.String())
	}

	if _, err := tune.Watch(t.Context(), "never_submitted", d.nats()); !errors.Is(err, tune.ErrNoExperiment) {
		t.Errorf("Watch of an experiment the log does not hold: %v, want ErrNoExperiment", err)
	}
	if _, err := tune.Watch(t.Context(), "watched"); !errors.Is(err, tune.ErrInvalidConfig) {
		t.Errorf("Watch without WithNATS: %v, want ErrInvalidConfig", err)
	}
	if _, err := tune.Watch(t.Context(), "not a name", d.nats()); !errors.Is(err, tune.ErrInvalidConfig) {
		t.Errorf("Watch of an invalid name: %v, want ErrInvalidConfig", err)
	}
}
