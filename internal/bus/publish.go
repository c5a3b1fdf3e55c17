package bus

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
)

// Publish retries: a stream's Raft group takes 4-9 s (nats-server's
// election timeouts) to elect a new leader after losing one, and a client
// whose server died reconnects to another. Until then a publish gets no
// responders, or no answer at all. nats.go alone gives up after 0.5 s, and
// waits forever for the answer to an async publish that was lost.
const (
	// PublishRetryFor bounds how long a publish is retried when its
	// context has no deadline. It stays well inside the log's duplicate
	// window (2 min), so that the retry of a publish that was stored is
	// recognized and not stored again.
	PublishRetryFor = 30 * time.Second
	// publishTry bounds one attempt: its answer may go down with a leader.
	publishTry = 5 * time.Second
	// publishRetryWait is the pause between attempts.
	publishRetryWait = 100 * time.Millisecond
)

// PublishMsg stores a message that carries a Nats-Msg-Id, retrying while
// the stream cannot answer (no leader, no answer in time, the connection
// lost), for as long as ctx allows, or PublishRetryFor when ctx has no
// deadline. A refusal (a failed expectation, a message too large) is
// returned at once. The message id makes retries safe: the log keeps one
// copy, and acknowledges the retry of a stored message as a duplicate (the
// server checks the id before any expected sequence).
func (b *Bus) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, PublishRetryFor)
		defer cancel()
	}
	opts = append(slices.Clip(opts), jetstream.WithRetryWait(publishRetryWait), jetstream.WithRetryAttempts(int(PublishRetryFor/publishRetryWait)))
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, publishTry)
		ack, err := b.JS.PublishMsg(tctx, msg, opts...)
		cancel()
		if err == nil {
			if try > 1 {
				b.Log.Info().Str("subject", msg.Subject).Int("tries", try).Bool("duplicate", ack.Duplicate).Msg("stored after retrying")
			}
			return ack, nil
		}
		if ctx.Err() != nil || !retryable(err) {
			return nil, err
		}
		b.Log.Debug().Err(err).Str("subject", msg.Subject).Int("try", try).Msg("publish: the stream did not answer; retrying")
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(publishRetryWait):
		}
	}
}

// PublishAsync stores ev without waiting for the acknowledgement. The
// future fails only if the event could not be stored within
// PublishRetryFor: a publish left unanswered (no leader, a lost answer, a
// reconnect) is published again at once, as PublishMsg does.
func (b *Bus) PublishAsync(ev *events.Event) (jetstream.PubAckFuture, error) {
	msg, err := ToNATS(ev)
	if err != nil {
		return nil, err
	}
	f := b.acks.add(msg)
	// nats.go retries a publish that met no responders (no leader) itself.
	// With too many acknowledgements outstanding it waits for room (the
	// server is slow, not gone): the publisher slows down instead of the
	// trial failing after nats.go's default 200 ms.
	if _, err := b.JS.PublishMsgAsync(msg, jetstream.WithRetryWait(publishRetryWait), jetstream.WithRetryAttempts(int(PublishRetryFor/publishRetryWait)),
		jetstream.WithStallWait(PublishRetryFor)); err != nil {
		b.acks.take(msg)
		return nil, fmt.Errorf("publish %s for %s: %w", ev.Type(), ev.Experiment, err)
	}
	return f, nil
}

// Retryable reports whether a publish failed for want of an answer (no
// leader, a timeout, a lost connection): it may have been stored or not,
// and publishing the same message again is safe.
func Retryable(err error) bool { return retryable(err) }

// asyncAcks resolves the futures of PublishAsync from nats.go's
// acknowledgement callbacks, republishing what went unanswered.
type asyncAcks struct {
	mu      sync.Mutex
	pending map[string]*ackFuture // by Nats-Msg-Id
	// republish stores a message again, retrying (Bus.PublishMsg).
	republish func(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error)
}

// asyncAckTimeout fails an async publish nobody answered (the leader that
// got it died), so that it is published again.
const asyncAckTimeout = 2 * publishTry

func (a *asyncAcks) options() []jetstream.JetStreamOpt {
	return []jetstream.JetStreamOpt{
		jetstream.WithPublishAsyncTimeout(asyncAckTimeout),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, msg *nats.Msg, ack *jetstream.PubAck) {
			if f := a.take(msg); f != nil {
				f.ok <- ack
			}
		}),
		// Called with nats.go's publisher lock held when an ack times out:
		// it must not publish, or block.
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, msg *nats.Msg, err error) {
			f := a.take(msg)
			if f == nil {
				return
			}
			if !retryable(err) {
				f.err <- err
				return
			}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), PublishRetryFor)
				defer cancel()
				ack, rerr := a.republish(ctx, msg)
				if rerr != nil {
					f.err <- fmt.Errorf("%w (first attempt: %v)", rerr, err)
					return
				}
				f.ok <- ack
			}()
		}),
	}
}

func (a *asyncAcks) add(msg *nats.Msg) *ackFuture {
	f := &ackFuture{msg: msg, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	a.mu.Lock()
	a.pending[msg.Header.Get(events.HeaderMsgID)] = f
	a.mu.Unlock()
	return f
}

func (a *asyncAcks) take(msg *nats.Msg) *ackFuture {
	id := msg.Header.Get(events.HeaderMsgID)
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.pending[id]
	if f != nil && f.msg == msg {
		delete(a.pending, id)
		return f
	}
	return nil
}

// ackFuture is a jetstream.PubAckFuture that outlives retries.
type ackFuture struct {
	msg *nats.Msg
	ok  chan *jetstream.PubAck
	err chan error
}

func (f *ackFuture) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f *ackFuture) Err() <-chan error            { return f.err }
func (f *ackFuture) Msg() *nats.Msg               { return f.msg }
