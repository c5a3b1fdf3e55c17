package syncer

import (
	"context"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
)

// follow consumes the log from the sequence after what the fold has (the
// snapshot resumed from) through the bus, which follows again by itself
// when the consumer is lost or a delivery went missing. A sync acks what
// its snapshot covers. The consumer outlives ctx a
// little: on shutdown the writer first catches up with what is already in
// the log; stop ends it.
func (w *writer) follow(ctx context.Context) (msgs <-chan *bus.Delivery, stop context.CancelFunc) {
	sc := w.s.syncConfig(w.syncSpec())
	c := bus.Consumer{
		Name: "sync_" + w.exp, Description: "syncer of experiment " + w.exp, Filter: events.ExperimentSubjects(w.exp),
		AckWait: 2*sc.SyncPeriod + time.Duration(sc.MaxRetries+1)*sc.SyncTimeout,
	}
	if w.st.LastSeq > 0 {
		c.StartSeq = w.st.LastSeq + 1
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return w.s.bus.Follow(cctx, c), cancel
}
