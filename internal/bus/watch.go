package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/clock"
)

// Handler receives a replay of the log.
type Handler struct {
	// Event is called for each decoded event, in stream order.
	Event func(ev *events.Event)
	// Invalid is called for a message that does not decode. When nil, the
	// message is skipped with a debug log.
	Invalid func(m Raw, err error)
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
//
// A watch outlives the loss of a NATS node: when the stream or the node
// holding the watch's consumer goes away (a leader election, a
// reconnect), it follows again from the message after the last it
// delivered, so that no event is missed or delivered twice. It returns an
// error only when the log has been unreachable for watchGiveUp, or ctx
// is done.
func (b *Bus) WatchSubjects(ctx context.Context, filters []string, from uint64, h Handler) error {
	filter := strings.Join(filters, ",")
	w := &watch{b: b, filters: filters, filter: filter, h: h, next: max(from, 1)}
	// target: the newest matching message now, to tell when the replay has
	// caught up.
	var target uint64
	err := w.retry(ctx, func(ctx context.Context) error {
		s, err := b.stream(ctx)
		if err != nil {
			return err
		}
		target = 0
		for _, f := range filters {
			last, err := lastSeq(ctx, s, f)
			if err != nil {
				return err
			}
			target = max(target, last)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("watch %s: %w", filter, err)
	}
	w.target = target
	if target < from || target == 0 {
		w.catchUp(target, 0)
	}
	for {
		var cons jetstream.Consumer
		err := w.retry(ctx, func(ctx context.Context) (err error) {
			cons, err = w.consumer(ctx)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("watch %s: %w", filter, err)
		}
		err = w.follow(ctx, cons)
		if ctx.Err() != nil {
			b.deleteOrdered(ctx, w.s, cons)
			return ctx.Err()
		}
		if final(err) {
			return fmt.Errorf("watch %s: %w", filter, err)
		}
		go b.deleteOrdered(ctx, w.s, cons)
		b.Log.Info().Err(err).Str("filter", filter).Uint64("next", w.next).Msg("watch: lost its consumer; following again")
	}
}

// A watch detects a consumer lost with its node after twice watchHeartbeat
// without a message or a heartbeat.
const watchHeartbeat = time.Second

// watchGiveUp is how long a watch keeps trying to reach the log before it
// returns the error (the longest a cluster should be without a leader).
const watchGiveUp = 2 * time.Minute

// watch is the state of one WatchSubjects.
type watch struct {
	b       *Bus
	filters []string
	filter  string
	h       Handler
	s       jetstream.Stream
	next    uint64 // the stream sequence to follow from
	target  uint64
	caught  bool
}

func (w *watch) catchUp(seq uint64, pending uint64) {
	if !w.caught && (seq >= w.target || pending == 0) {
		w.caught = true
		if w.h.CaughtUp != nil {
			w.h.CaughtUp()
		}
	}
}

// consumer creates an ordered consumer from w.next. A watch's consumer
// goes with it: deleted when the watch ends, and dropped by the server
// soon after if this process dies first.
func (w *watch) consumer(ctx context.Context) (jetstream.Consumer, error) {
	s, err := w.b.stream(ctx)
	if err != nil {
		return nil, err
	}
	w.s = s
	// One reset attempt inside nats.go: a lost consumer comes back here,
	// to be created again without nats.go's backoff of up to 10 s.
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: w.filters, InactiveThreshold: orderedInactive, MaxResetAttempts: 1}
	if w.next > 1 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = w.next
	}
	cons, err := s.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return cons, nil
}

// follow delivers the consumer's messages until ctx is done or the
// consumer is lost; the caller deletes the consumer.
func (w *watch) follow(ctx context.Context, cons jetstream.Consumer) error {
	it, err := cons.Messages(jetstream.PullHeartbeat(watchHeartbeat))
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
		md, err := m.Metadata()
		if err != nil {
			continue
		}
		w.next = md.Sequence.Stream + 1
		ev, derr := FromJS(m)
		switch {
		case derr != nil && w.h.Invalid != nil:
			w.h.Invalid(Raw{Subject: m.Subject(), Sequence: md.Sequence.Stream, Header: m.Headers(), Data: m.Data()}, derr)
		case derr != nil:
			w.b.Log.Debug().Str("subject", m.Subject()).Uint64("seq", md.Sequence.Stream).Err(derr).Msg("skipping a malformed message")
		default:
			w.h.Event(ev)
		}
		w.catchUp(md.Sequence.Stream, md.NumPending)
	}
}

// retry runs f, each try bounded by a request timeout, until it succeeds,
// ctx is done, or it has failed for watchGiveUp.
func (w *watch) retry(ctx context.Context, f func(ctx context.Context) error) error {
	start := time.Now()
	wait := 100 * time.Millisecond
	for {
		tctx, cancel := context.WithTimeout(ctx, publishTry)
		err := f(tctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(start) > watchGiveUp || final(err) {
			return err
		}
		w.b.Log.Debug().Err(err).Str("filter", w.filter).Msg("watch: the log did not answer; trying again")
		if clock.Sleep(ctx, wait) != nil {
			return ctx.Err()
		}
		wait = min(2*wait, time.Second)
	}
}

// final reports whether a watch's error will not go away by asking again:
// the connection was closed (the service is stopping), the log was
// deleted, or the user may not read it.
func final(err error) bool {
	return errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, nats.ErrPermissionViolation) || errors.Is(err, nats.ErrAuthorization)
}

// orderedInactive is how long the server keeps a watch's consumer after
// its client stopped asking.
const orderedInactive = 10 * time.Second

// deleteOrdered removes a finished watch's consumer from the server, also
// once ctx has ended.
func (b *Bus) deleteOrdered(ctx context.Context, s jetstream.Stream, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = s.DeleteConsumer(ctx, info.Name)
}

// LastSeq is the sequence of the newest event matching filter, 0 if none.
func (b *Bus) LastSeq(ctx context.Context, filter string) (uint64, error) {
	s, err := b.stream(ctx)
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
// hands out an experiment's trial.scheduled events (WorkQueue takes from
// it).
func (b *Bus) EnsureWorkConsumer(ctx context.Context, exp string, wc WorkConfig) error {
	cfg := jetstream.ConsumerConfig{
		Durable:       WorkConsumerName(exp),
		Description:   "trial work of experiment " + exp,
		FilterSubject: events.TypeSubjects(exp, events.WriterController, events.TypeTrialScheduled),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       events.Seconds(wc.AckWait),
		MaxDeliver:    events.FailureConfig{MaxFailures: wc.MaxFailures}.Attempts(),
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if wc.StartSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, wc.StartSeq
	}
	if c, err := b.js.Consumer(ctx, StreamName, cfg.Durable); err == nil {
		have := c.CachedInfo().Config
		if have.DeliverPolicy != cfg.DeliverPolicy || have.OptStartSeq != cfg.OptStartSeq {
			// A restored run starts after the restore: the old work goes.
			if err := b.js.DeleteConsumer(ctx, StreamName, cfg.Durable); err != nil {
				return fmt.Errorf("work consumer for %s: %w", exp, err)
			}
		}
	}
	if _, err := b.js.CreateOrUpdateConsumer(ctx, StreamName, cfg); err != nil {
		return fmt.Errorf("work consumer for %s: %w", exp, err)
	}
	return nil
}

// WorkMaxDeliver is how many deliveries an experiment's work consumer
// allows a piece of work: 0 or less for no bound.
func (b *Bus) WorkMaxDeliver(ctx context.Context, exp string) (int, error) {
	c, err := b.workConsumer(ctx, exp)
	if err != nil {
		return 0, err
	}
	return c.CachedInfo().Config.MaxDeliver, nil
}

// workConsumer returns an experiment's existing work consumer.
func (b *Bus) workConsumer(ctx context.Context, exp string) (jetstream.Consumer, error) {
	c, err := b.js.Consumer(ctx, StreamName, WorkConsumerName(exp))
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
