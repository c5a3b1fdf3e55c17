package restorer

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
)

// tampered is the trainable someone who can write the storage folder put
// in the state file, recomputing its checksum.
var tampered = events.Trainable{Name: "fn", Command: []string{"/bin/sh", "-c", "touch /tmp/tampered"}}

// genuine is the experiment's trainable (history.run1's).
var genuine = events.Trainable{Name: "fn"}

// stagedState returns the state the restore whose experiment.restored is
// at seq staged, as the controller folds it.
func stagedState(t *testing.T, s *Service, seq uint64) *state.Experiment {
	t.Helper()
	var st *state.Experiment
	var ferr error
	err := s.bus.ReplayFrom(t.Context(), events.ExperimentSubjects(exp), seq, func(ev *events.Event) {
		if ev.Seq == seq {
			st, _, ferr = state.Fold(t.Context(), state.New(exp), ev, restorestate.Loader(s.bus, exp))
		}
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		t.Fatal(err)
	}
	if st == nil || st.Spec == nil {
		t.Fatalf("no restored state with a spec at sequence %d", seq)
	}
	return st
}

// stagedTrainable is what the restored run at seq hands runners.
func stagedTrainable(t *testing.T, s *Service, seq uint64) events.Trainable {
	t.Helper()
	return stagedState(t, s, seq).Spec.Trainable
}

// TestATrainableIsNeverTakenFromAStateFile: with the log gone, a restore
// runs the caller's trainable (checked against the stored one) or, only
// when the caller says so, the stored one; with no trainable it is
// refused, saying which trainable the file names. With the log there, the
// trainable is the log's: a stored snapshot that names another is passed
// over.
func TestATrainableIsNeverTakenFromAStateFile(t *testing.T) {
	storagePath := t.TempDir()
	expPath := storage.Join(storagePath, exp)
	// The experiment's history, in a log that is then lost.
	lost := bustest.Start(t)
	h := &history{t: t, b: lost.Bus("history"), storage: storagePath, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), reports: 2}
	h.run1()
	st := foldLog(t, h.b, 0)
	st.Spec.Trainable = tampered
	store(t, storagePath, st, storage.StateFileName(session1))
	resume := restore.FromFlags(true, false, false)

	withDir := genuine
	withDir.Dir = "/from/the/caller"
	for _, tc := range []struct {
		name      string
		req       api.RestoreRequest
		code      api.Code
		errHas    []string
		trainable events.Trainable // what the restore runs, when it does
		from      string
	}{
		{name: "no trainable", req: api.RestoreRequest{}, code: api.CodeTrainableRequired,
			errHas: []string{"touch /tmp/tampered", "experiment_state-", "tunejet restore " + expPath + " EXPERIMENT_FILE", "--trust-stored-trainable"}},
		{name: "the genuine trainable", req: api.RestoreRequest{Trainable: &genuine}, code: api.CodeTrainableDiffers,
			errHas: []string{"Invalid `trainable` input", "'fn'", "'/bin/sh -c touch /tmp/tampered'"}},
		{name: "the stored trainable, passed by the caller", req: api.RestoreRequest{Trainable: &events.Trainable{Command: tampered.Command, Dir: "/d"}},
			trainable: events.Trainable{Command: tampered.Command, Dir: "/d"}, from: api.TrainableFromCaller},
		{name: "trusted", req: api.RestoreRequest{TrustStoredTrainable: true}, trainable: tampered, from: api.TrainableFromStorage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storagetest.OwnerGone(t, storagePath, exp)
			srv := bustest.Start(t) // no log: the state file is all there is
			s := New(srv.Bus("restorer"), Config{})
			tc.req.Path, tc.req.Resume = expPath, resume
			rep := s.Handle(t.Context(), tc.req, false)
			if tc.code != "" {
				if rep.OK || rep.Code != tc.code {
					t.Fatalf("restore: %+v; want refused with code %q", rep, tc.code)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(rep.Error, s) {
						t.Errorf("the refusal does not say %q:\n%s", s, rep.Error)
					}
				}
				if rep.Trainable == nil || !slices.Equal(rep.Trainable.Command, tampered.Command) {
					t.Errorf("the refusal names the stored trainable %+v, want %+v", rep.Trainable, tampered)
				}
				if last, err := s.bus.LastSeq(t.Context(), events.ExperimentSubjects(exp)); err != nil || last != 0 {
					t.Errorf("a refused restore published up to %d (%v); want nothing", last, err)
				}
				return
			}
			if !rep.OK || rep.Source != "snapshot" || rep.TrainableFrom != tc.from {
				t.Fatalf("restore: %+v; want OK from the snapshot, its trainable from %q", rep, tc.from)
			}
			if diff := cmp.Diff(tc.trainable, stagedTrainable(t, s, rep.Seq)); diff != "" {
				t.Errorf("the restored state runs another trainable (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("a caller's trainable of another Dir, same command", func(t *testing.T) {
		storagetest.OwnerGone(t, storagePath, exp)
		srv := bustest.Start(t)
		s := New(srv.Bus("restorer"), Config{})
		tr := events.Trainable{Name: "fn", Command: tampered.Command, Dir: withDir.Dir}
		rep := s.Handle(t.Context(), api.RestoreRequest{Path: expPath, Resume: resume, Trainable: &tr}, false)
		if !rep.OK {
			t.Fatalf("restore: %+v", rep)
		}
		if got := stagedTrainable(t, s, rep.Seq); got.Dir != withDir.Dir {
			t.Errorf("the restored trainable runs in %q, want the caller's %q, never the file's", got.Dir, withDir.Dir)
		}
	})

	t.Run("from the log, a tampered snapshot of this log is not trusted", func(t *testing.T) {
		storagetest.OwnerGone(t, storagePath, exp)
		srv := bustest.Start(t)
		h := &history{t: t, b: srv.Bus("history"), storage: storagePath, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), reports: 2}
		h.run1()
		last, err := h.b.LastSeq(t.Context(), events.ExperimentSubjects(exp))
		if err != nil {
			t.Fatal(err)
		}
		st := foldLog(t, h.b, last-2)
		st.Spec.Trainable = tampered
		store(t, storagePath, st, storage.StateFileName(session1))
		s := New(srv.Bus("restorer"), Config{})
		if rep := s.Handle(t.Context(), api.RestoreRequest{Path: expPath, Resume: resume, Trainable: &tampered}, false); rep.OK || rep.Code != api.CodeTrainableDiffers {
			t.Errorf("restore with the file's trainable: %+v; want refused as another trainable than the log's", rep)
		}
		rep := s.Handle(t.Context(), api.RestoreRequest{Path: expPath, Resume: resume}, false)
		if !rep.OK || rep.Read != api.ReadLog || rep.TrainableFrom != api.TrainableFromLog {
			t.Fatalf("restore: %+v; want OK, the snapshot passed over for the whole log, the trainable from the log", rep)
		}
		if diff := cmp.Diff(genuine, stagedTrainable(t, s, rep.Seq)); diff != "" {
			t.Errorf("the restored state runs another trainable than the log's (-want +got):\n%s", diff)
		}
		// After that restore, the log's trainable is the restored state's.
		st = foldLog(t, s.bus, 0)
		st.Spec.Trainable = tampered
		store(t, storagePath, st, storage.StateFileName(session2))
		rep = s.Handle(t.Context(), api.RestoreRequest{Path: expPath, Resume: resume}, false)
		if !rep.OK || rep.Read != api.ReadRestoredLog || rep.TrainableFrom != api.TrainableFromLog {
			t.Fatalf("second restore: %+v; want OK, the snapshot passed over for the restored state, the trainable from the log", rep)
		}
		// Untampered, the snapshot of this log shortens the fold again.
		st = stagedState(t, s, rep.Seq)
		store(t, storagePath, st, storage.StateFileName(session2))
		if rep = s.Handle(t.Context(), api.RestoreRequest{Path: expPath, Resume: resume}, false); !rep.OK || rep.Read != api.ReadSnapshotLog {
			t.Fatalf("third restore: %+v; want OK from the untampered snapshot and the log", rep)
		}
		if diff := cmp.Diff(genuine, stagedTrainable(t, s, rep.Seq)); diff != "" {
			t.Errorf("second restore: the restored state runs another trainable than the log's (-want +got):\n%s", diff)
		}
	})
}
