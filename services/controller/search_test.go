package controller

import (
	"context"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/tpe"
)

// A trial a scheduler stopped counts for TPE as Optuna counts a pruned
// one: with the value and step of the result it was stopped at, whatever
// it reported before the stop reached its runner (a timing matter).
// folder returns an experiment's state and the function that folds an
// event into it, each a second after the last.
func folder(t *testing.T) (**state.Experiment, func(events.Writer, events.Payload)) {
	st := state.New("exp")
	seq := uint64(0)
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &st, func(w events.Writer, p events.Payload) {
		seq++
		when = when.Add(time.Second)
		ev := events.New("exp", w, "test", p)
		ev.Seq, ev.Time = seq, when
		next, _, err := state.Fold(context.Background(), st, ev, nil)
		if err != nil {
			t.Fatal(err)
		}
		st = next
	}
}

func TestTPEHistoryKeepsThePrunedValue(t *testing.T) {
	stp, fold := folder(t)
	fold(events.WriterClient, &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
		Name: "exp", Trainable: events.Trainable{Name: "fn"},
		TuneConfig: events.TuneConfig{
			NumSamples: 1, Metric: "loss", Mode: "min", SearchAlg: "tpe", Scheduler: "asha",
			SchedulerConfig: map[string]any{"grace_period": 1.0, "reduction_factor": 2.0, "max_t": 4.0},
		},
	}})
	fold(events.WriterController, &events.ExperimentStarted{Run: 1, Session: "2026-01-02_03-04-05", Seed: 1, TrialIDPrefix: "abcde", NumTrials: 2})
	for i, id := range []string{"a", "b"} {
		fold(events.WriterController, &events.TrialCreated{TrialID: id, Index: i, TrialName: "fn_" + id, DirName: "fn_" + id, Config: map[string]any{"x": float64(i)}})
		fold(events.WriterController, &events.TrialScheduled{TrialID: id, TrialName: "fn_" + id, DirName: "fn_" + id, Config: map[string]any{}, Trainable: events.Trainable{Name: "fn"}, HeartbeatTimeoutS: 3})
		fold(events.WriterRunner, &events.TrialStarted{TrialID: id, Attempt: 1, Runner: "r1"})
	}
	report := func(id string, it int, loss float64) {
		fold(events.WriterRunner, &events.TrialReported{TrialID: id, Attempt: 1, Result: map[string]any{"training_iteration": it, "loss": loss}})
	}
	report("a", 1, 0.5)
	report("b", 1, 0.9) // worse than the cutoff: stopped at iteration 1
	report("b", 2, 0.1) // before the stop reached its runner
	fold(events.WriterRunner, &events.TrialCompleted{TrialID: "b", Attempt: 1, Status: events.StatusTerminated, Reason: (*stp).Trials["b"].StopDecision})
	if b := (*stp).Trials["b"]; b.StopDecision == "" || b.Iteration != 2 {
		t.Fatalf("b: stop %q at iteration %d; want a scheduler's stop and a last iteration of 2", b.StopDecision, b.Iteration)
	}
	for _, h := range tpeHistory(*stp) {
		if h.Number != 1 {
			continue
		}
		if h.State != tpe.Pruned || h.Value != 0.9 || h.Step != 1 {
			t.Errorf("b in TPE's history: %+v; want pruned at step 1 with 0.9", h)
		}
		return
	}
	t.Fatal("b is not in TPE's history")
}

// A trial a scheduler ended because it trained to the end is complete,
// not pruned, as Optuna counts it.
func TestPrunedOnlyCutShort(t *testing.T) {
	for reason, want := range map[string]bool{
		"scheduler: stopped at rung 4 (training_iteration 4): -0.9 < cutoff -0.5":                        true,
		"scheduler: reached max_t: training_iteration 81 >= 81":                                          false,
		"scheduler: bracket finished: every live trial of band 0 bracket 0 reached its last milestone 9": false,
		"stopper: trial_plateau": false,
		"":                       false,
	} {
		if got := pruned(reason); got != want {
			t.Errorf("pruned(%q) = %v, want %v", reason, got, want)
		}
	}
}

// With several metrics the history holds each finished trial's last
// value of every metric, a maximized one negated, and leaves out the
// trials that lack one; the warm start's trials come negated alike.
func TestMultiObjectiveHistory(t *testing.T) {
	stp, fold := folder(t)
	fold(events.WriterClient, &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
		Name: "exp", Trainable: events.Trainable{Name: "fn"},
		TuneConfig: events.TuneConfig{
			NumSamples: 3, Metrics: []string{"loss", "acc"}, Modes: []string{"min", "max"}, SearchAlg: "tpe",
			WarmStartTrials: []events.WarmTrial{{Config: map[string]any{"x": 9.0}, Values: []float64{0.5, 0.75}}},
		},
	}})
	fold(events.WriterController, &events.ExperimentStarted{Run: 1, Session: "2026-01-02_03-04-05", Seed: 1, TrialIDPrefix: "abcde", NumTrials: 3})
	for i, id := range []string{"a", "b", "c"} {
		fold(events.WriterController, &events.TrialCreated{TrialID: id, Index: i, TrialName: "fn_" + id, DirName: "fn_" + id, Config: map[string]any{"x": float64(i)}})
		fold(events.WriterController, &events.TrialScheduled{TrialID: id, TrialName: "fn_" + id, DirName: "fn_" + id, Config: map[string]any{}, Trainable: events.Trainable{Name: "fn"}, HeartbeatTimeoutS: 3})
		fold(events.WriterRunner, &events.TrialStarted{TrialID: id, Attempt: 1, Runner: "r1"})
	}
	fold(events.WriterRunner, &events.TrialReported{TrialID: "a", Attempt: 1, Result: map[string]any{"training_iteration": 1, "loss": 0.25, "acc": 0.5}})
	fold(events.WriterRunner, &events.TrialCompleted{TrialID: "a", Attempt: 1, Status: events.StatusTerminated})
	fold(events.WriterRunner, &events.TrialReported{TrialID: "b", Attempt: 1, Result: map[string]any{"training_iteration": 1, "loss": 0.1}})
	fold(events.WriterRunner, &events.TrialCompleted{TrialID: "b", Attempt: 1, Status: events.StatusTerminated})

	got := map[int]tpe.Trial{}
	for _, h := range append(warmHistory(*stp, 0), tpeHistory(*stp)...) {
		got[h.Number] = h
	}
	if w := got[-1]; w.State != tpe.Complete || len(w.Values) != 2 || w.Values[0] != 0.5 || w.Values[1] != -0.75 {
		t.Errorf("the warm start's trial: %+v; want complete with values [0.5 -0.75]", w)
	}
	if a := got[0]; a.State != tpe.Complete || len(a.Values) != 2 || a.Values[0] != 0.25 || a.Values[1] != -0.5 {
		t.Errorf("trial a: %+v; want complete with values [0.25 -0.5] (acc maximized, negated)", a)
	}
	if b, ok := got[1]; ok {
		t.Errorf("trial b, which reported no acc, is in the history: %+v", b)
	}
	if c := got[2]; c.State != tpe.Running || c.Values != nil {
		t.Errorf("trial c: %+v; want running without values", c)
	}
}
