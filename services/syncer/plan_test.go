package syncer

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/state"
)

var (
	at = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c1 = events.CheckpointRef{Name: "checkpoint_000001", Index: 1, Object: "t1/obj-1", Digest: "sha256:1"}
	c2 = events.CheckpointRef{Name: "checkpoint_000002", Index: 2, Object: "t1/obj-2", Digest: "sha256:2"}
	c3 = events.CheckpointRef{Name: "checkpoint_000003", Index: 3, Object: "t1/obj-3", Digest: "sha256:3"}
)

// trial is a trial "t1" of the given status, with kept checkpoints cs.
func trial(status string, failures int, cs ...events.CheckpointRef) *state.Trial {
	return &state.Trial{ID: "t1", DirName: "fn_t1", Config: map[string]any{"x": 1.0}, Status: status, NumFailures: failures, Checkpoints: cs}
}

func persisted(t *state.Trial, names ...string) *state.Trial {
	t.Persisted = map[string]bool{}
	for _, n := range names {
		t.Persisted[n] = true
	}
	return t
}

func experiment(trials ...*state.Trial) *state.Experiment {
	st := state.New("exp")
	for _, t := range trials {
		st.Trials[t.ID] = t
		st.Order = append(st.Order, t.ID)
	}
	return st
}

// jobOpts compare jobs field by field; no job and an empty list are the same.
var jobOpts = []cmp.Option{cmp.AllowUnexported(job{}, stagedCopy{}), cmpopts.EquateEmpty()}

func event(p events.Payload) *events.Event {
	return &events.Event{Experiment: "exp", Time: at, Data: p}
}

// TestPlan: what each event requires of storage, given the fold before
// and after it.
func TestPlan(t *testing.T) {
	arts := &events.TrialArtifacts{TrialID: "t1", Attempt: 1, Object: "t1/artifacts-1", Digest: "sha256:a"}
	tests := []struct {
		name   string
		before *state.Trial // the event's trial before the event
		after  *state.Trial
		ev     *events.Event
		want   []job
	}{{
		name:  "a created trial gets its params.json",
		after: trial(events.StatusPending, 0),
		ev:    event(&events.TrialCreated{TrialID: "t1"}),
		want:  []job{{kind: snapshot}, {kind: writeParams, trial: "t1"}},
	}, {
		name:   "a result is appended",
		before: trial(events.StatusRunning, 0),
		after:  trial(events.StatusRunning, 0),
		ev:     event(&events.TrialReported{TrialID: "t1", Attempt: 1}),
		want:   []job{{kind: snapshot}, {kind: appendResult, trial: "t1"}},
	}, {
		name:   "a checkpoint's result is appended, the checkpoint persisted and its copy spared",
		before: trial(events.StatusRunning, 0, c1),
		after:  trial(events.StatusRunning, 0, c1, c2),
		ev:     event(&events.TrialCheckpointed{TrialID: "t1", Attempt: 1, Checkpoint: c2}),
		want: []job{
			{kind: snapshot}, {kind: appendResult, trial: "t1"},
			{kind: spare, trial: "t1", object: c2.Object},
			{kind: persist, trial: "t1", ckpt: &c2},
		},
	}, {
		name:   "a checkpoint storage holds already is not persisted again",
		before: trial(events.StatusRunning, 0),
		after:  persisted(trial(events.StatusRunning, 0, c1), c1.Name),
		ev:     event(&events.TrialCheckpointed{TrialID: "t1", Attempt: 1, Checkpoint: c1}),
		want:   []job{{kind: snapshot}, {kind: appendResult, trial: "t1"}, {kind: spare, trial: "t1", object: c1.Object}},
	}, {
		name:   "a retry that resumed from an older checkpoint spares that one",
		before: trial(events.StatusPending, 1, c1, c2),
		after:  trial(events.StatusRunning, 1, c1),
		ev:     event(&events.TrialStarted{TrialID: "t1", Attempt: 2, RestoredFrom: c1.Name}),
		want:   []job{{kind: snapshot}, {kind: spare, trial: "t1", object: c1.Object}},
	}, {
		name:   "a start without a checkpoint spares nothing",
		before: trial(events.StatusPending, 0),
		after:  trial(events.StatusRunning, 0),
		ev:     event(&events.TrialStarted{TrialID: "t1", Attempt: 1}),
		want:   []job{{kind: snapshot}},
	}, {
		name:   "a retried failure is written and the kept checkpoints checked newest first",
		before: trial(events.StatusRunning, 0, c1, c2, c3),
		after:  persisted(trial(events.StatusPending, 1, c1, c2, c3), c1.Name, c2.Name),
		ev:     event(&events.TrialFailed{TrialID: "t1", Attempt: 1, Counted: true}),
		want: []job{
			{kind: snapshot},
			{kind: checkResumable, trial: "t1", copies: []stagedCopy{
				{ref: c3, object: c3.Object}, {ref: c2, object: c2.Object, persisted: true}, {ref: c1, object: c1.Object, persisted: true},
			}},
			{kind: appendFailure, trial: "t1", at: at},
		},
	}, {
		name:   "a retried failure without a checkpoint checks nothing",
		before: trial(events.StatusRunning, 0),
		after:  trial(events.StatusPending, 1),
		ev:     event(&events.TrialFailed{TrialID: "t1", Attempt: 1, Counted: true}),
		want:   []job{{kind: snapshot}, {kind: appendFailure, trial: "t1", at: at}},
	}, {
		name:   "a final failure is written and the trial's files uploaded",
		before: trial(events.StatusRunning, 2, c1),
		after:  trial(events.StatusError, 3, c1),
		ev:     event(&events.TrialFailed{TrialID: "t1", Attempt: 3, Counted: true, Final: true}),
		want:   []job{{kind: snapshot}, {kind: appendFailure, trial: "t1", at: at}, {kind: uploadTrial, trial: "t1"}},
	}, {
		name:   "a failure that does not count writes no entry",
		before: trial(events.StatusRunning, 0, c1),
		after:  trial(events.StatusPending, 0, c1),
		ev:     event(&events.TrialFailed{TrialID: "t1", Attempt: 1, Cause: events.CausePreempted}),
		want:   []job{{kind: snapshot}},
	}, {
		name:   "a completed trial's files are uploaded",
		before: trial(events.StatusRunning, 0),
		after:  trial(events.StatusTerminated, 0),
		ev:     event(&events.TrialCompleted{TrialID: "t1", Attempt: 1, Status: events.StatusTerminated}),
		want:   []job{{kind: snapshot}, {kind: uploadTrial, trial: "t1"}},
	}, {
		name:   "artifacts are copied",
		before: trial(events.StatusRunning, 0),
		after:  trial(events.StatusRunning, 0),
		ev:     event(arts),
		want:   []job{{kind: snapshot}, {kind: copyArtifacts, trial: "t1", artifacts: arts}},
	}, {
		name:  "an interrupt syncs at once",
		after: trial(events.StatusRunning, 0),
		ev:    event(&events.ExperimentInterrupted{}),
		want:  []job{{kind: snapshot}, {kind: syncNow}},
	}, {
		name:  "the syncer's own sync needs no snapshot",
		after: trial(events.StatusRunning, 0),
		ev:    event(&events.SyncCompleted{Seq: 9}),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := experiment(tt.after)
			got := plan(st, st, tt.before, tt.ev)
			if diff := cmp.Diff(tt.want, got, jobOpts...); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanRestored: a restored state replaces the fold; trials it created
// or re-specified get their params.json, and every latest checkpoint is
// spared.
func TestPlanRestored(t *testing.T) {
	same := func() *state.Trial { return trial(events.StatusTerminated, 0, c1) }
	prev := experiment(same(), &state.Trial{ID: "t2", DirName: "fn_t2", Config: map[string]any{"x": 2.0}}, &state.Trial{ID: "t3", DirName: "fn_t3"})
	respecified := &state.Trial{ID: "t2", DirName: "fn_t2", Config: map[string]any{"x": "object"}, Checkpoints: []events.CheckpointRef{c2}}
	moved := &state.Trial{ID: "t3", DirName: "fn_t3_moved"}
	created := &state.Trial{ID: "t4", DirName: "fn_t4"}
	st := experiment(same(), respecified, moved, created)
	got := plan(prev, st, nil, event(&events.ExperimentRestored{}))
	want := []job{
		{kind: writeParams, trial: "t2"}, {kind: writeParams, trial: "t3"}, {kind: writeParams, trial: "t4"},
		{kind: spare, trial: "t1", object: c1.Object}, {kind: spare, trial: "t2", object: c2.Object},
		{kind: snapshot},
	}
	if diff := cmp.Diff(want, got, jobOpts...); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestDeletions: a dropped checkpoint is deleted once storage holds it
// and no persistence of it is queued or running.
func TestDeletions(t *testing.T) {
	tr := persisted(trial(events.StatusRunning, 0, c3), c1.Name, c2.Name, c3.Name)
	tr.Dropped = []events.CheckpointRef{c1, c2, {Name: "checkpoint_000000", Object: "t1/obj-0"}}
	st := experiment(tr)
	busy := func(key string) bool { return key == persistKey(tr, c2) }
	want := []job{{kind: deleteCheckpoint, trial: "t1", ckpt: &c1}}
	if diff := cmp.Diff(want, deletions(st, busy), jobOpts...); diff != "" {
		t.Errorf("deletions (-want +got):\n%s", diff)
	}
}

// BenchmarkPlan is plan's cost for the commonest event, a report.
func BenchmarkPlan(b *testing.B) {
	before, after := trial(events.StatusRunning, 0, c1), trial(events.StatusRunning, 0, c1)
	st := experiment(after)
	ev := event(&events.TrialReported{TrialID: "t1", Attempt: 1})
	b.ReportAllocs()
	for b.Loop() {
		plan(st, st, before, ev)
	}
}
