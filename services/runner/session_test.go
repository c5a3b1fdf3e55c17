package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/session"
)

// testAttempt is an attempt of work on a runner of a fresh nats-server,
// without a work message: enough for its session.
func testAttempt(t *testing.T, work *events.TrialScheduled) *attempt {
	s := New(bustest.Start(t).Bus("runner"), Config{Name: "r1", WorkDir: t.TempDir()})
	a := &attempt{
		attemptRef: attemptRef{s: s, exp: "exp", trial: work.TrialID, num: 1, log: testLog(t)},
		work:       work, tries: 1, dir: t.TempDir(),
	}
	a.ctx, a.cancel = context.WithCancelCause(t.Context())
	t.Cleanup(func() { a.cancel(nil) })
	a.stopper = &stopper{cancel: a.cancel}
	return a
}

// logged describes the attempt's events in the log, in order, and returns
// the last checkpoint's reference.
func logged(t *testing.T, a *attempt) ([]string, events.CheckpointRef) {
	t.Helper()
	var got []string
	var ref events.CheckpointRef
	err := a.s.bus.Replay(t.Context(), events.ExperimentSubjects(a.exp), func(ev *events.Event) {
		switch p := ev.Data.(type) {
		case *events.TrialReported:
			for _, r := range append(p.Earlier, p.Result) {
				got = append(got, fmt.Sprintf("reported(%v,done=%v,checkpoint=%v)", r["training_iteration"], r["done"], r["checkpoint_dir_name"]))
			}
		case *events.TrialCheckpointed:
			ref = p.Checkpoint
			got = append(got, fmt.Sprintf("checkpointed(%s,%d)", ref.Name, ref.Iteration))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, ref
}

// checkpointDir returns a directory holding one file, "state".
func checkpointDir(t *testing.T, state string) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSessionReport: a reported checkpoint is staged and in the log before
// its result, which names it; the result that meets a stop criterion is
// done and stops the attempt, and later reports are refused.
func TestSessionReport(t *testing.T) {
	a := testAttempt(t, &events.TrialScheduled{TrialID: "t1", Stop: map[string]float64{"training_iteration": 2}})
	sess := a.newSession(time.Now())
	ctx := t.Context()
	if stop, err := sess.Report(ctx, map[string]any{"loss": 1.0}, ""); stop || err != nil {
		t.Fatalf("first report: stop %t, %v", stop, err)
	}
	if stop, err := sess.Report(ctx, map[string]any{"loss": 0.5}, checkpointDir(t, "2")); !stop || err != nil {
		t.Fatalf("report meeting the criterion: stop %t, %v; want stop", stop, err)
	}
	if r := a.stopper.Reason(); r != "stop_criteria" || !errors.Is(context.Cause(a.ctx), session.ErrStopped) {
		t.Errorf("stop reason %q, context cause %v; want stop_criteria, %v", r, context.Cause(a.ctx), session.ErrStopped)
	}
	if stop, err := sess.Report(ctx, map[string]any{"loss": 0.1}, ""); !stop || !errors.Is(err, session.ErrStopped) {
		t.Errorf("report after the stop: stop %t, %v; want stop, %v", stop, err, session.ErrStopped)
	}
	if err := sess.reports.flush(); err != nil {
		t.Fatal(err)
	}
	got, ref := logged(t, a)
	name := ckpt.Name(0)
	want := []string{"reported(1,done=false,checkpoint=<nil>)", "checkpointed(" + name + ",2)", "reported(2,done=true,checkpoint=" + name + ")"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the log (-want +got):\n%s", diff)
	}
	obs, err := a.s.store(ctx, a.exp)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "fetched")
	if err := ckpt.Fetch(ctx, obs, ref.Object, ref.Digest, out); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "state")); err != nil || string(b) != "2" {
		t.Errorf("staged checkpoint holds %q, %v; want the reported directory's", b, err)
	}
}

// TestSessionResumes: an attempt resuming from a checkpoint numbers its
// iterations and checkpoints on from it, and gives the trainable its copy.
func TestSessionResumes(t *testing.T) {
	a := testAttempt(t, &events.TrialScheduled{TrialID: "t1"})
	sess := a.newSession(time.Now())
	restored := checkpointDir(t, "5")
	sess.resumeFrom(&events.CheckpointRef{Name: ckpt.Name(3), Index: 3, Iteration: 5, Metrics: map[string]any{"time_total_s": 10.0}}, restored)
	if sess.Checkpoint() != restored {
		t.Errorf("Checkpoint() = %q, want %q", sess.Checkpoint(), restored)
	}
	if _, err := sess.Report(t.Context(), map[string]any{"loss": 0.5}, checkpointDir(t, "6")); err != nil {
		t.Fatal(err)
	}
	if err := sess.reports.flush(); err != nil {
		t.Fatal(err)
	}
	got, _ := logged(t, a)
	name := ckpt.Name(4)
	want := []string{"checkpointed(" + name + ",6)", "reported(6,done=false,checkpoint=" + name + ")"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the log (-want +got):\n%s", diff)
	}
}

// TestSessionRefusesCheckpointWithoutScore: a checkpoint whose result has a
// checkpoint_score_attribute that is not a number is refused, as in Ray,
// and nothing of the report is stored.
func TestSessionRefusesCheckpointWithoutScore(t *testing.T) {
	a := testAttempt(t, &events.TrialScheduled{TrialID: "t1", CheckpointScoreAttribute: "acc"})
	sess := a.newSession(time.Now())
	_, err := sess.Report(t.Context(), map[string]any{"acc": "high"}, checkpointDir(t, "1"))
	if err == nil || !strings.Contains(err.Error(), "This attribute must be numerical") {
		t.Fatalf("Report = %v, want the checkpoint refused", err)
	}
	if err := sess.reports.flush(); err != nil {
		t.Fatal(err)
	}
	if got, _ := logged(t, a); len(got) != 0 {
		t.Errorf("the log holds %v, want nothing", got)
	}
}
