package controller_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/services/restorer"
)

// A controller started after a restore folds the log from the restore's
// event on (its staged state replaces the history before it), and its
// first decision passes the fence: the experiment runs to its end.
func TestControllerStartedAfterARestoreFoldsFromIt(t *testing.T) {
	srv := bustest.Start(t)
	client := srv.Bus("client")
	storagePath := t.TempDir()
	stopA := startController(t, srv, "controller-a")

	const n = 6
	submit(t, client, gridSpec("again", n, 2, storagePath))
	w := newWorker(t, srv, "again")
	w.runOne()
	waitForCount(t, client, "again", events.TypeTrialCreated, 3)
	stopA()

	rep := restorer.New(srv.Bus("restorer"), restorer.Config{}).Handle(t.Context(),
		restorer.Request{Path: storage.Join(storagePath, "again"), Resume: restore.FromFlags(true, false, false)}, false)
	if !rep.OK {
		t.Fatalf("restore: %s", rep.Error)
	}

	startController(t, srv, "controller-b")
	// Its watch of the experiment starts at the restore, not at 1.
	bustest.Eventually(t, wait, "controller-b's watch of the experiment", func() bool {
		return watchStartsAt(t, client, events.ExperimentSubjects("again"), rep.Seq)
	})
	w = newWorker(t, srv, "again")
	for i := 1; i < n; i++ {
		w.runOne()
	}
	if c := completion(t, client, "again"); c.Reason != "finished" {
		t.Fatalf("experiment completed with reason %q, want finished", c.Reason)
	}
	evs := logOf(t, client, "again")
	st := state.New("again")
	created := map[string]bool{}
	for _, ev := range evs {
		if st, _, _ = restore.Fold(t.Context(), client.JS, st, ev); ev.Seq > rep.Seq && ev.Writer == events.WriterController {
			if p, ok := ev.Data.(*events.TrialCreated); ok {
				created[p.TrialID] = true
			}
		}
	}
	if got := st.Counts()[events.StatusTerminated]; got != n || len(st.Trials) != n || len(created) != n-3 {
		t.Fatalf("after the restore: %v for %d trials, %d created; want %d TERMINATED, %d created", st.Counts(), len(st.Trials), len(created), n, n-3)
	}
	if c := count(evs, events.TypeExperimentStarted); c != 2 {
		t.Errorf("%d experiment.started events, want 2 (the first run and the restored one)", c)
	}
}

// watchStartsAt reports whether an ordered consumer filtering on filter
// delivers from stream sequence seq.
func watchStartsAt(t *testing.T, b *bus.Bus, filter string, seq uint64) bool {
	t.Helper()
	s, err := b.Stream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lister := s.ListConsumers(t.Context())
	found := false
	for info := range lister.Info() {
		c := info.Config
		if c.FilterSubject == filter || len(c.FilterSubjects) == 1 && c.FilterSubjects[0] == filter {
			found = found || c.DeliverPolicy == jetstream.DeliverByStartSequencePolicy && c.OptStartSeq == seq
		}
	}
	return found && lister.Err() == nil
}
