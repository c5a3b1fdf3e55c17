package syncer_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/services/syncer"
)

// folder writes a checkpoint folder holding one file.
func folder(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "step"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkpointed publishes trial.checkpointed for checkpoint index of
// attempt 1, staged as object with digest.
func (s *script) checkpointed(index int, object string, staged ckpt.Staged) {
	s.add(events.WriterRunner, &events.TrialCheckpointed{TrialID: trial, Attempt: 1, Checkpoint: events.CheckpointRef{
		Name: ckpt.Name(index), Index: index, Object: object, Size: staged.Size, Digest: staged.Digest, Iteration: index,
	}})
}

// announced waits for an event of the syncer that match accepts.
func (s *script) announced(what string, match func(*events.Event) bool) {
	s.t.Helper()
	bustest.Eventually(s.t, wait, what, func() bool { return slices.ContainsFunc(bustest.Log(s.t, s.b, exp), match) })
}

func persistedEvent(name string) func(*events.Event) bool {
	return func(ev *events.Event) bool {
		p, ok := ev.Data.(*events.CheckpointPersisted)
		return ok && p.Name == name
	}
}

func syncFailedFor(name, text string) func(*events.Event) bool {
	return func(ev *events.Event) bool {
		f, ok := ev.Data.(*events.SyncFailed)
		return ok && strings.Contains(f.Operation, name) && strings.Contains(f.Error, text)
	}
}

// TestSyncerKeepsTheLatestStagedCopy: an older checkpoint whose first
// persistence failed is persisted again after a newer one. Removing the
// staged copies that storage holds must still spare the trial's latest,
// which retries resume from (it was removed, and every retry failed with
// "the staged copy was removed").
func TestSyncerKeepsTheLatestStagedCopy(t *testing.T) {
	srv := bustest.Start(t)
	s := begin(t, srv)
	s.start(1)
	ctx := t.Context()
	obs, err := s.b.Checkpoints(ctx, exp)
	if err != nil {
		t.Fatal(err)
	}
	src1, src2 := folder(t, "1"), folder(t, "2")
	// Checkpoint 1's event comes before its staged copy can be read.
	probe, err := ckpt.Stage(ctx, obs, "probe", src1)
	if err != nil {
		t.Fatal(err)
	}
	obj1, obj2 := ckpt.LegacyObjectName(trial, ckpt.Name(1)), ckpt.LegacyObjectName(trial, ckpt.Name(2))
	s.checkpointed(1, obj1, probe)
	runSyncerWith(t, srv, syncer.Config{Period: 20 * time.Millisecond, RetryBackoff: time.Millisecond})
	s.announced("a failed persistence of checkpoint 1", syncFailedFor(ckpt.Name(1), ""))

	staged2, err := ckpt.Stage(ctx, obs, obj2, src2)
	if err != nil {
		t.Fatal(err)
	}
	s.checkpointed(2, obj2, staged2)
	s.announced("checkpoint 2 persisted", persistedEvent(ckpt.Name(2)))
	if _, err := ckpt.Stage(ctx, obs, obj1, src1); err != nil {
		t.Fatal(err)
	}
	s.announced("checkpoint 1 persisted", persistedEvent(ckpt.Name(1)))

	// Persistence runs in order: once artifacts staged after checkpoint 1
	// are in storage, whatever followed checkpoint 1's copy is done.
	art := folder(t, "artifact")
	stagedArt, err := ckpt.Stage(ctx, obs, "artifacts/"+trial+"/1", art)
	if err != nil {
		t.Fatal(err)
	}
	s.add(events.WriterRunner, &events.TrialArtifacts{TrialID: trial, Attempt: 1, Object: "artifacts/" + trial + "/1", Files: 1, Size: stagedArt.Size, Digest: stagedArt.Digest})
	bustest.Eventually(t, wait, "the artifacts in storage", func() bool {
		_, err := os.Stat(filepath.Join(s.storage, exp, trialD, "step"))
		return err == nil
	})

	if _, err := obs.GetInfo(ctx, obj2); err != nil {
		t.Fatalf("the latest checkpoint's staged copy: %v; want it kept for retries to resume from", err)
	}
	if _, err := obs.GetInfo(ctx, obj1, jetstream.GetObjectInfoShowDeleted()); err != nil {
		t.Fatal(err)
	}
}

// TestSyncerDoesNotWaitForACheckpointItCannotPersist: a staged copy that
// holds other bytes than its event names can never be persisted. The
// syncer gives up on it, says so, and still writes and confirms the final
// state: the experiment's end is not held back by one checkpoint.
func TestSyncerDoesNotWaitForACheckpointItCannotPersist(t *testing.T) {
	srv := bustest.Start(t)
	s := begin(t, srv)
	s.start(1)
	ctx := t.Context()
	obs, err := s.b.Checkpoints(ctx, exp)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ckpt.Stage(ctx, obs, "probe", folder(t, "1"))
	if err != nil {
		t.Fatal(err)
	}
	obj := ckpt.LegacyObjectName(trial, ckpt.Name(1))
	if _, err := ckpt.Stage(ctx, obs, obj, folder(t, "other bytes")); err != nil {
		t.Fatal(err)
	}
	s.checkpointed(1, obj, want)
	s.report(1, 1)
	s.end(1)
	workDir := t.TempDir()
	runSyncerWith(t, srv, syncer.Config{WorkDir: workDir, Period: 20 * time.Millisecond, RetryBackoff: time.Millisecond})

	st, _ := s.finalState()
	if st.Trials[trial].Persisted[ckpt.Name(1)] {
		t.Fatalf("the state says %s persisted", ckpt.Name(1))
	}
	s.announced("the syncer giving up on the checkpoint", syncFailedFor(ckpt.Name(1), "gave up"))
	s.announced("sync.completed for the final state", func(ev *events.Event) bool {
		p, ok := ev.Data.(*events.SyncCompleted)
		return ok && p.Seq >= st.LastSeq
	})
	// The syncer is done with the experiment: its staging is removed.
	bustest.Eventually(t, wait, "the syncer to finish the experiment", func() bool {
		_, err := os.Stat(filepath.Join(workDir, exp))
		return errors.Is(err, os.ErrNotExist)
	})
}

// TestSyncerWritesParamsOfTrialsARestoreCreated: restart_errored replaces
// an errored trial by a new one inside the restored state, with no
// trial.created event. Its folder gets params.json all the same.
func TestSyncerWritesParamsOfTrialsARestoreCreated(t *testing.T) {
	srv := bustest.Start(t)
	s := begin(t, srv)
	s.start(1)
	s.report(1, 1)
	s.add(events.WriterRunner, &events.TrialFailed{TrialID: trial, Attempt: 1, Cause: events.CauseError, Error: "boom", Final: true, Counted: true})
	s.add(events.WriterController, &events.ExperimentInterrupted{Reason: "stopped"})
	runSyncer(t, srv)

	st := state.New(exp)
	for _, ev := range bustest.Log(t, s.b, exp) {
		st, _, _ = state.Fold(t.Context(), st, ev, nil)
	}
	const newID, newDir = "fghij_00000", "fn_fghij_00000_0_x=1_2026-01-03_03-04-05"
	cfg := restore.FromFlags(true, false, true)
	restored, err := restore.Apply(st, cfg, func(old *state.Trial) *state.Trial { return restore.NewTrial(old, newID, "fn", newDir) })
	if err != nil {
		t.Fatal(err)
	}
	object, digest, err := restorestate.Stage(t.Context(), s.b, restored, 2)
	if err != nil {
		t.Fatal(err)
	}
	s.add(events.WriterRestorer, &events.ExperimentRestored{Resume: cfg, Source: "log", Object: object, Digest: digest})

	var raw []byte
	bustest.Eventually(t, wait, "params.json of the restarted trial", func() bool {
		raw, err = s.dir().Read(newDir + "/params.json")
		return err == nil
	})
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil || !cmp.Equal(got, config) {
		t.Errorf("params.json = %s (%v), want %v", raw, err, config)
	}
}

// TestSyncerStagesTheLatestAgainForARetry: runners read checkpoints only
// from the Object Store. When a trial's latest staged copy is lost and an
// attempt fails, the syncer stages the persisted copy again, and the
// retry can resume from it with the digest its event names.
func TestSyncerStagesTheLatestAgainForARetry(t *testing.T) {
	srv := bustest.Start(t)
	s := begin(t, srv)
	s.start(1)
	ctx := t.Context()
	obs, err := s.b.Checkpoints(ctx, exp)
	if err != nil {
		t.Fatal(err)
	}
	obj := ckpt.AttemptObjectName(trial, 1, ckpt.Name(1))
	staged, err := ckpt.Stage(ctx, obs, obj, folder(t, "1"))
	if err != nil {
		t.Fatal(err)
	}
	s.checkpointed(1, obj, staged)
	runSyncerWith(t, srv, syncer.Config{Period: 20 * time.Millisecond, RetryBackoff: time.Millisecond})
	s.announced("checkpoint 1 persisted", persistedEvent(ckpt.Name(1)))
	if err := obs.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	s.fail(1, "resume trial: the staged copy was removed")

	dst := filepath.Join(t.TempDir(), "resume")
	bustest.Eventually(t, wait, "the latest checkpoint staged again", func() bool {
		return ckpt.Fetch(ctx, obs, obj, staged.Digest, dst) == nil
	})
	if b, err := os.ReadFile(filepath.Join(dst, "step")); err != nil || string(b) != "1" {
		t.Fatalf("step = %q, %v; want \"1\"", b, err)
	}
}

// TestSyncerMarksAGoneCheckpoint: a latest checkpoint whose staged copy
// holds other bytes and that storage never received is gone everywhere.
// The syncer marks it so, and the runner that would resume from it learns
// why (ckpt.ErrGone) instead of failing on it again and again.
func TestSyncerMarksAGoneCheckpoint(t *testing.T) {
	srv := bustest.Start(t)
	s := begin(t, srv)
	s.start(1)
	ctx := t.Context()
	obs, err := s.b.Checkpoints(ctx, exp)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ckpt.Stage(ctx, obs, "probe", folder(t, "1"))
	if err != nil {
		t.Fatal(err)
	}
	obj := ckpt.LegacyObjectName(trial, ckpt.Name(1))
	if _, err := ckpt.Stage(ctx, obs, obj, folder(t, "other bytes")); err != nil {
		t.Fatal(err)
	}
	s.checkpointed(1, obj, want)
	runSyncerWith(t, srv, syncer.Config{Period: 20 * time.Millisecond, RetryBackoff: time.Millisecond})
	s.fail(1, "resume trial: checkpoint digest mismatch")

	bustest.Eventually(t, wait, "the checkpoint marked gone", func() bool {
		err := ckpt.Fetch(ctx, obs, obj, want.Digest, filepath.Join(t.TempDir(), "x"))
		return errors.Is(err, ckpt.ErrGone)
	})
}

// TestSyncerWritesTheResultACheckpointCarries: the runner died after its
// trial.checkpointed and before the trial.reported of that iteration. The
// checkpoint's result is the iteration's row, written once, and the next
// attempt resumes after it: result.json reads 1, 2, 3.
func TestSyncerWritesTheResultACheckpointCarries(t *testing.T) {
	srv := bustest.Start(t)
	s := begin(t, srv)
	obs, err := s.b.Checkpoints(t.Context(), exp)
	if err != nil {
		t.Fatal(err)
	}
	object := ckpt.AttemptObjectName(trial, 1, ckpt.Name(1))
	staged, err := ckpt.Stage(t.Context(), obs, object, folder(t, "2"))
	if err != nil {
		t.Fatal(err)
	}
	s.start(1)
	s.report(1, 1)
	s.add(events.WriterRunner, &events.TrialCheckpointed{TrialID: trial, Attempt: 1, Checkpoint: events.CheckpointRef{
		Name: ckpt.Name(1), Index: 1, Object: object, Size: staged.Size, Digest: staged.Digest, Iteration: 2,
		Metrics: map[string]any{"training_iteration": 2, "loss": 0.5, "checkpoint_dir_name": ckpt.Name(1)},
	}})
	s.start(2)
	s.report(2, 3)
	s.end(2)
	runSyncer(t, srv)
	s.finalState()
	if its := s.iterations(); !cmp.Equal(its, []int{1, 2, 3}) {
		t.Fatalf("result.json iterations %v, want [1 2 3]", its)
	}
	s.announced("checkpoint_000001 persisted", persistedEvent(ckpt.Name(1)))
}
