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
// reconnect) is published again, as PublishMsg does.
//
// Order is kept across such a loss: the unanswered publishes go out again
// one by one in the order they timed out, and while any publish has gone
// unanswered for holdAfter, or some wait to go out again, PublishAsync
// waits (up to PublishRetryFor) instead of storing a newer event first.
// Readers fold an attempt's reports in order, so a report stored after a
// newer one would be dropped.
func (b *Bus) PublishAsync(ev *events.Event) (jetstream.PubAckFuture, error) {
	msg, err := ToNATS(ev)
	if err != nil {
		return nil, err
	}
	b.acks.hold()
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
// acknowledgement callbacks, publishing again, in order, what went
// unanswered.
type asyncAcks struct {
	mu      sync.Mutex
	pending map[string]*ackFuture // by Nats-Msg-Id
	order   []*ackFuture          // pending in publish order (answered ones dropped lazily)
	redo    []*ackFuture          // unanswered, to publish again in this order
	working bool                  // a goroutine is publishing redo
	changed chan struct{}         // closed when a publish is answered or redone
	// republish stores a message again, retrying (Bus.PublishMsg).
	republish func(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error)
}

// asyncAckTimeout fails an async publish nobody answered (the leader that
// got it died), so that it is published again.
var asyncAckTimeout = 2 * publishTry

// holdAfter is how long a publish may go unanswered before newer ones wait.
const holdAfter = time.Second

func newAsyncAcks() *asyncAcks {
	return &asyncAcks{pending: map[string]*ackFuture{}, changed: make(chan struct{})}
}

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
			if !retryable(err) {
				if f := a.take(msg); f != nil {
					f.err <- err
				}
				return
			}
			a.again(msg, err)
		}),
	}
}

func (a *asyncAcks) add(msg *nats.Msg) *ackFuture {
	f := &ackFuture{msg: msg, at: time.Now(), ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	a.mu.Lock()
	a.pending[msg.Header.Get(events.HeaderMsgID)] = f
	a.order = append(a.order, f)
	a.mu.Unlock()
	return f
}

// take removes msg's future from the pending ones and returns it (nil if
// it is not pending).
func (a *asyncAcks) take(msg *nats.Msg) *ackFuture {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.takeLocked(msg)
	if f != nil {
		a.notifyLocked()
	}
	return f
}

func (a *asyncAcks) takeLocked(msg *nats.Msg) *ackFuture {
	id := msg.Header.Get(events.HeaderMsgID)
	f := a.pending[id]
	if f == nil || f.msg != msg {
		return nil
	}
	delete(a.pending, id)
	f.answered = true
	return f
}

func (a *asyncAcks) notifyLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// again queues msg to be published again, after those queued before it.
func (a *asyncAcks) again(msg *nats.Msg, cause error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.takeLocked(msg)
	if f == nil {
		return
	}
	f.cause = cause
	// In publish order: nats.go's timeouts may fire out of it.
	i, _ := slices.BinarySearchFunc(a.redo, f, func(x, y *ackFuture) int { return x.at.Compare(y.at) })
	a.redo = slices.Insert(a.redo, i, f)
	if !a.working {
		a.working = true
		go a.publishAgain()
	}
}

// publishAgain publishes the queued messages one by one, in publish
// order: it waits while an older publish is still pending (its timeout
// may not have fired yet).
func (a *asyncAcks) publishAgain() {
	for {
		a.mu.Lock()
		if len(a.redo) == 0 {
			a.working = false
			a.notifyLocked()
			a.mu.Unlock()
			return
		}
		f := a.redo[0]
		a.dropAnsweredLocked()
		if len(a.order) > 0 && a.order[0].at.Before(f.at) {
			changed := a.changed
			a.mu.Unlock()
			select {
			case <-changed:
			case <-time.After(asyncAckTimeout):
			}
			continue
		}
		a.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), PublishRetryFor)
		ack, err := a.republish(ctx, f.msg)
		cancel()
		if err != nil {
			f.err <- fmt.Errorf("%w (first attempt: %v)", err, f.cause)
		} else {
			f.ok <- ack
		}
		a.mu.Lock()
		a.redo = a.redo[1:]
		a.notifyLocked()
		a.mu.Unlock()
	}
}

// hold waits, up to PublishRetryFor, while publishes wait to go out again
// or the oldest pending one has gone unanswered for holdAfter.
func (a *asyncAcks) hold() {
	var deadline <-chan time.Time
	for {
		stalled, changed := a.stalled()
		if !stalled {
			return
		}
		if deadline == nil {
			deadline = time.After(PublishRetryFor)
		}
		t := time.NewTimer(holdAfter)
		select {
		case <-changed:
		case <-t.C:
		case <-deadline:
			t.Stop()
			return
		}
		t.Stop()
	}
}

// stalled reports whether publishes wait to go out again or the oldest
// pending one has gone unanswered for holdAfter, and returns the channel
// closed at the next change.
func (a *asyncAcks) stalled() (bool, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropAnsweredLocked()
	return len(a.redo) > 0 || len(a.order) > 0 && time.Since(a.order[0].at) >= holdAfter, a.changed
}

// dropAnsweredLocked drops answered futures from the head of order, so
// that its head is the oldest pending publish.
func (a *asyncAcks) dropAnsweredLocked() {
	for len(a.order) > 0 && a.order[0].answered {
		a.order[0] = nil
		a.order = a.order[1:]
	}
}

// ackFuture is a jetstream.PubAckFuture that outlives retries.
type ackFuture struct {
	msg      *nats.Msg
	at       time.Time // published
	answered bool      // no longer pending (under asyncAcks.mu)
	cause    error     // why it is published again
	ok       chan *jetstream.PubAck
	err      chan error
}

func (f *ackFuture) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f *ackFuture) Err() <-chan error            { return f.err }
func (f *ackFuture) Msg() *nats.Msg               { return f.msg }
