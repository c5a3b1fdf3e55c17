package syncer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
)

// follow consumes the log from what the fold has, retrying (1 s, doubling
// to 5 s) until it can or ctx is done. The consumer outlives ctx a little:
// on shutdown the writer first catches up with what is already in the log;
// stop ends it.
func (w *writer) follow(ctx context.Context) (msgs <-chan message, errs <-chan error, stop context.CancelFunc, err error) {
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		msgs, errs, err := w.consume(cctx)
		if err == nil {
			return msgs, errs, cancel, nil
		}
		cancel()
		w.log.Warn().Err(err).Int("attempt", attempt).Msg("cannot follow the log yet")
		t := time.NewTimer(openBackoff(attempt, 5*time.Second))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, nil, nil, err
		}
	}
}

// consume (re)creates the durable consumer from the sequence after the
// snapshot and streams its messages.
func (w *writer) consume(ctx context.Context) (<-chan message, <-chan error, error) {
	name := "sync_" + w.exp
	if err := w.s.bus.JS.DeleteConsumer(ctx, bus.StreamName, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, nil, fmt.Errorf("syncer: reset consumer %s: %w", name, err)
	}
	sc := w.s.syncConfig(w.syncSpec())
	cfg := jetstream.ConsumerConfig{
		Durable: name, Description: "syncer of experiment " + w.exp,
		FilterSubject: events.ExperimentSubjects(w.exp), AckPolicy: jetstream.AckAllPolicy,
		AckWait:       2*sc.SyncPeriod + time.Duration(sc.MaxRetries+1)*sc.SyncTimeout,
		MaxAckPending: -1, DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if w.st.LastSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, w.st.LastSeq+1
	}
	cons, err := w.s.bus.JS.CreateConsumer(ctx, bus.StreamName, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("syncer: consumer %s: %w", name, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, nil, fmt.Errorf("syncer: consumer %s: %w", name, err)
	}
	msgs, errs := make(chan message, 1024), make(chan error, 1)
	go func() {
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
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					errs <- fmt.Errorf("syncer: consumer %s: %w", name, err)
				}
				return
			}
			// Decoded here, off the writer's goroutine, with the metadata
			// parsed once for both the sequence and the pending count.
			md, merr := m.Metadata()
			ev, derr := events.Decode(m.Subject(), m.Headers(), m.Data())
			if derr == nil && merr == nil {
				ev.Seq = md.Sequence.Stream
			}
			select {
			case msgs <- message{m: m, ev: ev, err: derr, last: merr == nil && md.NumPending == 0}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return msgs, errs, nil
}

// message is a consumed message and its decoded event.
type message struct {
	m   jetstream.Msg
	ev  *events.Event
	err error
	// last is true when no message of the consumer is left after m: a
	// completed state met while replaying may be followed by a restore.
	last bool
}
