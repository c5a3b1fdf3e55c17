package syncer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/metrics"
)

// announcer publishes what the syncer did to an experiment's log.
type announcer struct {
	bus *bus.Bus
	exp string
	log zerolog.Logger
}

// announce publishes p; a failure is logged.
func (a announcer) announce(ctx context.Context, p events.Payload) { _ = a.once(ctx, "", p) }

// once publishes p with a deterministic id (when not empty), so
// announcing the same thing twice stores it once. It returns the failure
// it logs, for callers that must not go on unless the log has the event.
func (a announcer) once(ctx context.Context, id string, p events.Payload) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ev := a.bus.Event(a.exp, events.WriterSyncer, p)
	if id != "" {
		ev.ID = a.exp + "." + id
	}
	if _, err := a.bus.Publish(actx, ev); err != nil {
		a.log.Warn().Err(err).Str("type", p.Type()).Msg("announce")
		return fmt.Errorf("syncer: announce %s: %w", p.Type(), err)
	}
	return nil
}

// failure logs and announces an operation that failed after attempt
// tries; it is tried again later. One the shutdown cancelled (ctx is done)
// did not fail: the syncer's last sync, or the next syncer, does it, so it
// is logged at info and not announced.
func (a announcer) failure(ctx context.Context, op string, err error, attempt int) {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		a.log.Info().Str("operation", op).Msg("stopped by the shutdown; done again before the syncer exits or by the next one")
		return
	}
	a.log.Error().Err(err).Str("operation", op).Msg("sync failed; it will be tried again")
	a.announceFailure(ctx, op, err, attempt)
}

// announceFailure is failure for a caller that logged it already.
func (a announcer) announceFailure(ctx context.Context, op string, err error, attempt int) {
	metrics.SyncFailures.WithLabelValues(a.exp).Inc()
	a.announce(ctx, &events.SyncFailed{Operation: op, Error: err.Error(), Attempt: attempt})
}

// gaveUp announces an operation the syncer stopped trying.
func (a announcer) gaveUp(ctx context.Context, op string, err error, tries int) {
	metrics.SyncFailures.WithLabelValues(a.exp).Inc()
	a.log.Error().Err(err).Str("operation", op).Msg("the checkpoint cannot be persisted; gave up on it")
	a.announce(ctx, &events.SyncFailed{Operation: op, Error: fmt.Sprintf("gave up after %d tries, the checkpoint is not persisted: %v", tries, err), Attempt: tries})
}
