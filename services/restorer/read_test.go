package restorer

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

const (
	exp      = "exp"
	session1 = "2026-01-02_03-04-05"
	session2 = "2026-01-03_03-04-05"
)

// history publishes an experiment's events the way a controller, runners
// and a syncer would: three trials, one finished, one failed for good,
// one still running with a checkpoint it persisted, then an interruption.
type history struct {
	t       *testing.T
	b       *bus.Bus
	storage string
	now     time.Time
	reports int
}

func (h *history) add(w events.Writer, p events.Payload) uint64 {
	h.t.Helper()
	h.now = h.now.Add(time.Second)
	ev := h.b.Event(exp, w, p)
	ev.Time = h.now
	seq, err := h.b.Publish(h.t.Context(), ev)
	if err != nil {
		h.t.Fatal(err)
	}
	return seq
}

func trialID(i int) string { return fmt.Sprintf("abcde_%05d", i) }

func (h *history) run1() {
	h.add(events.WriterClient, &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
		Name: exp, Trainable: events.Trainable{Name: "fn"}, TuneConfig: events.TuneConfig{NumSamples: 3},
		ParamSpace: map[string]any{"x": 1.0}, RunConfig: events.RunConfig{StoragePath: h.storage},
	}})
	h.add(events.WriterController, &events.ExperimentStarted{Run: 1, Session: session1, Seed: 1, TrialIDPrefix: "abcde", NumTrials: 3, StoragePath: h.storage})
	for i := range 3 {
		id, dir := trialID(i), "fn_"+trialID(i)
		h.add(events.WriterController, &events.TrialCreated{TrialID: id, Index: i, TrialName: "fn_" + id, ExperimentTag: fmt.Sprint(i, "_x=1"), DirName: dir, Config: map[string]any{"x": 1.0}})
		h.add(events.WriterController, &events.TrialScheduled{TrialID: id, TrialName: "fn_" + id, DirName: dir, Config: map[string]any{"x": 1.0}, Trainable: events.Trainable{Name: "fn"}, HeartbeatTimeoutS: 3})
		h.add(events.WriterRunner, &events.TrialStarted{TrialID: id, Attempt: 1, Runner: "r1"})
		h.reportAll(id, 1, 0)
	}
	h.add(events.WriterRunner, &events.TrialCompleted{TrialID: trialID(0), Attempt: 1, Status: events.StatusTerminated, Reason: "finished"})
	h.add(events.WriterRunner, &events.TrialFailed{TrialID: trialID(1), Attempt: 1, Cause: events.CauseError, ErrorType: "ValueError", Error: "boom", Counted: true, Final: true})
	h.add(events.WriterController, &events.ExperimentInterrupted{Reason: "shutdown"})
}

func (h *history) reportAll(id string, attempt, from int) {
	for it := from + 1; it <= from+h.reports; it++ {
		h.add(events.WriterRunner, &events.TrialReported{TrialID: id, Attempt: attempt, Result: map[string]any{
			"training_iteration": it, "loss": 1 / float64(it), "eval": map[string]any{"acc": float64(it) / 10}, "done": false,
		}})
	}
}

// run2 is what follows a restore: the next run resumes the running trial.
func (h *history) run2() {
	h.add(events.WriterController, &events.ExperimentStarted{Run: 2, Session: session2, Seed: 1, TrialIDPrefix: "abcde", NumTrials: 3, StoragePath: h.storage})
	id := trialID(2)
	h.add(events.WriterController, &events.TrialScheduled{TrialID: id, TrialName: "fn_" + id, DirName: "fn_" + id, Config: map[string]any{"x": 1.0}, Trainable: events.Trainable{Name: "fn"}, HeartbeatTimeoutS: 3, AttemptBase: 1})
	h.add(events.WriterRunner, &events.TrialStarted{TrialID: id, Attempt: 2, Runner: "r2"})
	h.reportAll(id, 2, h.reports)
}

// foldLog folds the log of b from the beginning up to seq (0: all of it),
// as every reader of the log does.
func foldLog(t *testing.T, b *bus.Bus, upTo uint64) *state.Experiment {
	t.Helper()
	st := state.New(exp)
	var ferr error
	err := b.Replay(t.Context(), events.ExperimentSubjects(exp), func(ev *events.Event) {
		if ferr == nil && (upTo == 0 || ev.Seq <= upTo) {
			st, _, ferr = state.Fold(t.Context(), st, ev, restorestate.Loader(b, st.Name))
		}
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func encode(t *testing.T, st *state.Experiment) []byte {
	t.Helper()
	b, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// store makes st the only (and so the newest) snapshot in storage.
func store(t *testing.T, storagePath string, st *state.Experiment, key string) {
	t.Helper()
	dir := filepath.Join(storagePath, exp)
	old, _ := filepath.Glob(filepath.Join(dir, "experiment_state-*.json"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, key), encode(t, st), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadFoldsOnlyTheTailOfThisLog checks every way read can start the
// fold against folding the whole log, on a real server: the result must
// be the same state, byte for byte, and the tail must be all it folded
// when it could start later.
func TestReadFoldsOnlyTheTailOfThisLog(t *testing.T) {
	srv := bustest.Start(t)
	storagePath := t.TempDir()
	expPath := storage.Join(storagePath, exp)
	h := &history{t: t, b: srv.Bus("history"), storage: storagePath, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), reports: 10}
	h.run1()
	s := New(srv.Bus("restorer"), Config{})

	// Another log of an experiment of the same name (a NATS store that was
	// lost and replaced): its history is shorter at first, then longer.
	other := bustest.Start(t)
	ho := &history{t: t, b: other.Bus("history"), storage: storagePath, now: h.now, reports: 5}
	ho.run1()
	otherShort := foldLog(t, ho.b, 0)
	ho.reports = 40
	ho.run2()
	otherLong := foldLog(t, ho.b, 0)

	check := func(t *testing.T, wantRead string, wantFolded int) {
		t.Helper()
		last, err := s.bus.LastSeq(t.Context(), events.ExperimentSubjects(exp))
		if err != nil {
			t.Fatal(err)
		}
		st, rep, err := s.read(t.Context(), expPath, exp)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Source != "log" || rep.Read != wantRead || rep.Folded != wantFolded {
			t.Errorf("read from %q as %q (%s at seq %d), folded %d events; want %q, %d of the log's %d",
				rep.Source, rep.Read, rep.ReadFrom, rep.ReadSeq, rep.Folded, wantRead, wantFolded, last)
		}
		if got, want := encode(t, st), encode(t, foldLog(t, s.bus, 0)); !bytes.Equal(got, want) {
			t.Errorf("the state read differs from the fold of the whole log:\n got %s\nwant %s", got, want)
		}
	}
	last := func() int {
		seq, err := s.bus.LastSeq(t.Context(), events.ExperimentSubjects(exp))
		if err != nil {
			t.Fatal(err)
		}
		return int(seq)
	}

	t.Run("no snapshot: the whole log", func(t *testing.T) {
		check(t, api.ReadLog, last())
	})
	if otherShort.LastSeq >= uint64(last()) || otherLong.LastSeq <= uint64(last()) {
		t.Fatalf("the other log's snapshots at %d and %d do not straddle this log's end %d", otherShort.LastSeq, otherLong.LastSeq, last())
	}
	t.Run("a snapshot of another log, within this log's sequences, is refused", func(t *testing.T) {
		store(t, storagePath, otherShort, storage.StateFileName(session1))
		check(t, api.ReadLog, last())
	})
	t.Run("a snapshot of another log, beyond this log's end, is refused", func(t *testing.T) {
		store(t, storagePath, otherLong, storage.StateFileName(session2))
		check(t, api.ReadLog, last())
	})
	t.Run("a corrupt snapshot is passed over", func(t *testing.T) {
		store(t, storagePath, otherShort, storage.StateFileName(session1))
		if err := os.WriteFile(filepath.Join(storagePath, exp, storage.StateFileName(session2)), []byte(`{"format":`), 0o644); err != nil {
			t.Fatal(err)
		}
		check(t, api.ReadLog, last())
	})
	cut := uint64(last() - 7)
	t.Run("a snapshot of this log: only the tail after it", func(t *testing.T) {
		store(t, storagePath, foldLog(t, s.bus, cut), storage.StateFileName(session1))
		check(t, api.ReadSnapshotLog, 7)
	})

	t.Run("a snapshot of the whole log: nothing to fold", func(t *testing.T) {
		store(t, storagePath, foldLog(t, s.bus, 0), storage.StateFileName(session1))
		check(t, api.ReadSnapshotLog, 0)
	})
	store(t, storagePath, foldLog(t, s.bus, cut), storage.StateFileName(session1))

	// A restore, then the next run's events.
	rep := s.Handle(t.Context(), api.RestoreRequest{Path: expPath, Resume: restore.FromFlags(true, false, false)}, false)
	if !rep.OK || rep.Read != api.ReadSnapshotLog {
		t.Fatalf("restore: %+v", rep)
	}
	restored := rep.Seq
	h.run2()
	t.Run("a snapshot older than the last restore: from the restore on", func(t *testing.T) {
		check(t, api.ReadRestoredLog, last()-int(restored)+1)
	})
	t.Run("a snapshot newer than the last restore: only the tail after it", func(t *testing.T) {
		store(t, storagePath, foldLog(t, s.bus, restored+3), storage.StateFileName(session2))
		check(t, api.ReadSnapshotLog, last()-int(restored)-3)
	})
	t.Run("a snapshot that missed the last restore is refused", func(t *testing.T) {
		// What a writer that could not load the restored state holds: the
		// old run's state with the new run's events folded on.
		st := state.New(exp)
		err := s.bus.Replay(t.Context(), events.ExperimentSubjects(exp), func(ev *events.Event) {
			if ev.Seq <= restored+3 {
				st, _, _ = state.Fold(t.Context(), st, ev, nil)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		store(t, storagePath, st, storage.StateFileName(session2))
		check(t, api.ReadRestoredLog, last()-int(restored)+1)
	})
}
