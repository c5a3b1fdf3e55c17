package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
)

// Handler receives a replay of the log.
type Handler struct {
	// Event is called for each decoded event, in stream order.
	Event func(ev *events.Event)
	// Invalid is called for a message that does not decode. When nil, the
	// message is skipped with a debug log.
	Invalid func(m jetstream.Msg, err error)
	// CaughtUp is called once, when the replay has delivered every message
	// that was in the log when Watch started.
	CaughtUp func()
}

// Watch replays the events matching filter from stream sequence from (1 or
// 0 for the beginning), then follows new ones, until ctx is done.
func (b *Bus) Watch(ctx context.Context, filter string, from uint64, h Handler) error {
	return b.WatchSubjects(ctx, []string{filter}, from, h)
}

// WatchSubjects is Watch over several filters at once, in stream order.
func (b *Bus) WatchSubjects(ctx context.Context, filters []string, from uint64, h Handler) error {
	s, err := b.Stream(ctx)
	if err != nil {
		return err
	}
	var target uint64
	for _, f := range filters {
		last, err := lastSeq(ctx, s, f)
		if err != nil {
			return err
		}
		target = max(target, last)
	}
	filter := strings.Join(filters, ",")
	caught := false
	catchUp := func(seq uint64, pending uint64) {
		if !caught && (seq >= target || pending == 0) {
			caught = true
			if h.CaughtUp != nil {
				h.CaughtUp()
			}
		}
	}
	if target < from || target == 0 {
		catchUp(target, 0)
	}
	// A watch's consumer goes with it: deleted when the watch ends, and
	// dropped by the server soon after if this process dies first.
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: filters, InactiveThreshold: orderedInactive}
	if from > 1 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = from
	}
	cons, err := s.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("watch %s: %w", filter, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("watch %s: %w", filter, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer b.deleteOrdered(s, cons)
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return ctx.Err()
			}
			return fmt.Errorf("watch %s: %w", filter, err)
		}
		md, err := m.Metadata()
		if err != nil {
			continue
		}
		ev, derr := FromJS(m)
		switch {
		case derr != nil && h.Invalid != nil:
			h.Invalid(m, derr)
		case derr != nil:
			b.Log.Debug().Str("subject", m.Subject()).Uint64("seq", md.Sequence.Stream).Err(derr).Msg("skipping a malformed message")
		default:
			h.Event(ev)
		}
		catchUp(md.Sequence.Stream, md.NumPending)
	}
}

// orderedInactive is how long the server keeps a watch's consumer after
// its client stopped asking.
const orderedInactive = 10 * time.Second

// deleteOrdered removes a finished watch's consumer from the server.
func (b *Bus) deleteOrdered(s jetstream.Stream, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.DeleteConsumer(ctx, info.Name)
}

// LastSeq is the sequence of the newest event matching filter, 0 if none.
func (b *Bus) LastSeq(ctx context.Context, filter string) (uint64, error) {
	s, err := b.Stream(ctx)
	if err != nil {
		return 0, err
	}
	return lastSeq(ctx, s, filter)
}

// lastSeq is the sequence of the newest message matching filter, 0 if none.
func lastSeq(ctx context.Context, s jetstream.Stream, filter string) (uint64, error) {
	m, err := s.GetLastMsgForSubject(ctx, filter)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last message on %s: %w", filter, err)
	}
	return m.Sequence, nil
}

// WorkConsumerName is the durable consumer runners pull an experiment's
// trial work from.
func WorkConsumerName(exp string) string { return "work_" + exp }

// WorkConfig is the configuration of an experiment's work consumer.
type WorkConfig struct {
	// MaxFailures from the experiment's FailureConfig: MaxDeliver is
	// MaxFailures+1, or unlimited for -1.
	MaxFailures int
	// AckWait is the heartbeat timeout.
	AckWait float64
	// StartSeq, when not 0, skips work scheduled before it (work from
	// before a restore is stale).
	StartSeq uint64
}

// EnsureWorkConsumer creates or updates the durable pull consumer that
// hands out an experiment's trial.scheduled events.
func (b *Bus) EnsureWorkConsumer(ctx context.Context, exp string, wc WorkConfig) (jetstream.Consumer, error) {
	maxDeliver := wc.MaxFailures + 1
	if wc.MaxFailures < 0 {
		maxDeliver = -1
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       WorkConsumerName(exp),
		Description:   "trial work of experiment " + exp,
		FilterSubject: events.TypeSubjects(exp, events.WriterController, events.TypeTrialScheduled),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       seconds(wc.AckWait),
		MaxDeliver:    maxDeliver,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if wc.StartSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, wc.StartSeq
	}
	if c, err := b.JS.Consumer(ctx, StreamName, cfg.Durable); err == nil {
		have := c.CachedInfo().Config
		if have.DeliverPolicy != cfg.DeliverPolicy || have.OptStartSeq != cfg.OptStartSeq {
			// A restored run starts after the restore: the old work goes.
			if err := b.JS.DeleteConsumer(ctx, StreamName, cfg.Durable); err != nil {
				return nil, fmt.Errorf("work consumer for %s: %w", exp, err)
			}
		}
	}
	c, err := b.JS.CreateOrUpdateConsumer(ctx, StreamName, cfg)
	if err != nil {
		return nil, fmt.Errorf("work consumer for %s: %w", exp, err)
	}
	return c, nil
}

// WorkConsumer returns an experiment's existing work consumer.
func (b *Bus) WorkConsumer(ctx context.Context, exp string) (jetstream.Consumer, error) {
	c, err := b.JS.Consumer(ctx, StreamName, WorkConsumerName(exp))
	if err != nil {
		return nil, fmt.Errorf("work consumer for %s: %w", exp, err)
	}
	return c, nil
}

// Replay calls fn for every event matching filter that is in the log now,
// in order, and returns.
func (b *Bus) Replay(ctx context.Context, filter string, fn func(ev *events.Event)) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := b.Watch(rctx, filter, 0, Handler{Event: fn, CaughtUp: cancel})
	if err != nil && ctx.Err() == nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
