package bus

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
)

// WorkQueue is an experiment's work consumer as a runner takes from it:
// one piece of trial work at a time, held while its attempt runs and
// settled by the attempt (Delivery's Ack, Nak, Term), or left to be
// handed out again after the heartbeat timeout.
type WorkQueue struct {
	cons jetstream.Consumer
}

// WorkQueue opens an experiment's existing work consumer (the controller
// creates it).
func (b *Bus) WorkQueue(ctx context.Context, exp string) (*WorkQueue, error) {
	c, err := b.WorkConsumer(ctx, exp)
	if err != nil {
		return nil, err
	}
	return &WorkQueue{cons: c}, nil
}

// Next waits up to wait for one piece of work; it returns nil, with no
// error, when none came in time. A delivery whose message does not decode
// has no Event and carries the error in Malformed.
func (q *WorkQueue) Next(ctx context.Context, wait time.Duration) (*Delivery, error) {
	fctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	m, err := q.cons.Next(jetstream.FetchContext(fctx))
	if errors.Is(err, nats.ErrTimeout) || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	md, err := m.Metadata()
	if err != nil {
		return nil, err
	}
	d := &Delivery{Num: int(md.NumDelivered), Subject: m.Subject(), msg: m}
	d.Event, d.Malformed = events.Decode(m.Subject(), m.Headers(), m.Data())
	if d.Malformed == nil {
		d.Event.Seq = md.Sequence.Stream
	}
	return d, nil
}

// Ack settles the delivery as done, and waits for the server to confirm.
func (d *Delivery) Ack(ctx context.Context) error { return d.msg.DoubleAck(ctx) }

// Nak hands the message out again after delay.
func (d *Delivery) Nak(delay time.Duration) error { return d.msg.NakWithDelay(delay) }

// Term ends the message for good, for reason.
func (d *Delivery) Term(reason string) error { return d.msg.TermWithReason(reason) }

// Reply is the delivery's reply subject: whoever holds it can settle the
// delivery (NakWork), as a controller does for a runner found gone.
func (d *Delivery) Reply() string { return d.msg.Reply() }
