package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/state/statetest"
)

// A max-deliveries notice about work of an earlier run must never end the
// current attempt: the embedded `tunejet run` killed with its trials
// running leaves their work unacked, the restarted server sends the
// notice, and the restored run's controller meets it after the restore.
func TestStaleMaxDeliveriesDoNotEndARestoredTrial(t *testing.T) {
	srv := bustest.Start(t)
	client := srv.Bus("client")
	stopA := startController(t, srv, "controller-a")

	const exp, n = "stale", 3
	sp := gridSpec(exp, n, 1, t.TempDir())
	sp.RunConfig.FailureConfig = events.FailureConfig{MaxFailures: 0, HeartbeatTimeoutS: 0.5}
	submit(t, client, sp)
	w := newWorker(t, srv, exp)
	// The first run's runner takes the trial, starts it and dies.
	msg := w.take()
	work := mustWork(t, msg)
	if _, err := client.Publish(t.Context(), client.Event(exp, events.WriterRunner,
		&events.TrialStarted{TrialID: work.TrialID, Attempt: 1, Runner: "dead"})); err != nil {
		t.Fatal(err)
	}
	waitForCount(t, client, exp, events.TypeTrialStarted, 1)
	stopA()
	// Its work runs out of deliveries while nothing runs the experiment.
	waitExhausted(t, client, w.cons, exp)

	restoredSeq := restoreFromLog(t, srv.Bus("restorer"), exp)
	startController(t, srv, "controller-b")
	js := srv.JetStream()
	bustest.Eventually(t, wait, "the restored run's work consumer", func() bool {
		c, err := bustest.WorkConsumer(t.Context(), js, exp)
		return err == nil && c.CachedInfo().Config.OptStartSeq == restoredSeq+1
	})
	w = newWorker(t, srv, exp)
	for range n {
		w.runOne()
	}
	if c := completion(t, client, exp); c.Reason != "finished" {
		t.Fatalf("experiment completed with reason %q, want finished", c.Reason)
	}
	st := statetest.FoldLog(t, client, exp)
	if got := st.Counts()[events.StatusTerminated]; got != n {
		t.Fatalf("after the restore: %v, want %d TERMINATED (the stale notice ended a resumed trial)", st.Counts(), n)
	}
}

// take pulls one work message without settling it.
func (w *worker) take() jetstream.Msg {
	w.t.Helper()
	msg, err := w.next()
	if err != nil {
		w.t.Fatalf("no trial work within %v: %v", wait, err)
	}
	return msg
}

func mustWork(t *testing.T, msg jetstream.Msg) *events.TrialScheduled {
	t.Helper()
	ev, err := bus.FromJS(msg)
	if err != nil {
		t.Fatal(err)
	}
	return ev.Data.(*events.TrialScheduled)
}

// waitExhausted pulls on cons (the server notices exhausted work when it
// looks for work to deliver) until the advisory stream holds a
// max-deliveries notice for the experiment's work.
func waitExhausted(t *testing.T, b *bus.Bus, cons jetstream.Consumer, exp string) {
	t.Helper()
	got := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		_ = b.WatchExhausted(ctx, exp, func(uint64) {
			select {
			case got <- struct{}{}:
			default:
			}
		})
	}()
	deadline := time.Now().Add(wait)
	for {
		select {
		case <-got:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no max-deliveries advisory")
		}
		_, _ = cons.Next(jetstream.FetchMaxWait(200 * time.Millisecond)) // none comes: MaxDeliver is 1
	}
}
