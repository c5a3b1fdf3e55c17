package bus

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
)

// TestPublishAsyncKeepsOrderAcrossALostAnswer: two reports go unanswered
// (the stream's leader died with them), the log comes back, and a newer
// report is published. The unanswered ones are published again, and the
// newer one is stored after them: readers fold an attempt's reports in
// order and would drop a report stored after a newer one.
func TestPublishAsyncKeepsOrderAcrossALostAnswer(t *testing.T) {
	defer func(d time.Duration) { asyncAckTimeout = d }(asyncAckTimeout)
	asyncAckTimeout = 2 * time.Second
	emb, err := StartEmbedded(EmbedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	nc, err := emb.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, err := New(nc, "test", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	// No log yet, but the subjects have a listener that never answers:
	// the publishes get no answer, as with a leader that died.
	sub, err := nc.SubscribeSync(events.Prefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	report := func(it int) *events.Event {
		return b.Event("exp", events.WriterRunner, &events.TrialReported{TrialID: "t1", Attempt: 1, Result: map[string]any{"training_iteration": it}})
	}
	f1, err := b.PublishAsync(report(1))
	if err != nil {
		t.Fatal(err)
	}
	f2, err := b.PublishAsync(report(2))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Provision(ctx); err != nil { // the log is back
		t.Fatal(err)
	}
	for { // until the first two have gone unanswered long enough to hold newer ones
		stalled, changed := b.acks.stalled()
		if stalled {
			break
		}
		select {
		case <-changed:
		case <-time.After(holdAfter / 10):
		case <-ctx.Done():
			t.Fatal("the unanswered publishes never held newer ones")
		}
	}
	f3, err := b.PublishAsync(report(3))
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range []*ackFuture{f1.(*ackFuture), f2.(*ackFuture), f3.(*ackFuture)} {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatalf("report %d: %v", i+1, err)
		case <-ctx.Done():
			t.Fatalf("report %d: no answer", i+1)
		}
	}
	var its []float64
	err = b.ReplayFrom(ctx, events.ExperimentSubjects("exp"), 0, func(ev *events.Event) {
		its = append(its, ev.Data.(*events.TrialReported).Result["training_iteration"].(float64))
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(its) != 3 || its[0] != 1 || its[1] != 2 || its[2] != 3 {
		t.Fatalf("the log holds iterations %v, want [1 2 3]", its)
	}
}
