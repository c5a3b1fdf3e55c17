package syncer_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/blobsync/blobsynctest"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/services/syncer"
)

// TestARestoreChangesTheMirrorOfARunningWriter: an experiment submitted
// without upload_dir is not mirrored; a restore from the log whose caller
// gives an upload_dir (experiment.restored's mirror) makes the writer that
// follows it mirror there, without a restart of the syncer.
func TestARestoreChangesTheMirrorOfARunningWriter(t *testing.T) {
	srv := bustest.Start(t)
	s := begin(t, srv)
	s.start(1)
	s.report(1, 1)
	s.add(events.WriterController, &events.ExperimentInterrupted{Reason: "stopped"})
	rec := &blobsynctest.Recorder{}
	runSyncerWith(t, srv, syncer.Config{Period: 20 * time.Millisecond, Client: rec})
	bustest.Eventually(t, wait, "the interrupted run's state in storage", func() bool {
		st, err := s.dir().NewestState()
		return err == nil && st != ""
	})
	if calls := rec.Calls(); len(calls) != 0 {
		t.Fatalf("an experiment without upload_dir was mirrored: %v", calls)
	}

	st := state.New(exp)
	for _, ev := range bustest.Log(t, s.b, exp) {
		st, _, _ = state.Fold(t.Context(), st, ev, nil)
	}
	cfg := restore.FromFlags(true, false, false)
	restored, err := restore.Apply(st, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	object, digest, err := restorestate.Stage(t.Context(), s.b, restored, 2)
	if err != nil {
		t.Fatal(err)
	}
	s.add(events.WriterRestorer, &events.ExperimentRestored{Resume: cfg, Source: "log", Object: object, Digest: digest,
		Mirror: &events.Mirror{UploadDir: "remote:new/", Exclude: []string{"*/checkpoint_*"}}})
	s.start(2)
	s.report(2, 2)
	s.end(2)

	want := "up " + filepath.Join(s.storage, exp) + " remote:new/" + exp + " */checkpoint_*"
	bustest.Eventually(t, wait, "a sync_up to the restore's upload_dir", func() bool {
		return slices.Contains(rec.Calls(), want)
	})
	for _, c := range rec.Calls() {
		if c != want {
			t.Errorf("unexpected call %q; want only %q", c, want)
		}
	}
}
