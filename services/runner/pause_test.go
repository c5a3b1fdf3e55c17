package runner

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/ckpt"
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

// A resume whose work says the controller had read every event a runner
// wrote about the trial, with none written since, starts from the work's
// checkpoint without reading the trial's history. One whose work is older
// than a runner's last word reads the history (a checkpoint the attempt
// presumed lost made after the work was scheduled is the newest), and so
// does one whose work names a checkpoint it cannot resume from: it takes
// the one kept before.
func TestAResumeReadsTheHistoryOnlyWhenTheWorkCannotSay(t *testing.T) {
	srv := bustest.Start(t)
	b := srv.Bus("runner")
	s := New(b, Config{Name: "r1", WorkDir: t.TempDir(), Trainables: map[string]session.Func{"fn": reportOnce}})
	var read []string
	s.hooks.historyRead = func(trial string) { read = append(read, trial) }
	obs, err := b.Checkpoints(t.Context(), "exp")
	if err != nil {
		t.Fatal(err)
	}
	// stage stages checkpoint index of trial's attempt and returns its
	// reference; a lie names other bytes than the staged ones.
	stage := func(trial string, attempt, index int, lie bool) events.CheckpointRef {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(strconv.Itoa(index)), 0o644); err != nil {
			t.Fatal(err)
		}
		name := events.CheckpointName(index)
		object := events.CheckpointObject(trial, attempt, name)
		staged, err := ckpt.Stage(t.Context(), obs, object, dir)
		if err != nil {
			t.Fatal(err)
		}
		if lie {
			staged.Digest = "sha256:" + strings.Repeat("0", 64)
		}
		return events.CheckpointRef{Name: name, Index: index, Iteration: index + 1, Size: staged.Size, Digest: staged.Digest,
			Object: object, Metrics: map[string]any{"training_iteration": index + 1}}
	}
	work := func(trial string, cp *events.CheckpointRef, runnerSeq uint64) *events.TrialScheduled {
		return &events.TrialScheduled{TrialID: trial, TrialName: "fn_" + trial, DirName: "fn_" + trial, HeartbeatTimeoutS: 30,
			Config: map[string]any{}, Trainable: events.Trainable{Name: "fn"}, AttemptBase: 1, Checkpoint: cp, RunnerSeq: runnerSeq}
	}
	// history publishes a trial's first attempt with checkpoints cps,
	// paused or (lost) not, and returns the log sequence of its last event.
	history := func(trial string, paused bool, cps ...events.CheckpointRef) (last uint64) {
		publish(t, b, events.WriterController, &events.TrialCreated{TrialID: trial, TrialName: "fn_" + trial, DirName: "fn_" + trial, Config: map[string]any{}})
		ps := []events.Payload{&events.TrialStarted{TrialID: trial, Attempt: 1, Runner: "r0"}}
		for _, cp := range cps {
			ps = append(ps, &events.TrialCheckpointed{TrialID: trial, Attempt: 1, Checkpoint: cp})
		}
		if paused {
			ps = append(ps, &events.TrialPaused{TrialID: trial, Attempt: 1, Reason: "pbt"})
		}
		for _, p := range ps {
			seq, err := b.Publish(t.Context(), b.Event("exp", events.WriterRunner, p))
			if err != nil {
				t.Fatal(err)
			}
			last = seq
		}
		return last
	}
	resumedFrom := func(trial string) string {
		t.Helper()
		ev, _, err := b.LastEvent(t.Context(), events.Subject("exp", events.WriterRunner, events.TypeTrialStarted, trial))
		if err != nil {
			t.Fatal(err)
		}
		p, ok := ev.Data.(*events.TrialStarted)
		if !ok || p.Attempt != 2 {
			t.Fatalf("trial %s: last start %+v, want attempt 2", trial, ev.Data)
		}
		return p.RestoredFrom
	}

	// Nothing since the work: its checkpoint, no history read.
	cp1 := stage("quiet", 1, 1, false)
	seq := history("quiet", true, stage("quiet", 1, 0, false), cp1)
	runWork(t, srv.JetStream(), s, work("quiet", &cp1, seq))
	if got := resumedFrom("quiet"); got != cp1.Name || len(read) != 0 {
		t.Errorf("quiet: resumed from %q after reading the history of %v; want %s with no history read", got, read, cp1.Name)
	}

	// A checkpoint made after the work was scheduled, by the attempt
	// presumed lost: the history names it.
	read = nil
	cp0 := stage("late", 1, 0, false)
	seq = history("late", false, cp0)
	late := stage("late", 1, 1, false)
	publish(t, b, events.WriterRunner, &events.TrialCheckpointed{TrialID: "late", Attempt: 1, Checkpoint: late})
	runWork(t, srv.JetStream(), s, work("late", &cp0, seq))
	if got := resumedFrom("late"); got != late.Name || !slices.Equal(read, []string{"late"}) {
		t.Errorf("late: resumed from %q after reading the history of %v; want %s, read", got, read, late.Name)
	}

	// The work's checkpoint is a lie: the one kept before it.
	read = nil
	cp0 = stage("lie", 1, 0, false)
	lie := stage("lie", 1, 1, true)
	seq = history("lie", true, cp0, lie)
	runWork(t, srv.JetStream(), s, work("lie", &lie, seq))
	if got := resumedFrom("lie"); got != cp0.Name || !slices.Equal(read, []string{"lie"}) {
		t.Errorf("lie: resumed from %q after reading the history of %v; want %s, read", got, read, cp0.Name)
	}
}
