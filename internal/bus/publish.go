package bus

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/clock"
)

// Publish retries: a stream's Raft group takes 4-9 s (nats-server's
// election timeouts) to elect a new leader after losing one, and a client
// whose server died reconnects to another. Until then a publish gets no
// responders, or no answer at all. nats.go alone gives up after 0.5 s.
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

// publishMsg stores a message that carries a Nats-Msg-Id, retrying while
// the stream cannot answer (no leader, no answer in time, the connection
// lost), for as long as ctx allows, or PublishRetryFor when ctx has no
// deadline. A refusal (a failed expectation, a message too large) is
// returned at once. The message id makes retries safe: the log keeps one
// copy, and acknowledges the retry of a stored message as a duplicate (the
// server checks the id before any expected sequence).
func (b *Bus) publishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, PublishRetryFor)
		defer cancel()
	}
	opts = append(slices.Clip(opts), jetstream.WithRetryWait(publishRetryWait), jetstream.WithRetryAttempts(int(PublishRetryFor/publishRetryWait)))
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, publishTry)
		ack, err := b.js.PublishMsg(tctx, msg, opts...)
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
		if clock.Sleep(ctx, publishRetryWait) != nil {
			return nil, err
		}
	}
}

// PublishUnder is Publish for an event whose encoding takes at most limit
// bytes (no limit when limit <= 0): a larger one is not published, and
// published is false.
func (b *Bus) PublishUnder(ctx context.Context, ev *events.Event, limit int64) (published bool, err error) {
	msg, err := ToNATS(ev)
	if err != nil {
		return false, err
	}
	if limit > 0 && int64(msg.Size()) > limit {
		return false, nil
	}
	ack, err := b.publishMsg(ctx, msg)
	if err != nil {
		return false, fmt.Errorf("publish %s for %s: %w", ev.Type(), ev.Experiment, err)
	}
	ev.Seq = ack.Sequence
	return true, nil
}

// Retryable reports whether a publish failed for want of an answer (no
// leader, a timeout, a lost connection): it may have been stored or not,
// and publishing the same message again is safe.
func Retryable(err error) bool { return retryable(err) }
