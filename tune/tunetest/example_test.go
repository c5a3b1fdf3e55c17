package tunetest_test

import (
	"context"
	"testing"

	"github.com/tunejet/tunejet/tune"
	"github.com/tunejet/tunejet/tune/tunetest"
)

// quadratic is the code under test: a trainable whose loss is least at
// x = 3.
func quadratic(ctx context.Context, config map[string]any) error {
	x := config["x"].(float64)
	return tune.Report(ctx, map[string]any{"loss": (x - 3) * (x - 3)})
}

// TestTuneOnAStack shows a test of a tuning setup: it runs on a stack of
// its own, and reads the best trial from the results.
func TestTuneOnAStack(t *testing.T) {
	nats := tunetest.Start(t, tunetest.Config{Trainables: map[string]tune.Trainable{"quadratic": quadratic}})
	tuner, err := tune.NewTuner(quadratic, tune.WithNATS(nats),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1.0, 3.0, 5.0)}),
		tune.WithTuneConfig(tune.TuneConfig{Metric: "loss", Mode: "min"}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	results, err := tuner.Fit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	best, err := results.GetBestResult("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if results.Len() != 3 || best.Config["x"] != 3.0 {
		t.Errorf("%d trials, best config %v; want 3 trials, the best at x = 3", results.Len(), best.Config)
	}
}
