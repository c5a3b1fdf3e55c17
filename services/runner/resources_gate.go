package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
)

// gate decides when the runner may take an experiment's next work
// message. JetStream hands work out oldest first, and a message taken
// must not be handed back (a nak spends one of the trial's attempts), so
// the runner takes one only when its free capacity holds the largest
// shape among the experiment's outstanding work: whichever message comes
// then fits at once. Outstanding work is every trial.scheduled of the
// experiment whose trial has not completed or paused since; before any,
// the trainable's default shape.
type gate struct {
	exp string
	mu  sync.Mutex
	def events.Resources
	// shapes of the outstanding work, by trial.
	shapes map[string]events.Resources
	seen   uint64        // the last trial.scheduled the gate has read
	wake   chan struct{} // closed and replaced when the gate changes
}

func newGate(exp string) *gate {
	return &gate{exp: exp, def: events.DefaultShape(), shapes: map[string]events.Resources{}, wake: make(chan struct{})}
}

// filters are the events the gate reads.
func (g *gate) filters() []string {
	return []string{
		events.TypeSubjects(g.exp, events.WriterClient, events.TypeExperimentSubmitted),
		events.TypeSubjects(g.exp, events.WriterController, events.TypeTrialScheduled),
		events.TypeSubjects(g.exp, "*", events.TypeTrialCompleted),
		events.TypeSubjects(g.exp, "*", events.TypeTrialPaused),
		// A failed attempt's work comes again after its backoff: wake.
		events.TypeSubjects(g.exp, "*", events.TypeTrialFailed),
	}
}

// scheduledSubjects matches the experiment's work.
func (g *gate) scheduledSubjects() string {
	return events.TypeSubjects(g.exp, events.WriterController, events.TypeTrialScheduled)
}

// read takes one event into the gate.
func (g *gate) read(ev *events.Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch p := ev.Data.(type) {
	case *events.ExperimentSubmitted:
		g.def = p.Spec.Trainable.DefaultShapeOf()
	case *events.TrialScheduled:
		g.shapes[p.TrialID] = p.Shape()
		g.seen = ev.Seq
	case *events.TrialCompleted:
		delete(g.shapes, p.TrialID)
	case *events.TrialPaused:
		delete(g.shapes, p.TrialID)
	}
	close(g.wake)
	g.wake = make(chan struct{})
}

// skipTo counts the work before log sequence seq as read.
func (g *gate) skipTo(seq uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen = max(g.seen, seq)
	close(g.wake)
	g.wake = make(chan struct{})
}

// largest is the amount-by-amount largest shape of the outstanding work,
// and what changes it.
func (g *gate) largest() (events.Resources, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.shapes) == 0 {
		return g.def, g.wake
	}
	out := events.Resources{}
	for _, s := range g.shapes {
		out = out.Max(s)
	}
	return out, g.wake
}

// caughtUp waits until the gate has read every trial.scheduled of the
// experiment in the log now, so that the next message fetched is one it
// knows (unless it was published since).
func (g *gate) caughtUp(ctx context.Context, b *bus.Bus) error {
	last, err := b.LastSeq(ctx, g.scheduledSubjects())
	if err != nil {
		return fmt.Errorf("last trial work of %s: %w", g.exp, err)
	}
	for {
		g.mu.Lock()
		seen, wake := g.seen, g.wake
		g.mu.Unlock()
		if seen >= last {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// watchGate reads the experiment's work into g until ctx ends, from the
// experiment's last restore on: work from before it is stale (a runner
// drops it), and the trials it names may never complete in the log.
func (s *Service) watchGate(ctx context.Context, g *gate) {
	from, err := s.bus.LastSeq(ctx, events.TypeSubjects(g.exp, events.WriterRestorer, events.TypeExperimentRestored))
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error().Err(err).Str("experiment", g.exp).Msg("finding the experiment's last restore; reading all its work")
		}
		from = 0
	}
	if from > 0 {
		g.skipTo(from)
	}
	err = s.bus.WatchSubjects(ctx, g.filters(), from, bus.Handler{Event: g.read})
	if err != nil && ctx.Err() == nil {
		s.log.Error().Err(err).Str("experiment", g.exp).Msg("watching the experiment's trial work stopped")
	}
}

// admit is the experiment's bus.Consumer Admit: it waits until the gate
// has read the work in the log and the free capacity holds the largest
// shape of it, and holds that shape. A runner that cannot hold it even
// when idle takes none of the experiment's work, and says why once.
func (s *Service) admit(g *gate) func(ctx context.Context) (bus.Hold, error) {
	var told string
	var last *hold
	return func(ctx context.Context) (bus.Hold, error) {
		if last != nil && last.missed() {
			// The last fetch found nothing pending: wait for new work, or
			// poll again for work handed out again (a retry's backoff, a
			// lost runner's heartbeat timeout), which no event announces.
			_, gateChanged := g.largest()
			t := time.NewTimer(idlePoll)
			select {
			case <-gateChanged:
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
			t.Stop()
		}
		for {
			if err := g.caughtUp(ctx, s.bus); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				s.log.Warn().Err(err).Str("experiment", g.exp).Msg("reading the experiment's trial work")
				if !sleep(ctx, time.Second) {
					return nil, ctx.Err()
				}
				continue
			}
			shape, gateChanged := g.largest()
			if short := s.pool.fitsTotal(shape); short != "" {
				if why := shape.String(); why != told {
					told = why
					s.log.Warn().Str("experiment", g.exp).Str("needs", why).Str("capacity", s.pool.total.String()).
						Msgf("not taking the experiment's work: its largest trial needs %s=%s; this runner has %s=%s",
							short, shape.Amount(short), short, s.pool.total.Amount(short))
				}
				select {
				case <-gateChanged:
					continue
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			told = ""
			freed := s.pool.changed()
			if gr, ok := s.pool.take(shape); ok {
				last = &hold{p: s.pool, g: gr}
				return last, nil
			}
			select {
			case <-freed:
			case <-gateChanged:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
}

// idlePoll is how often a runner with free capacity looks for work handed
// out again when no new work is announced.
const idlePoll = time.Second

// fit makes the delivery's hold the shape of its work. The gate held the
// largest shape of the experiment's work, so the work fits in it, unless
// it was scheduled after the gate last read: then it waits, heartbeating,
// for the capacity, or, if this runner can never hold it, hands it back
// (which spends one of the trial's attempts).
func (s *Service) fit(ctx context.Context, exp string, d *bus.Delivery, work *events.TrialScheduled) (*hold, error) {
	h, ok := d.Hold.(*hold)
	if !ok {
		return nil, fmt.Errorf("trial work without a hold of the runner's capacity")
	}
	h.take()
	shape := work.Shape()
	if short := s.pool.fitsTotal(shape); short != "" {
		s.log.Error().Str("experiment", exp).Str("trial", work.TrialID).Str("needs", shape.String()).
			Msgf("took trial work this runner cannot hold (%s=%s, it has %s=%s); handing it back", short, shape.Amount(short), short, s.pool.total.Amount(short))
		return nil, bus.Retry(fmt.Errorf("needs %s, more than runner %s has", shape, s.cfg.Name), time.Second)
	}
	every := events.Seconds(work.HeartbeatTimeoutS) / 3
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		freed := s.pool.changed()
		if h.narrow(shape) {
			return h, nil
		}
		select {
		case <-freed:
		case <-t.C:
			if err := d.Progress(); err != nil {
				s.log.Warn().Err(err).Str("trial", work.TrialID).Msg("heartbeat while waiting for capacity")
			}
		case <-ctx.Done():
			return nil, bus.ErrLeave
		}
	}
}
