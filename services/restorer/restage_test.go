package restorer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/storage"
)

// TestRestageStaysInItsFolder: a state file edited so that a trial's
// latest checkpoint, persisted and gone from the Object Store, is named
// like a path out of the restorer's temporary folder (or the trial's
// folder is) is refused, naming it, before anything is written where it
// points.
func TestRestageStaysInItsFolder(t *testing.T) {
	for _, tc := range []struct{ name, checkpoint, dir string }{
		{"checkpoint name", "../escaped", ""},
		{"checkpoint name with a separator", "checkpoint_000001/../../escaped", ""},
		{"trial folder", "checkpoint_000001", "../escaped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			storagePath := t.TempDir()
			expPath := storage.Join(storagePath, exp)
			lost := bustest.Start(t)
			h := &history{t: t, b: lost.Bus("history"), storage: storagePath, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), reports: 1}
			h.run1()
			st := foldLog(t, h.b, 0)
			tr := st.Trials[trialID(2)]
			tr.Checkpoints = []events.CheckpointRef{{Name: tc.checkpoint, Index: 1, Digest: "sha256:" + strings.Repeat("0", 64), Iteration: 1}}
			tr.Persisted = map[string]bool{tc.checkpoint: true}
			if tc.dir != "" {
				tr.DirName = tc.dir
			}
			store(t, storagePath, st, storage.StateFileName(session1))

			srv := bustest.Start(t) // no log, an empty Object Store
			s := New(srv.Bus("restorer"), Config{})
			rep := s.Handle(t.Context(), api.RestoreRequest{Path: expPath, Resume: restore.FromFlags(true, false, false), Trainable: &genuine}, false)
			bad := tc.checkpoint
			if tc.dir != "" {
				bad = tc.dir
			}
			if rep.OK || !strings.Contains(rep.Error, trialID(2)) || !strings.Contains(rep.Error, bad) {
				t.Errorf("restore: %+v; want refused naming trial %s and %q", rep, trialID(2), bad)
			}
			if _, err := os.Stat(filepath.Join(tmp, "escaped")); err == nil {
				t.Errorf("the restore wrote %s, outside its temporary folder", filepath.Join(tmp, "escaped"))
			}
		})
	}
}
