package bus

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
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
}

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

// Consume creates (or updates) the durable consumer c and hands its
// messages, one at a time, to h until ctx is done. What h returns settles
// the message: nil acks it, Retry naks it with a delay, Terminate ends it
// for good, any other error naks it with FailureDelay. A handler that
// panics is recovered, logged with the event and the stack, and its
// message naked with FailureDelay: the next message is still handled. A
// message that does not decode is terminated and logged. When the
// consumer is lost (a node's loss, a deletion) it is created again and
// consuming goes on; Consume returns ctx's error, or an error that asking
// again will not mend.
func (b *Bus) Consume(ctx context.Context, c Consumer, h func(ctx context.Context, d *Delivery) error) error {
	cfg := jetstream.ConsumerConfig{
		Durable: c.Name, Description: c.Description, FilterSubject: c.Filter,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: c.AckWait, MaxDeliver: c.MaxDeliver,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if c.StartSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, c.StartSeq
	}
	w := &watch{b: b, filter: c.Filter}
	for {
		var cons jetstream.Consumer
		err := w.retry(ctx, func(ctx context.Context) (err error) {
			cons, err = b.JS.CreateOrUpdateConsumer(ctx, StreamName, cfg)
			return err
		})
		if err == nil {
			err = b.consume(ctx, cons, h)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if final(err) {
			return fmt.Errorf("consume %s: %w", c.Name, err)
		}
		b.Log.Info().Err(err).Str("consumer", c.Name).Msg("consume: lost the consumer; consuming again")
	}
}

// consume hands the consumer's messages to h until ctx is done or the
// consumer is lost.
func (b *Bus) consume(ctx context.Context, cons jetstream.Consumer, h func(ctx context.Context, d *Delivery) error) error {
	it, err := cons.Messages(jetstream.PullHeartbeat(watchHeartbeat), jetstream.PullMaxMessages(1))
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		m, err := it.Next()
		if err != nil {
			return err
		}
		b.handle(ctx, m, h)
	}
}

// handle decodes m, runs h on it and settles m by h's result.
func (b *Bus) handle(ctx context.Context, m jetstream.Msg, h func(ctx context.Context, d *Delivery) error) {
	md, err := m.Metadata()
	if err != nil {
		b.Log.Warn().Err(err).Str("subject", m.Subject()).Msg("consume: a message without metadata")
		return
	}
	ev, err := events.Decode(m.Subject(), m.Headers(), m.Data())
	if err != nil {
		b.Log.Warn().Err(err).Str("subject", m.Subject()).Uint64("seq", md.Sequence.Stream).Msg("consume: terminating a malformed message")
		if err := m.TermWithReason("malformed"); err != nil {
			b.Log.Warn().Err(err).Uint64("seq", md.Sequence.Stream).Msg("consume: terminate")
		}
		return
	}
	ev.Seq = md.Sequence.Stream
	err = b.recovered(ev, m.Subject(), func() error {
		return h(ctx, &Delivery{Event: ev, Num: int(md.NumDelivered), Subject: m.Subject(), msg: m})
	})
	// Settled also when ctx ended as the handler returned: its work is done.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTry)
	defer cancel()
	var se *settleError
	switch {
	case err == nil:
		err = m.DoubleAck(sctx)
	case errors.As(err, &se) && se.term:
		err = m.TermWithReason(se.Error())
	case errors.As(err, &se):
		err = m.NakWithDelay(se.delay)
	default:
		b.eventLog(b.Log.Warn(), ev, m.Subject()).Err(err).Msg("consume: the handler failed; handing the message out again")
		err = m.NakWithDelay(FailureDelay)
	}
	if err != nil {
		b.eventLog(b.Log.Warn(), ev, m.Subject()).Err(err).Msg("consume: settle")
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
// (Delivery.Ack) what it has made durable; what is not acked within
// c.AckWait is handed out again. When the consumer cannot be created, or
// is lost (a node's loss, a deletion), Follow creates it again from the
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
				t := time.NewTimer(min(time.Second<<min(failed-1, 10), 5*time.Second))
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return
				}
			}
		}
	}()
	return out
}

// follow creates c and sends its messages to out until ctx is done or the
// consumer is lost; sent is the log sequence of the last message sent.
func (b *Bus) follow(ctx context.Context, c Consumer, out chan<- *Delivery) (sent uint64, err error) {
	if err := b.JS.DeleteConsumer(ctx, StreamName, c.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
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
	cons, err := b.JS.CreateConsumer(ctx, StreamName, cfg)
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
	for {
		m, err := it.Next()
		if errors.Is(err, jetstream.ErrNoHeartbeat) {
			// Not terminal: the iterator pulls again by itself.
			continue
		}
		if err != nil {
			return sent, fmt.Errorf("consumer %s: %w", c.Name, err)
		}
		// Decoded here, off the holder's goroutine, with the metadata
		// parsed once for both the sequence and the pending count.
		d := &Delivery{Subject: m.Subject(), msg: m}
		md, merr := m.Metadata()
		d.Event, d.Malformed = events.Decode(m.Subject(), m.Headers(), m.Data())
		if merr == nil {
			d.Num, d.Last = int(md.NumDelivered), md.NumPending == 0
			if d.Malformed == nil {
				d.Event.Seq = md.Sequence.Stream
			}
		}
		select {
		case out <- d:
			if merr == nil {
				sent = md.Sequence.Stream
			}
		case <-ctx.Done():
			return sent, ctx.Err()
		}
	}
}
