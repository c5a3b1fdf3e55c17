package state

import (
	"slices"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
)

// newPBTLog is a log whose spec asks for PBT minimizing loss, perturbing
// every 2 iterations, with one trial in each quantile of two, and
// checkpoints kept one at a time.
func newPBTLog(t testing.TB) *log {
	l := &log{t: t, when: newLog(t).when}
	l.add(events.WriterClient, &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
		Name: "exp", Trainable: events.Trainable{Name: "fn"},
		TuneConfig: events.TuneConfig{
			NumSamples: 1, Metric: "loss", Mode: "min", Scheduler: "pbt",
			SchedulerConfig: map[string]any{
				"time_attr": "training_iteration", "perturbation_interval": 2.0, "quantile_fraction": 0.5,
				"resample_probability": 0.0, "hyperparam_mutations": map[string]any{"x": []any{0.0, 1.0, 2.0, 3.0}},
			},
		},
		RunConfig: events.RunConfig{CheckpointConfig: events.CheckpointConfig{NumToKeep: 1}},
	}})
	l.add(events.WriterController, &events.ExperimentStarted{Run: 1, Session: "2026-01-02_03-04-05", Seed: 1, TrialIDPrefix: "abcde", NumTrials: 2, StoragePath: "/tmp/x"})
	return l
}

// checkpoint reports a result with checkpoint number index.
func (l *log) checkpoint(id string, attempt, index, it int, loss float64) {
	name := events.CheckpointName(index)
	l.add(events.WriterRunner, &events.TrialCheckpointed{TrialID: id, Attempt: attempt, Checkpoint: events.CheckpointRef{
		Name: name, Index: index, Iteration: it, Size: 1, Digest: "sha256:" + strings.Repeat("0", 64),
		Object: events.CheckpointObject(id, attempt, name), Metrics: map[string]any{"training_iteration": it, "loss": loss},
	}})
}

// decide publishes the pending decisions, as the controller does.
func (l *log) decide() *Experiment {
	for _, d := range fold(l.evs).PendingDecisions() {
		l.add(events.WriterController, &d)
	}
	return fold(l.evs)
}

// A PBT exploit, from the decision to the exploiting trial's own next
// checkpoint: the trial pauses at the result decided on (later results
// of that attempt do not count), frees its slot, is scheduled again with
// the new config and the donor's checkpoint, goes on from the donor's
// iteration, and retention keeps the donor's checkpoint until the trial
// has one of its own.
func TestPBTExploitPausesAndResumesFromTheDonor(t *testing.T) {
	l := newPBTLog(t)
	for i, id := range []string{"a", "b"} {
		l.create(id, i)
		l.start(id, 1)
	}
	l.checkpoint("a", 1, 0, 2, 0.5) // alone: no quantiles yet
	l.checkpoint("b", 1, 0, 2, 2.0) // lower, but a has offered no checkpoint
	l.checkpoint("a", 1, 1, 4, 0.25)
	l.checkpoint("b", 1, 1, 4, 2.5) // lower: exploits a from checkpoint_000001
	e := l.decide()
	b := e.Trials["b"]
	if b.Exploit == nil || b.Exploit.Source != "a" || b.Exploit.Checkpoint.Name != "checkpoint_000001" || b.Exploit.Checkpoint.Iteration != 4 {
		t.Fatalf("b's exploit %+v, want a's checkpoint_000001 at iteration 4", b.Exploit)
	}
	if !strings.HasPrefix(b.PauseDecision, "scheduler: ") || b.Held {
		t.Fatalf("b pause decision %q held %v; want the scheduler's, not held", b.PauseDecision, b.Held)
	}
	if s := e.Stopping(); len(s) != 1 || s[0].ID != "b" || s[0].StopDecision != "" {
		t.Fatalf("trials to stop or pause: %v, want b to pause", s)
	}
	if got, want := e.PinnedObjects(), []string{events.CheckpointObject("a", 1, "checkpoint_000001")}; !slices.Equal(got, want) {
		t.Fatalf("pinned staged copies %v, want %v: the syncer must keep the donor's copy from the decision on", got, want)
	}

	l.checkpoint("b", 1, 2, 5, 0.01) // before the request: counted, not judged
	l.add(events.WriterController, &events.TrialStopRequested{TrialID: "b", Reason: b.PauseDecision, Pause: true})
	l.checkpoint("b", 1, 3, 6, 0.01) // after it: not counted
	l.checkpoint("a", 1, 2, 6, 0.2)  // num_to_keep 1, but checkpoint_000001 is pinned
	l.add(events.WriterRunner, &events.TrialPaused{TrialID: "b", Attempt: 1, Reason: b.PauseDecision})
	e = fold(l.evs)
	b = e.Trials["b"]
	if b.Status != events.StatusPaused || b.Scheduled || b.Iteration != 5 || names(b.Checkpoints)[0] != "checkpoint_000002" {
		t.Fatalf("b: %s scheduled %v iteration %d checkpoints %v; want PAUSED, unscheduled, at 5 with checkpoint_000002",
			b.Status, b.Scheduled, b.Iteration, names(b.Checkpoints))
	}
	if n := len(b.Decisions); n != 2 {
		t.Fatalf("b has %d decisions, want 2: none on the result after the exploit", n)
	}
	if got := names(e.Trials["a"].Checkpoints); len(got) != 2 || got[0] != "checkpoint_000001" {
		t.Fatalf("a keeps %v, want the pinned checkpoint_000001 and the latest", got)
	}
	if n := e.NeedingSchedule(1); len(n) != 1 || n[0].ID != "b" {
		t.Fatalf("needing schedule %v, want b", n)
	}
	if len(e.Stopping()) != 0 {
		t.Fatalf("trials to stop or pause once b paused: %v", e.Stopping())
	}

	// A trial that ends on its own after its pause was requested (a stop
	// criterion met by a result that no longer counts) is paused: it
	// resumes, and ends again with results that count.
	l2 := &log{t: t, when: l.when, seq: l.seq, evs: slices.Clone(l.evs)}
	l2.add(events.WriterController, &events.TrialCreated{TrialID: "c", Index: 2, TrialName: "fn_c", DirName: "fn_c", Config: map[string]any{"x": 2.0}})
	l2.add(events.WriterController, &events.TrialScheduled{TrialID: "c", TrialName: "fn_c", DirName: "fn_c", Config: map[string]any{}, Trainable: events.Trainable{Name: "fn"}, HeartbeatTimeoutS: 3})
	l2.start("c", 1)
	l2.add(events.WriterController, &events.TrialStopRequested{TrialID: "c", Reason: "paused", Pause: true})
	l2.report("c", 1, 1, 0.5)
	l2.add(events.WriterRunner, &events.TrialCompleted{TrialID: "c", Attempt: 1, Status: events.StatusTerminated, Reason: "stop_criteria"})
	if c := fold(l2.evs).Trials["c"]; c.Status != events.StatusPaused || c.NumResults != 0 {
		t.Fatalf("c ended on its own while pausing: %s with %d results; want PAUSED with none", c.Status, c.NumResults)
	}

	x := b.Exploit
	l.add(events.WriterController, &events.TrialScheduled{TrialID: "b", TrialName: "fn_b", DirName: "fn_b", Config: x.Config,
		Trainable: events.Trainable{Name: "fn"}, HeartbeatTimeoutS: 3, AttemptBase: 1, Exploit: &x.Exploit})
	l.add(events.WriterRunner, &events.TrialStarted{TrialID: "b", Attempt: 2, Runner: "r2", RestoredFrom: "a/checkpoint_000001"})
	l.report("b", 2, 5, 0.3)
	e = fold(l.evs)
	b = e.Trials["b"]
	if b.Status != events.StatusRunning || b.Iteration != 5 || b.LastResult["loss"] != 0.3 || b.ResumeFrom == nil {
		t.Fatalf("b: %s at %d, last %v, resume from %v; want RUNNING at 5 from the donor's checkpoint", b.Status, b.Iteration, b.LastResult, b.ResumeFrom)
	}
	if b.Config["x"] != x.Config["x"] || names(b.Checkpoints)[0] != "checkpoint_000002" {
		t.Fatalf("b's config %v and checkpoints %v; want the exploit's config and its own checkpoint kept", b.Config, names(b.Checkpoints))
	}
	l.checkpoint("b", 2, 3, 6, 0.05) // upper now: b offers its own checkpoint
	l.checkpoint("a", 1, 3, 8, 0.1)  // lower: a exploits b
	e = fold(l.evs)
	if got, want := e.PinnedObjects(), []string{events.CheckpointObject("b", 2, "checkpoint_000003")}; !slices.Equal(got, want) {
		t.Fatalf("pinned staged copies %v, want only b's that a exploits now", got)
	}
	if b := e.Trials["b"]; b.ResumeFrom != nil || slices.Contains(e.Judge.Exploiting, "b") {
		t.Fatalf("b resumes from %v, exploiting %v; want neither once b has a checkpoint of its own", b.ResumeFrom, e.Judge.Exploiting)
	}
	if a := e.Trials["a"]; a.Exploit == nil || a.Exploit.Source != "b" || a.Exploit.Checkpoint.Name != "checkpoint_000003" {
		t.Fatalf("a's exploit %+v, want b's checkpoint_000003", a.Exploit)
	}
	if got := names(e.Trials["a"].Checkpoints); len(got) != 1 || got[0] != "checkpoint_000003" {
		t.Errorf("a keeps %v once nothing pins, want only its latest", got)
	}
}

// A trial stopped while its pause was on the way to its runner (the
// scheduler paused it at a milestone, then stopped it when its bracket was
// halved) ends TERMINATED when the runner says it paused: the runner acts
// on the pause it got first, and nothing would ever stop a PAUSED trial
// whose stop is already requested, so the experiment would never end.
func TestStopRequestedWhilePausingEndsTheTrialWhenItPauses(t *testing.T) {
	l := newPBTLog(t)
	l.create("a", 0)
	l.start("a", 1)
	l.add(events.WriterController, &events.TrialStopRequested{TrialID: "a", Reason: "scheduler: paused at milestone 3", Pause: true})
	l.add(events.WriterController, &events.TrialStopRequested{TrialID: "a", Reason: "scheduler: stopped by successive halving"})
	l.add(events.WriterRunner, &events.TrialPaused{TrialID: "a", Attempt: 1, Reason: "scheduler: paused at milestone 3"})
	e := fold(l.evs)
	if a := e.Trials["a"]; a.Status != events.StatusTerminated || a.EndReason != "scheduler: stopped by successive halving" {
		t.Fatalf("a: %s ended %q; want TERMINATED by the stop", a.Status, a.EndReason)
	}
	if n := e.NeedingSchedule(1); len(n) != 0 {
		t.Fatalf("needing schedule %v, want none", n)
	}
}

// An exploit whose donor's recorded checkpoint retention has dropped
// since (num_to_keep 1, the donor checkpointed again before the exploit)
// resumes from the donor's kept checkpoint nearest it: the exploit is
// not lost, with its decision saying it exploited.
func TestPBTExploitOfADroppedCheckpointTakesTheDonorsLatest(t *testing.T) {
	l := newPBTLog(t)
	for i, id := range []string{"a", "b"} {
		l.create(id, i)
		l.start(id, 1)
	}
	l.checkpoint("a", 1, 0, 2, 0.5)
	l.checkpoint("b", 1, 0, 2, 2.0)
	l.checkpoint("a", 1, 1, 4, 0.25) // upper: a offers checkpoint_000001
	l.checkpoint("a", 1, 2, 5, 0.2)  // num_to_keep 1: checkpoint_000001 is dropped
	l.checkpoint("b", 1, 1, 4, 2.5)  // lower: exploits a
	e := l.decide()
	b := e.Trials["b"]
	if b.Exploit == nil || b.Exploit.Source != "a" || b.Exploit.Checkpoint.Name != "checkpoint_000002" || b.Exploit.Checkpoint.Iteration != 5 {
		t.Fatalf("b's exploit %+v (pause %q), want a's kept checkpoint_000002 at iteration 5", b.Exploit, b.PauseDecision)
	}
}

func TestNearestCheckpoint(t *testing.T) {
	kept := []events.CheckpointRef{{Index: 7}, {Index: 2}, {Index: 9}, {Index: 4}}
	for name, want := range map[string]int{
		"checkpoint_000005": 3,  // the newest before: 4
		"checkpoint_000003": 1,  // 2
		"checkpoint_000001": 1,  // none before: the oldest after, 2
		"checkpoint_000010": 2,  // 9
		"other":             -1, // no number
	} {
		if got := nearestCheckpoint(kept, name); got != want {
			t.Errorf("nearestCheckpoint(%s) = %d, want %d", name, got, want)
		}
	}
	if got := nearestCheckpoint(nil, "checkpoint_000001"); got != -1 {
		t.Errorf("nearestCheckpoint of none = %d, want -1", got)
	}
}
