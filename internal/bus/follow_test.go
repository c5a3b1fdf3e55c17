package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// TestFollowMissesNoDeliveryTheServerCounted: a pull response can be lost
// on its way (a node dies with it in flight). The server then counts the
// message delivered, and the next ack covers it (acks cover everything up
// to the message acked), so a holder that went on would never see it.
// Follow notices the gap in the consumer's delivery sequence and reads the
// log again from the message after the last it sent.
//
// A second client pulling from the same consumer takes a message the way a
// lost response does: the server hands it out, Follow never gets it.
func TestFollowMissesNoDeliveryTheServerCounted(t *testing.T) {
	srv := bustest.Start(t)
	b := srv.Bus("test")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	msgs := b.Follow(ctx, bus.Consumer{Name: "f2", Filter: events.ExperimentSubjects("e9"), AckWait: time.Hour})

	js, err := jetstream.New(srv.Conn())
	if err != nil {
		t.Fatal(err)
	}
	var thief jetstream.Consumer
	bustest.Eventually(t, wait, "Follow's consumer", func() bool {
		thief, err = js.Consumer(ctx, bus.StreamName, "f2")
		return err == nil
	})
	stolen := make(chan int, 1)
	go func() {
		for ctx.Err() == nil {
			batch, err := thief.Fetch(1, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				continue
			}
			for m := range batch.Messages() {
				ev, err := events.Decode(m.Subject(), m.Headers(), m.Data())
				if err == nil {
					stolen <- iteration(ev)
					return
				}
			}
		}
	}()

	// Publish one report at a time until the other client takes one.
	seen := map[int]bool{}
	took := 0
	for it := 1; took == 0; it++ {
		if it > 200 {
			t.Fatal("the second client took none of 200 messages")
		}
		publish(t, b, report(b, "e9", it))
		select {
		case d := <-msgs:
			seen[iteration(d.Event)] = true
		case took = <-stolen:
		}
	}
	last := took + 1
	publish(t, b, report(b, "e9", last))
	for !seen[took] || !seen[last] {
		select {
		case d := <-msgs:
			it := iteration(d.Event)
			if seen[it] {
				t.Fatalf("iteration %d sent twice", it)
			}
			seen[it] = true
		case <-time.After(wait):
			t.Fatalf("within %v Follow sent iterations %v; the message the server counted delivered (%d) never came", wait, seen, took)
		}
	}
}
