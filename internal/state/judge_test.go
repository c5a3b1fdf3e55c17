package state

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
)

// newTunedLog is newLog with a spec that asks for ASHA (grace 1,
// reduction factor 2, max_t 4: rungs at 1, 2 and 4) minimizing loss.
func newTunedLog(t testing.TB) *log {
	l := &log{t: t, when: newLog(t).when}
	l.add(events.WriterClient, &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
		Name: "exp", Trainable: events.Trainable{Name: "fn"},
		TuneConfig: events.TuneConfig{
			NumSamples: 1, Metric: "loss", Mode: "min", Scheduler: "asha",
			SchedulerConfig: map[string]any{"grace_period": 1.0, "reduction_factor": 2.0, "max_t": 4.0},
		},
	}})
	l.add(events.WriterController, &events.ExperimentStarted{Run: 1, Session: "2026-01-02_03-04-05", Seed: 1, TrialIDPrefix: "abcde", NumTrials: 3, StoragePath: "/tmp/x"})
	return l
}

// The fold judges each result with the scheduler, in log order: ASHA's
// rung records and stops are pending decisions until the log holds them
// as trial.decided; then the stop is the controller's to request, with
// its reason, and the trial's end lets the scheduler go of it.
func TestFoldJudgesResultsWithTheScheduler(t *testing.T) {
	l := newTunedLog(t)
	for i, id := range []string{"a", "b", "c"} {
		l.create(id, i)
		l.start(id, 1)
	}
	l.report("a", 1, 1, 0.5) // first at rung 1: no cutoff, recorded
	l.report("b", 1, 1, 0.9) // rewards: a -0.5; cutoff -0.5; -0.9 < -0.5: stop
	l.report("c", 1, 1, 0.1) // a -0.5, b -0.9: cutoff -0.7; -0.1 passes
	e := fold(l.evs)
	type got struct{ Trial, Action string }
	var pending []got
	for _, d := range e.PendingDecisions() {
		pending = append(pending, got{d.TrialID, d.Action})
	}
	want := []got{{"a", "continue"}, {"b", "stop"}, {"c", "continue"}}
	if diff := cmp.Diff(want, pending); diff != "" {
		t.Fatalf("pending decisions (-want +got):\n%s", diff)
	}
	if s := e.Stopping(); len(s) != 1 || s[0].ID != "b" {
		t.Fatalf("trials to stop %v, want [b]", s)
	}
	b := e.Trials["b"]
	if !strings.HasPrefix(b.StopDecision, "scheduler: ") || !strings.Contains(b.StopDecision, "cutoff") {
		t.Fatalf("b's stop decision %q, want the scheduler's reason with its cutoff", b.StopDecision)
	}
	d := e.PendingDecisions()[1]
	if rung, _ := d.Detail["rung"].(map[string]any); rung == nil || rung["cutoff"] != -0.5 {
		t.Fatalf("b's decision detail %v, want its rung with cutoff -0.5", d.Detail)
	}

	for _, d := range e.PendingDecisions() {
		l.add(events.WriterController, &d)
	}
	e = fold(l.evs)
	if n := len(e.PendingDecisions()); n != 0 {
		t.Fatalf("%d decisions pending once the log holds them all", n)
	}
	if s := e.Stopping(); len(s) != 1 || s[0].ID != "b" {
		t.Fatalf("trials to stop %v, want [b]", s)
	}
	l.add(events.WriterController, &events.TrialStopRequested{TrialID: "b", Reason: b.StopDecision})
	l.add(events.WriterRunner, &events.TrialCompleted{TrialID: "b", Attempt: 1, Status: events.StatusTerminated, Reason: b.StopDecision})
	e = fold(l.evs)
	if len(e.Stopping()) != 0 || len(e.Judge.Stopping) != 0 {
		t.Fatalf("b still to stop after it ended: %v", e.Judge.Stopping)
	}
	if tb := e.Trials["b"]; tb.Status != events.StatusTerminated || tb.EndReason != b.StopDecision {
		t.Fatalf("b ended %s (%q), want TERMINATED with the decision's reason", tb.Status, tb.EndReason)
	}

	// A result that is not new is not judged again.
	l.report("c", 1, 1, 0.1)
	if n := len(fold(l.evs).PendingDecisions()); n != 0 {
		t.Fatalf("a repeated result made %d decisions", n)
	}
}

// A spec whose scheduler cannot be built says why, and the fold keeps no
// decisions.
func TestJudgeErrNamesTheProblem(t *testing.T) {
	l := newTunedLog(t)
	l.evs[0].Data.(*events.ExperimentSubmitted).Spec.TuneConfig.SchedulerConfig["reduction_factor"] = 1.0
	e := fold(l.evs)
	if err := e.JudgeErr(); err == nil || !strings.Contains(err.Error(), "reduction_factor") {
		t.Fatalf("JudgeErr() = %v, want one naming reduction_factor", err)
	}
}

// A result that comes with a checkpoint is announced by trial.checkpointed
// (the two are one report): the scheduler judges it there, once.
func TestAResultWithACheckpointIsJudged(t *testing.T) {
	l := newTunedLog(t)
	for i, id := range []string{"a", "b"} {
		l.create(id, i)
		l.start(id, 1)
	}
	l.report("a", 1, 1, 0.5)
	result := map[string]any{"training_iteration": 1, "loss": 0.9, "checkpoint_dir_name": events.CheckpointName(1)}
	l.add(events.WriterRunner, &events.TrialCheckpointed{TrialID: "b", Attempt: 1, Checkpoint: events.CheckpointRef{
		Name: events.CheckpointName(1), Index: 1, Iteration: 1, Size: 1, Digest: "sha256:" + strings.Repeat("0", 64),
		Object: events.CheckpointObject("b", 1, events.CheckpointName(1)), Metrics: result,
	}})
	l.add(events.WriterRunner, &events.TrialReported{TrialID: "b", Attempt: 1, Result: result}) // the same result again
	e := fold(l.evs)
	if b := e.Trials["b"]; b.StopDecision == "" || len(b.Decisions) != 1 {
		t.Fatalf("b: decisions %v, stop %q; want one, a stop at rung 1", b.Decisions, b.StopDecision)
	}
}
