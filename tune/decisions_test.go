package tune_test

import (
	"context"
	"testing"

	"github.com/tunejet/tunejet/tune"
)

// With TuneConfig.WaitForDecisions each report waits until the stoppers and
// the scheduler have judged it, as Ray's report() does: a trial that
// reports as fast as it can stops at the very result that stopped it, not
// the few results later its decision would otherwise reach it.
func TestWaitForDecisionsStopsAtTheDecidingResult(t *testing.T) {
	fast := func(ctx context.Context, _ map[string]any) error {
		for i := range 200 {
			if err := tune.Report(ctx, map[string]any{"i": i}); err != nil {
				return err
			}
		}
		return nil
	}
	d := startDeployment(t, 2, map[string]tune.Trainable{"fast": fast})
	rc := storage(t)
	rc.Stoppers = map[string]any{"type": "maximum_iteration", "max_iter": 30}
	g := d.fit(t, "fast", tune.WithName("waits"), tune.WithRunConfig(rc),
		tune.WithTuneConfig(tune.TuneConfig{NumSamples: 2, WaitForDecisions: true}))
	for _, r := range g.Results() {
		if it := r.Metrics["training_iteration"]; it != 30.0 {
			t.Errorf("trial %s stopped after training_iteration %v; want 30, the result its stopper stopped it at", r.TrialID, it)
		}
	}
}
