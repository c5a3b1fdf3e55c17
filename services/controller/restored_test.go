package controller_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/state"
)

// A controller started after a restore folds the log from the restore's
// event on (its staged state replaces the history before it), and its
// first decision passes the fence: the experiment runs to its end.
func TestControllerStartedAfterARestoreFoldsFromIt(t *testing.T) {
	srv := bustest.Start(t)
	client := srv.Bus("client")
	stopA := startController(t, srv, "controller-a")

	const n = 6
	submit(t, client, gridSpec("again", n, 2, t.TempDir()))
	w := newWorker(t, srv, "again")
	w.runOne()
	waitForCount(t, client, "again", events.TypeTrialCreated, 3)
	stopA()

	restoredSeq := restoreFromLog(t, srv.Bus("restorer"), "again")

	startController(t, srv, "controller-b")
	// Its watch of the experiment starts at the restore, not at 1.
	js := srv.JetStream()
	bustest.Eventually(t, wait, "controller-b's watch of the experiment", func() bool {
		return watchStartsAt(t, js, events.ExperimentSubjects("again"), restoredSeq)
	})
	// and it replaces the work consumer with one that starts after the
	// restore (work scheduled before it is stale).
	bustest.Eventually(t, wait, "the restored run's work consumer", func() bool {
		c, err := bustest.WorkConsumer(t.Context(), js, "again")
		return err == nil && c.CachedInfo().Config.OptStartSeq == restoredSeq+1
	})
	w = newWorker(t, srv, "again")
	for i := 1; i < n; i++ {
		w.runOne()
	}
	if c := completion(t, client, "again"); c.Reason != "finished" {
		t.Fatalf("experiment completed with reason %q, want finished", c.Reason)
	}
	evs := bustest.Log(t, client, "again")
	st := state.New("again")
	created := map[string]bool{}
	for _, ev := range evs {
		if st, _, _ = state.Fold(t.Context(), st, ev, restorestate.Loader(client, "again")); ev.Seq > restoredSeq && ev.Writer == events.WriterController {
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

// restoreFromLog does what the restorer does for a restore from the log
// with the default flags: fold, apply the resume rules, stage the state,
// publish experiment.restored. It returns the event's sequence.
func restoreFromLog(t *testing.T, b *bus.Bus, exp string) uint64 {
	t.Helper()
	st := state.New(exp)
	for _, ev := range bustest.Log(t, b, exp) {
		var err error
		if st, _, err = state.Fold(t.Context(), st, ev, restorestate.Loader(b, exp)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := restore.FromFlags(true, false, false)
	if _, err := restore.Apply(st, cfg, nil); err != nil {
		t.Fatal(err)
	}
	object, digest, err := restorestate.Stage(t.Context(), b, st, st.Run+1)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := b.Publish(t.Context(), b.Event(exp, events.WriterRestorer, &events.ExperimentRestored{
		Resume: cfg, Source: "log", Object: object, Digest: digest,
	}))
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// watchStartsAt reports whether an ordered consumer filtering on filter
// delivers from stream sequence seq.
func watchStartsAt(t *testing.T, js jetstream.JetStream, filter string, seq uint64) bool {
	t.Helper()
	s, err := js.Stream(t.Context(), bus.StreamName)
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
