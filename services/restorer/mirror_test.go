package restorer

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
)

// restoredEvent is the experiment.restored at seq.
func restoredEvent(t *testing.T, s *Service, seq uint64) *events.ExperimentRestored {
	t.Helper()
	m, err := s.bus.RawEvent(t.Context(), seq)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.Decode(m.Subject, m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := ev.Data.(*events.ExperimentRestored)
	if !ok {
		t.Fatalf("event %d is %T, want experiment.restored", seq, ev.Data)
	}
	return r
}

// TestTheMirrorIsTheCallers: a state file's upload_dir and commands (here
// edited to run something else) are never what the restored run mirrors
// with: the caller's replace them, and without the caller's the run does
// not mirror. From the log, a restore without the caller's keeps the
// experiment's mirror (the event carries none); the caller's replace it.
func TestTheMirrorIsTheCallers(t *testing.T) {
	storagePath := t.TempDir()
	expPath := storage.Join(storagePath, exp)
	lost := bustest.Start(t)
	h := &history{t: t, b: lost.Bus("history"), storage: storagePath, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), reports: 2}
	h.run1()
	st := foldLog(t, h.b, 0)
	st.Spec.RunConfig.SyncConfig.UploadDir = "remote:theirs"
	st.Spec.RunConfig.SyncConfig.Syncer = &events.CommandSyncer{SyncUp: "touch /tmp/edited # {source} {target}"}
	st.Spec.RunConfig.SyncConfig.Exclude = []string{"nothing"}
	store(t, storagePath, st, storage.StateFileName(session1))
	resume := restore.FromFlags(true, false, false)
	callers := &events.Mirror{UploadDir: "remote:mine", Syncer: &events.CommandSyncer{SyncUp: "rclone copy {source} {target}"}, Exclude: []string{"*/checkpoint_*"}}

	for _, tc := range []struct {
		name   string
		mirror *events.Mirror
		want   events.Mirror
	}{
		{name: "the caller gives none", want: events.Mirror{}},
		{name: "the caller's", mirror: callers, want: *callers},
		{name: "a syncer without upload_dir", mirror: &events.Mirror{Syncer: callers.Syncer}, want: events.Mirror{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storagetest.OwnerGone(t, storagePath, exp)
			srv := bustest.Start(t) // no log: the state file is all there is
			s := New(srv.Bus("restorer"), Config{})
			rep := s.Handle(t.Context(), api.RestoreRequest{Path: expPath, Resume: resume, Trainable: &genuine, Mirror: tc.mirror}, false)
			if !rep.OK || rep.Source != api.SourceSnapshot {
				t.Fatalf("restore: %+v; want OK from the snapshot", rep)
			}
			got := restoredEvent(t, s, rep.Seq).Mirror
			if got == nil {
				t.Fatal("experiment.restored carries no mirror: the syncer would fall back to none, but says nothing")
			}
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Errorf("experiment.restored's mirror (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, events.MirrorOf(stagedState(t, s, rep.Seq).Spec.RunConfig.SyncConfig)); diff != "" {
				t.Errorf("the restored spec's mirror settings (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("an invalid template of the caller", func(t *testing.T) {
		srv := bustest.Start(t)
		s := New(srv.Bus("restorer"), Config{})
		bad := &events.Mirror{UploadDir: "remote:mine", Syncer: &events.CommandSyncer{SyncUp: "rclone copy {src} {target}"}}
		rep := s.Handle(t.Context(), api.RestoreRequest{Path: expPath, Resume: resume, Trainable: &genuine, Mirror: bad}, false)
		if rep.OK || rep.Code != api.CodeBadRequest {
			t.Fatalf("restore: %+v; want refused as a bad request", rep)
		}
		if last, err := s.bus.LastSeq(t.Context(), events.ExperimentSubjects(exp)); err != nil || last != 0 {
			t.Errorf("a refused restore published up to %d (%v); want nothing", last, err)
		}
	})

	t.Run("from the log", func(t *testing.T) {
		srv := bustest.Start(t)
		h := &history{t: t, b: srv.Bus("history"), storage: t.TempDir(), now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), reports: 2}
		h.run1()
		s := New(srv.Bus("restorer"), Config{})
		rep := s.Handle(t.Context(), api.RestoreRequest{Path: storage.Join(h.storage, exp), Resume: resume}, false)
		if !rep.OK || rep.Source != api.SourceLog {
			t.Fatalf("restore: %+v; want OK from the log", rep)
		}
		if m := restoredEvent(t, s, rep.Seq).Mirror; m != nil {
			t.Errorf("a restore from the log without the caller's mirror records %+v; want none (the experiment's stays)", m)
		}
		rep = s.Handle(t.Context(), api.RestoreRequest{Path: storage.Join(h.storage, exp), Resume: resume, Mirror: callers}, false)
		if !rep.OK {
			t.Fatalf("second restore: %+v", rep)
		}
		if m := restoredEvent(t, s, rep.Seq).Mirror; m == nil || !cmp.Equal(*m, *callers) {
			t.Errorf("a restore from the log with the caller's mirror records %+v; want %+v", m, callers)
		}
	})
}
