package syncer

import (
	"context"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
)

// follow consumes the log from what the fold has, retrying (1 s, doubling
// to 5 s) until it can or ctx is done. The consumer outlives ctx a little:
// on shutdown the writer first catches up with what is already in the log;
// stop ends it.
func (w *writer) follow(ctx context.Context) (msgs <-chan *bus.Delivery, errs <-chan error, stop context.CancelFunc, err error) {
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
// snapshot and streams its messages. A sync acks what its snapshot
// covers; what no sync covers in time is handed out again.
func (w *writer) consume(ctx context.Context) (<-chan *bus.Delivery, <-chan error, error) {
	sc := w.s.syncConfig(w.syncSpec())
	c := bus.Consumer{
		Name: "sync_" + w.exp, Description: "syncer of experiment " + w.exp, Filter: events.ExperimentSubjects(w.exp),
		AckWait: 2*sc.SyncPeriod + time.Duration(sc.MaxRetries+1)*sc.SyncTimeout,
	}
	if w.st.LastSeq > 0 {
		c.StartSeq = w.st.LastSeq + 1
	}
	return w.s.bus.Follow(ctx, c)
}
