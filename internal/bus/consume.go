package bus

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/clock"
)

// Consumer is a durable consumer of the log: a position the server keeps,
// from which each message is handed out until it is settled.
type Consumer struct {
	// Name is the durable name.
	Name        string
	Description string
	// Filter selects the subjects it reads.
	Filter string
	// AckWait is how long a message may go unsettled (and without
	// Delivery.Progress) before it is handed out again.
	AckWait time.Duration
	// MaxDeliver bounds the deliveries of one message; 0 or -1: no bound.
	MaxDeliver int
	// StartSeq, when not 0, starts the consumer at that log sequence
	// instead of the beginning.
	StartSeq uint64
	// Existing: Consume only opens the consumer, which someone else
	// creates (a runner may not create the work consumer).
	Existing bool
	// Admit, when set, is called before each fetch: it blocks until the
	// consumer may take one more message and returns what that message
	// will hold (see Consume).
	Admit func(ctx context.Context) (Hold, error)
	// NoWait makes each fetch return at once when no message is pending,
	// instead of waiting for one to be published: a message is then one
	// that was in the log when Admit returned, or very nearly. Consume
	// releases the hold and calls Admit again, which should wait for a
	// reason to fetch.
	NoWait bool
}

// Hold is what one message handled by Consume holds while its handler runs
// (a slot, an amount of capacity), from Consumer.Admit. Consume releases it
// when no message came, or once the handler has returned.
type Hold interface{ Release() }

// Delivery is one message handed to a consumer's handler.
type Delivery struct {
	// Event is the decoded event, its Seq set.
	Event *events.Event
	// Num is which delivery of the message this is (1 for the first).
	Num int
	// Subject is the message's subject.
	Subject string
	// Malformed is why the message did not decode (then Event is nil).
	// Consume terminates such messages itself; WorkQueue and Follow hand
	// them on.
	Malformed error
	// Last, from Follow, is true when no message of the consumer is left
	// after this one.
	Last bool
	// Hold, from Consume with Consumer.Admit, is what the message holds
	// while its handler runs; the handler may narrow it to what the
	// message turns out to need.
	Hold Hold
	msg  jetstream.Msg
}

// Progress tells the server the handler still works on the message, so
// that it is not handed out again after AckWait.
func (d *Delivery) Progress() error { return d.msg.InProgress() }

// Retry is the error a consumer's handler returns for a message to be
// handed out again after delay (a nak with delay).
func Retry(err error, delay time.Duration) error { return &settleError{err: err, delay: delay} }

// Terminate is the error a consumer's handler returns for a message never
// to be handed out again.
func Terminate(err error) error { return &settleError{err: err, term: true} }

// settleError carries a handler's settlement.
type settleError struct {
	err   error
	delay time.Duration
	term  bool
}

func (e *settleError) Error() string {
	if e.err == nil {
		return "settled as a failure"
	}
	return e.err.Error()
}

func (e *settleError) Unwrap() error { return e.err }

// FailureDelay is how long a message waits before it is handed out again
// when its handler failed with a plain error or panicked.
const FailureDelay = time.Second

// ErrLeave is the error a consumer's handler returns for a message to be left
// unsettled: it is handed out again after AckWait, as if this process had
// died (the handler no longer owns it).
var ErrLeave = errors.New("left unsettled")

// Consume hands the durable consumer c's messages to h until ctx is done,
// and returns once every handler it started has returned. What h returns
// settles the message (see Settle). A message that does not decode is
// terminated and logged. With c.Existing the consumer is only opened
// (someone else creates it; Consume waits while it is not there); else it
// is created, or updated, from c. With c.Admit a message is fetched only
// once Admit has returned (a slot, or enough capacity, is free), and h
// runs on its own goroutine, the message holding what Admit returned
// (Delivery.Hold) until h returns: what Admit hands out bounds the
// messages handled at once across every Consume that shares it. Without,
// messages are handled one at a time. A fetch that fails (the consumer lost with a node, deleted) opens
// or creates the consumer again and goes on; Consume returns ctx's error,
// or an error that asking again will not mend.
func (b *Bus) Consume(ctx context.Context, c Consumer, h func(ctx context.Context, d *Delivery) error) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	var cons jetstream.Consumer
	for {
		if cons == nil {
			var err error
			if cons, err = b.openConsumer(ctx, c); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if final(err) {
					return fmt.Errorf("consume %s: %w", c.Name, err)
				}
				b.Log.Debug().Err(err).Str("consumer", c.Name).Msg("consume: the consumer is not there yet")
				_ = clock.Sleep(ctx, time.Second) // an ended ctx ends the loop on its next pass
				continue
			}
		}
		var hold Hold
		if c.Admit != nil {
			var err error
			if hold, err = c.Admit(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("consume %s: admit: %w", c.Name, err)
			}
		}
		fetch := next
		if c.NoWait {
			fetch = nextNoWait
		}
		d, err := fetch(ctx, cons, consumeWait)
		if err != nil || d == nil {
			if hold != nil {
				hold.Release()
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				if final(err) {
					return fmt.Errorf("consume %s: %w", c.Name, err)
				}
				b.Log.Warn().Err(err).Str("consumer", c.Name).Msg("consume: fetch")
				cons = nil
				_ = clock.Sleep(ctx, time.Second) // an ended ctx ends the loop on its next pass
			}
			continue
		}
		if c.Admit == nil {
			b.Settle(ctx, d, b.run(ctx, d, h))
			continue
		}
		d.Hold = hold
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer hold.Release()
			b.Settle(ctx, d, b.run(ctx, d, h))
		}()
	}
}

// Slots returns an Admit that lets n messages be handled at once: each
// holds one of n slots until its handler returns.
func Slots(n int) func(ctx context.Context) (Hold, error) {
	ch := make(chan struct{}, n)
	return func(ctx context.Context) (Hold, error) {
		select {
		case ch <- struct{}{}:
			return slot(ch), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// slot is one of the slots of Slots.
type slot chan struct{}

func (s slot) Release() { <-s }

// consumeWait bounds one fetch of Consume.
const consumeWait = 5 * time.Second

// openConsumer opens c, or creates or updates it unless c.Existing.
func (b *Bus) openConsumer(ctx context.Context, c Consumer) (jetstream.Consumer, error) {
	if c.Existing {
		return b.js.Consumer(ctx, StreamName, c.Name)
	}
	cfg := jetstream.ConsumerConfig{
		Durable: c.Name, Description: c.Description, FilterSubject: c.Filter,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: c.AckWait, MaxDeliver: c.MaxDeliver,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if c.StartSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, c.StartSeq
	}
	return b.js.CreateOrUpdateConsumer(ctx, StreamName, cfg)
}

// next waits up to wait for one message of cons; it returns nil, with no
// error, when none came in time.
func next(ctx context.Context, cons jetstream.Consumer, wait time.Duration) (*Delivery, error) {
	fctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	m, err := cons.Next(jetstream.FetchContext(fctx))
	if errors.Is(err, nats.ErrTimeout) || (errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return delivery(m)
}

// delivery decodes a fetched message.
func delivery(m jetstream.Msg) (*Delivery, error) {
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

// nextNoWait returns the message of cons pending now, or nil, with no
// error, when none is. It waits for the server's answer even when ctx has
// ended: a message handed out to a fetch is this caller's to settle, and
// one dropped would count as a delivery no one saw (with max_failures 0,
// the trial's only one). The server answers a no-wait fetch at once, and
// nats.go ends the fetch a second after sending it whatever happens.
func nextNoWait(_ context.Context, cons jetstream.Consumer, _ time.Duration) (*Delivery, error) {
	batch, err := cons.FetchNoWait(1)
	if err != nil {
		return nil, err
	}
	m, ok := <-batch.Messages()
	if !ok || m == nil {
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, err
		}
		return nil, nil
	}
	return delivery(m)
}

// run runs h on d, a panic recovered; a message that does not decode is
// not handed to h but terminated.
func (b *Bus) run(ctx context.Context, d *Delivery, h func(ctx context.Context, d *Delivery) error) error {
	if d.Malformed != nil {
		b.Log.Warn().Err(d.Malformed).Str("subject", d.Subject).Msg("consume: terminating a malformed message")
		return Terminate(fmt.Errorf("malformed: %w", d.Malformed))
	}
	return b.recovered(d.Event, d.Subject, func() error { return h(ctx, d) })
}

// Settle settles a delivery by what its handler returned: nil acks it
// (and waits for the server to confirm), Retry naks it with its delay,
// Terminate ends it for good, ErrLeave leaves it to be handed out again after
// AckWait, and any other error (a panic's too) naks it with FailureDelay.
// A failure to settle is logged: the message is then handed out again
// after AckWait. It settles also when ctx has ended: the handler's work
// is done.
func (b *Bus) Settle(ctx context.Context, d *Delivery, err error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTry)
	defer cancel()
	var se *settleError
	switch {
	case err == nil:
		err = d.msg.DoubleAck(sctx)
	case errors.Is(err, ErrLeave):
		return
	case errors.As(err, &se) && se.term:
		err = d.msg.TermWithReason(se.Error())
	case errors.As(err, &se):
		err = d.msg.NakWithDelay(se.delay)
	default:
		b.eventLog(b.Log.Warn(), d.Event, d.Subject).Err(err).Msg("consume: the handler failed; handing the message out again")
		err = d.msg.NakWithDelay(FailureDelay)
	}
	if err != nil {
		b.eventLog(b.Log.Warn(), d.Event, d.Subject).Err(err).Msg("settle: it is handed out again after the ack wait")
	}
}

// errPanicked is the error of a handler that panicked.
var errPanicked = errors.New("the handler panicked")

// recovered runs f, turning a panic into an error logged with the event
// (nil ev: none) on subject and the stack.
func (b *Bus) recovered(ev *events.Event, subject string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			b.eventLog(b.Log.Error(), ev, subject).Interface("panic", p).Str("stack", string(debug.Stack())).Msg("recovered a panic")
			err = fmt.Errorf("%w: %v", errPanicked, p)
		}
	}()
	return f()
}

// eventLog adds what identifies an event to a log line.
func (b *Bus) eventLog(e *zerolog.Event, ev *events.Event, subject string) *zerolog.Event {
	e = e.Str("subject", subject)
	if ev != nil {
		e = e.Str("type", ev.Type()).Uint64("seq", ev.Seq).Str("experiment", ev.Experiment)
	}
	return e
}

// Follow reads the durable consumer c, created afresh (one left from
// before is deleted: c.StartSeq says where to read from) with acks that
// cover every message up to the one acked, and sends its messages,
// decoded, on the returned channel until ctx is done. A holder acks
// (Delivery.Ack) what it has made durable; what the server hands out again
// after c.AckWait the holder already has, and Follow drops it. When the consumer cannot be created, or
// is lost (a node's loss, a deletion), or a delivery the server counted
// never arrived (lost in flight), Follow creates it again from the
// message after the last it sent, waiting 1 s doubling to 5 s between
// failed creations: the holder misses nothing and gets nothing twice.
func (b *Bus) Follow(ctx context.Context, c Consumer) <-chan *Delivery {
	out := make(chan *Delivery, 1024)
	go func() {
		for failed := 0; ; {
			sent, err := b.follow(ctx, c, out)
			if ctx.Err() != nil {
				return
			}
			if sent > 0 {
				c.StartSeq, failed = sent+1, 0
			}
			b.Log.Warn().Err(err).Str("consumer", c.Name).Uint64("from", c.StartSeq).Msg("follow: following the log again")
			if failed++; failed > 1 || sent == 0 {
				if clock.Sleep(ctx, min(time.Second<<min(failed-1, 10), 5*time.Second)) != nil {
					return
				}
			}
		}
	}()
	return out
}

// errDeliveryGap is a consumer's delivery that never reached this client.
var errDeliveryGap = errors.New("a delivery was lost")

// follow creates c and sends its messages to out until ctx is done, the
// consumer is lost or a delivery did not arrive; sent is the log sequence
// of the last message sent.
func (b *Bus) follow(ctx context.Context, c Consumer, out chan<- *Delivery) (sent uint64, err error) {
	if err := b.js.DeleteConsumer(ctx, StreamName, c.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, fmt.Errorf("reset consumer %s: %w", c.Name, err)
	}
	cfg := jetstream.ConsumerConfig{
		Durable: c.Name, Description: c.Description, FilterSubject: c.Filter,
		AckPolicy: jetstream.AckAllPolicy, AckWait: c.AckWait, MaxAckPending: -1,
		MaxDeliver: c.MaxDeliver, DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if c.StartSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, c.StartSeq
	}
	cons, err := b.js.CreateConsumer(ctx, StreamName, cfg)
	if err != nil {
		return 0, fmt.Errorf("consumer %s: %w", c.Name, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return 0, fmt.Errorf("consumer %s: %w", c.Name, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	var delivered uint64 // the consumer's delivery sequence of the last message
	for {
		m, err := it.Next()
		if errors.Is(err, jetstream.ErrNoHeartbeat) {
			// Not terminal: the iterator pulls again by itself.
			continue
		}
		if err != nil {
			return sent, fmt.Errorf("consumer %s: %w", c.Name, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return sent, fmt.Errorf("consumer %s: %w", c.Name, err)
		}
		// Every delivery, a redelivery too, takes the consumer's next
		// delivery sequence. A gap is a delivery the server counted and
		// this client never got (lost in flight with a node): a later ack
		// would cover it, so read the log again from after the last sent.
		if md.Sequence.Consumer != delivered+1 {
			return sent, fmt.Errorf("consumer %s: delivery %d came after %d: %w", c.Name, md.Sequence.Consumer, delivered, errDeliveryGap)
		}
		delivered = md.Sequence.Consumer
		if md.Sequence.Stream <= sent {
			continue // handed out again: the holder has it
		}
		// Decoded here, off the holder's goroutine.
		d := &Delivery{Subject: m.Subject(), msg: m, Num: int(md.NumDelivered), Last: md.NumPending == 0}
		d.Event, d.Malformed = events.Decode(m.Subject(), m.Headers(), m.Data())
		if d.Malformed == nil {
			d.Event.Seq = md.Sequence.Stream
		}
		select {
		case out <- d:
			sent = md.Sequence.Stream
		case <-ctx.Done():
			return sent, ctx.Err()
		}
	}
}
