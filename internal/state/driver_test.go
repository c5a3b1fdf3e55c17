package state

import (
	"testing"

	"github.com/tunejet/tunejet/events"
)

// A PBT exploit with a custom_explore_fn and a function mutation waits
// for the driver: the explored config (the function's key null, named in
// the question) is asked, and the trial, once paused, is not scheduled
// again before the log holds the driver's config, which it then runs.
func TestPBTExploitWaitsForTheDriversConfig(t *testing.T) {
	l := &log{t: t, when: newLog(t).when}
	l.add(events.WriterClient, &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
		Name: "exp", Trainable: events.Trainable{Name: "fn"}, Driver: &events.DriverSpec{},
		TuneConfig: events.TuneConfig{
			NumSamples: 1, Metric: "loss", Mode: "min", Scheduler: "pbt",
			SchedulerConfig: map[string]any{
				"time_attr": "training_iteration", "perturbation_interval": 2.0, "quantile_fraction": 0.5,
				"resample_probability": 1.0, "custom_explore_fn": "clamp",
				"hyperparam_mutations": map[string]any{"x": []any{0.0, 1.0}, "lr": map[string]any{"sample_from": "<lambda>"}},
			},
		},
	}})
	l.add(events.WriterController, &events.ExperimentStarted{Run: 1, Session: "2026-01-02_03-04-05", Seed: 1, TrialIDPrefix: "abcde", NumTrials: 2, StoragePath: "/tmp/x"})
	for i, id := range []string{"a", "b"} {
		l.create(id, i)
		l.start(id, 1)
	}
	l.checkpoint("a", 1, 0, 2, 0.5)
	l.checkpoint("b", 1, 0, 2, 2.0)
	l.checkpoint("a", 1, 1, 4, 0.25)
	l.checkpoint("b", 1, 1, 4, 2.5) // lower: exploits a
	e := l.decide()
	b := e.Trials["b"]
	if b.Exploit == nil || !b.Exploit.Driver {
		t.Fatalf("b's exploit %+v; want one waiting for the driver", b.Exploit)
	}
	asks := e.DriverAsks()
	if len(asks) != 1 || !asks[0].Explore || asks[0].Key != ExploreKey("b", b.PauseOrdinal) ||
		len(asks[0].Resample) != 1 || asks[0].Resample[0] != "lr" || asks[0].Config["lr"] != nil {
		t.Fatalf("questions %+v; want b's explore, lr resampled by the driver", asks)
	}
	l.add(events.WriterController, &events.TrialStopRequested{TrialID: "b", Reason: b.PauseDecision, Pause: true})
	l.add(events.WriterRunner, &events.TrialPaused{TrialID: "b", Attempt: 1, Reason: b.PauseDecision})
	if n := fold(l.evs).NeedingSchedule(2); len(n) != 0 {
		t.Fatalf("needing schedule %v before the driver's config", n)
	}
	l.add(events.WriterController, &events.DriverAnswered{DriverQuestion: events.DriverQuestion{Key: asks[0].Key, Method: events.DriverExplore, TrialID: "b",
		Config: asks[0].Config, Resample: asks[0].Resample}, Answer: events.DriverAnswer{Config: map[string]any{"x": 1.0, "lr": 0.5}}})
	e = fold(l.evs)
	if n := e.NeedingSchedule(2); len(n) != 1 || n[0].ID != "b" {
		t.Fatalf("needing schedule %v; want b once the driver answered", n)
	}
	if x := e.Trials["b"].Exploit; x.Driver || x.Config["lr"] != 0.5 || len(e.DriverAsks()) != 0 {
		t.Fatalf("b's exploit %+v, questions %v; want the driver's config", x, e.DriverAsks())
	}
}
