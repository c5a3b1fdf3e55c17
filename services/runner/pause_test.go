package runner

import (
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/session"
)

// After a pause, a retry resumes from the checkpoints the trial made since
// it ran again, not from the one it had when it was paused: the runner's
// own fold of the trial sees the pause end.
func TestAResumeAfterAPauseTakesTheNewerCheckpoints(t *testing.T) {
	b := bustest.Start(t).Bus("runner")
	s := New(b, Config{Name: "r1", WorkDir: t.TempDir(), Trainables: map[string]session.Func{}})
	ref := func(attempt, index int) events.CheckpointRef {
		name := events.CheckpointName(index)
		return events.CheckpointRef{Name: name, Index: index, Iteration: index + 1, Size: 1,
			Digest: "sha256:" + strings.Repeat("0", 64), Object: events.CheckpointObject("t1", attempt, name),
			Metrics: map[string]any{"training_iteration": index + 1}}
	}
	work := func(base int) *events.TrialScheduled {
		return &events.TrialScheduled{TrialID: "t1", TrialName: "train_t1", DirName: "train_t1", HeartbeatTimeoutS: 30,
			Config: map[string]any{}, Trainable: events.Trainable{Name: "fn"}, AttemptBase: base}
	}
	publish(t, b, events.WriterController, &events.TrialCreated{TrialID: "t1", TrialName: "train_t1", DirName: "train_t1", Config: map[string]any{}})
	publish(t, b, events.WriterController, work(0))
	publish(t, b, events.WriterRunner, &events.TrialStarted{TrialID: "t1", Attempt: 1, Runner: "r1"})
	publish(t, b, events.WriterRunner, &events.TrialCheckpointed{TrialID: "t1", Attempt: 1, Checkpoint: ref(1, 0)})
	publish(t, b, events.WriterController, &events.TrialStopRequested{TrialID: "t1", Reason: "paused", Pause: true})
	publish(t, b, events.WriterRunner, &events.TrialPaused{TrialID: "t1", Attempt: 1, Reason: "paused"})
	publish(t, b, events.WriterController, work(1))
	publish(t, b, events.WriterRunner, &events.TrialStarted{TrialID: "t1", Attempt: 2, Runner: "r1", RestoredFrom: events.CheckpointName(0)})
	publish(t, b, events.WriterRunner, &events.TrialCheckpointed{TrialID: "t1", Attempt: 2, Checkpoint: ref(2, 1)})

	a := &attempt{attemptRef: attemptRef{s: s, exp: "exp", trial: "t1", num: 3, log: testLog(t)}, work: work(1)}
	refs, donor, current, err := a.checkpoints(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) == 0 || refs[0].Name != events.CheckpointName(1) || donor != "" || current != 2 {
		t.Fatalf("resume candidates %v (donor %q, current attempt %d); want checkpoint_000001 of attempt 2 first", refs, donor, current)
	}
}
