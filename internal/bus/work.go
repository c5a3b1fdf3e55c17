package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// WorkQueue is an experiment's work consumer taken from one piece of work
// at a time by a holder that settles it itself (Bus.Settle); a runner
// consumes it with Consume.
type WorkQueue struct {
	cons jetstream.Consumer
}

// WorkQueue opens an experiment's existing work consumer (the controller
// creates it).
func (b *Bus) WorkQueue(ctx context.Context, exp string) (*WorkQueue, error) {
	c, err := b.workConsumer(ctx, exp)
	if err != nil {
		return nil, err
	}
	return &WorkQueue{cons: c}, nil
}

// Next waits up to wait for one piece of work; it returns nil, with no
// error, when none came in time. A delivery whose message does not decode
// has no Event and carries the error in Malformed.
func (q *WorkQueue) Next(ctx context.Context, wait time.Duration) (*Delivery, error) {
	return next(ctx, q.cons, wait)
}

// Ack settles the delivery as done, and waits for the server to confirm.
func (d *Delivery) Ack(ctx context.Context) error { return d.msg.DoubleAck(ctx) }

// Reply is the delivery's reply subject: whoever holds it can settle the
// delivery (NakWork), as a controller does for a runner found gone.
func (d *Delivery) Reply() string { return d.msg.Reply() }
