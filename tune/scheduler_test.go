package tune_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/tune"
)

// ASHA on a deployment: one trial at a time, each reporting loss x/i until
// it is stopped. The first (x=1) is best at every rung and runs to max_t,
// where ASHA stops it; every later one is worse than the first at rung 1,
// the first result it reports, and is stopped there, whatever it reported
// before the stop reached it. Every trial ends TERMINATED with the
// scheduler's reason, and the log holds each decision before its stop.
func TestASHAStopsTheWorseTrialsAtTheirFirstRung(t *testing.T) {
	forever := func(ctx context.Context, config map[string]any) error {
		x, _ := config["x"].(float64)
		for i := 1; ; i++ {
			if err := tune.Report(ctx, map[string]any{"loss": x / float64(i)}); err != nil {
				if errors.Is(err, tune.ErrStopped) {
					return nil
				}
				return err
			}
		}
	}
	d := startDeployment(t, 2, map[string]tune.Trainable{"forever": forever})
	g := d.fit(t, "forever", tune.WithName("asha"), tune.WithRunConfig(storage(t)),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1.0, 2.0, 3.0, 4.0)}),
		tune.WithTuneConfig(tune.TuneConfig{
			NumSamples: 1, Metric: "loss", Mode: "min", MaxConcurrentTrials: 1, Scheduler: "asha",
			SchedulerConfig: map[string]any{"grace_period": 1, "reduction_factor": 2, "max_t": 8},
		}))
	if g.NumTerminated() != 4 {
		t.Fatalf("%d of 4 trials TERMINATED", g.NumTerminated())
	}
	for _, r := range g.Results() {
		if !strings.HasPrefix(r.EndReason, "scheduler: ") {
			t.Errorf("trial x=%v ended %q, want the scheduler's reason", r.Config["x"], r.EndReason)
		}
	}

	// The decisions, in log order: each trial's first is at rung 1 (x=1
	// alone there: recorded), x=1 is stopped at max_t, and each later
	// trial is stopped at rung 1. A stop request follows its decision.
	milestone := map[string]float64{}
	decided := map[string]bool{}
	x := map[string]float64{}
	for _, ev := range d.events(t, "asha") {
		switch p := ev.Data.(type) {
		case *events.TrialCreated:
			x[p.TrialID], _ = p.Config["x"].(float64)
		case *events.TrialDecided:
			if p.Action == "stop" {
				decided[p.TrialID] = true
				if rung, ok := p.Detail["rung"].(map[string]any); ok {
					milestone[p.TrialID], _ = rung["milestone"].(float64)
				}
			}
		case *events.TrialStopRequested:
			if !decided[p.TrialID] {
				t.Errorf("stop of trial x=%v requested before its decision was on the log", x[p.TrialID])
			}
		}
	}
	for id, v := range x {
		switch {
		case !decided[id]:
			t.Errorf("no stop decision for trial x=%v", v)
		case v > 1 && milestone[id] != 1:
			t.Errorf("trial x=%v stopped at rung %v, want 1", v, milestone[id])
		}
	}
}
