package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/clock"
)

// gate decides when the runner may take an experiment's next work
// message. JetStream hands work out oldest first, and a message taken
// must not be handed back (a nak spends one of the trial's attempts), so
// the runner takes one only when its free capacity holds the largest
// shape among the experiment's outstanding work: whichever message comes
// then fits at once. Outstanding work is every trial.scheduled of the
// experiment whose trial has not completed, paused or been handed back
// since; before any, the trainable's default shape.
type gate struct {
	exp string
	mu  sync.Mutex
	def events.Resources
	// shapes of the outstanding work, by trial, and the log sequence of
	// each trial's work.
	shapes map[string]events.Resources
	works  map[string]uint64
	seen   uint64        // the last trial.scheduled the gate has read
	wake   chan struct{} // closed and replaced when the gate changes
}

func newGate(exp string) *gate {
	return &gate{exp: exp, def: events.DefaultShape(), shapes: map[string]events.Resources{}, works: map[string]uint64{}, wake: make(chan struct{})}
}

// filters are the events the gate reads.
func (g *gate) filters() []string {
	return []string{
		events.TypeSubjects(g.exp, events.WriterClient, events.TypeExperimentSubmitted),
		events.TypeSubjects(g.exp, events.WriterController, events.TypeTrialScheduled),
		events.TypeSubjects(g.exp, "*", events.TypeTrialCompleted),
		events.TypeSubjects(g.exp, "*", events.TypeTrialPaused),
		events.TypeSubjects(g.exp, events.WriterRunner, events.TypeTrialReturned),
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
		g.shapes[p.TrialID], g.works[p.TrialID] = p.Shape(), ev.Seq
		g.seen = ev.Seq
	case *events.TrialCompleted:
		g.drop(p.TrialID)
	case *events.TrialPaused:
		g.drop(p.TrialID)
	case *events.TrialReturned:
		// The trial's work is no longer out, until it is scheduled again;
		// a hand-back of earlier work leaves the trial's newer work out.
		if g.works[p.TrialID] == p.WorkSeq {
			g.drop(p.TrialID)
		}
	}
	close(g.wake)
	g.wake = make(chan struct{})
}

// drop forgets a trial's work.
func (g *gate) drop(trial string) {
	delete(g.shapes, trial)
	delete(g.works, trial)
}

// poke wakes what waits on the gate: work may be pending again.
func (g *gate) poke() {
	g.mu.Lock()
	defer g.mu.Unlock()
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
//
// It also wakes the gate when a controller announces work of the
// experiment handed out again (bus.AnnounceWorkAgain), which no event of
// the log announces.
func (s *Service) watchGate(ctx context.Context, g *gate) {
	if stop, err := s.bus.OnWorkAgain(g.exp, g.poke); err != nil {
		s.log.Warn().Err(err).Str("experiment", g.exp).Msg("cannot hear of work handed on; polling for it")
	} else {
		defer stop()
	}
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
	// lastWake is the gate's wake-up as the last hold was handed out,
	// before its fetch: work the gate reads after that closes it, even
	// when the fetch missed it.
	var lastWake <-chan struct{}
	return func(ctx context.Context) (bus.Hold, error) {
		if last != nil && last.missed() {
			// The last fetch found nothing pending: wait for new work or for
			// a gone runner's work, which its controller naks and announces
			// (watchGate), or poll again for work handed out again that
			// nothing announces (a retry's backoff, a frozen runner's
			// heartbeat timeout).
			if s.hooks.idle != nil {
				s.hooks.idle(g)
			}
			poll := idlePoll
			if s.hooks.idlePoll > 0 {
				poll = s.hooks.idlePoll
			}
			t := time.NewTimer(poll)
			select {
			case <-lastWake:
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
				if clock.Sleep(ctx, time.Second) != nil {
					return nil, ctx.Err()
				}
				continue
			}
			shape, gateChanged := g.largest()
			if s.hooks.admit != nil {
				shape = s.hooks.admit(ctx, g.exp, shape)
			}
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
				last, lastWake = &hold{p: s.pool, g: gr}, gateChanged
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

// handBack gives back trial work this runner will not run (it can never
// hold it, or it stopped while the work waited for capacity) at no cost to
// the trial: a nak, or leaving it to the ack wait, would spend one of its
// max_failures + 1 deliveries (JetStream counts every redelivery), and
// with max_failures 0 end it ERROR without it ever running. It publishes
// trial.returned, naming the work, which makes the trial unscheduled again
// in the fold, so the controller schedules it anew; only then does it end
// the message, with a Terminate (JetStream sends no max-deliveries notice,
// which the controller would read as a lost trial, for it). Should this
// runner die between the two, the work is handed out again after the
// heartbeat timeout, as before, and the runner that gets it finds it
// returned (attempt.returnedBefore). If the hand-back cannot be stored,
// the work is left to that timeout too.
func (s *Service) handBack(ctx context.Context, exp string, d *bus.Delivery, work *events.TrialScheduled, reason string) error {
	log := s.log.With().Str("experiment", exp).Str("trial", work.TrialID).Str("needs", work.Shape().String()).Logger()
	p := &events.TrialReturned{
		TrialID: work.TrialID, Attempt: work.AttemptBase + d.Num, WorkSeq: d.Event.Seq, Runner: s.cfg.Name, Reason: reason,
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := s.bus.Publish(pctx, s.bus.Event(exp, events.WriterRunner, p)); err != nil {
		log.Error().Err(err).Str("reason", reason).Msg("cannot hand trial work back; leaving it to be handed out again")
		return bus.ErrLeave
	}
	log.Warn().Str("reason", reason).Msg("handed trial work back, at no cost to the trial")
	return bus.Terminate(fmt.Errorf("handed back: %s", reason))
}

// idlePoll is how often a runner with free capacity looks for work handed
// out again when no new work is announced.
const idlePoll = time.Second

// fit makes the delivery's hold the shape of its work. The gate held the
// largest shape of the experiment's work, so the work fits in it, unless
// it was scheduled after the gate last read: then it waits, heartbeating,
// for the capacity, or, if this runner can never hold it or stops
// meanwhile, hands it back (handBack), which costs the trial no attempt.
func (s *Service) fit(ctx context.Context, exp string, d *bus.Delivery, work *events.TrialScheduled) (*hold, error) {
	h, ok := d.Hold.(*hold)
	if !ok {
		return nil, fmt.Errorf("trial work without a hold of the runner's capacity")
	}
	h.take()
	shape := work.Shape()
	if short := s.pool.fitsTotal(shape); short != "" {
		return nil, s.handBack(ctx, exp, d, work, fmt.Sprintf("needs %s=%s; runner %s has %s=%s",
			short, shape.Amount(short), s.cfg.Name, short, s.pool.total.Amount(short)))
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
			return nil, s.handBack(ctx, exp, d, work, "runner "+s.cfg.Name+" stopped while the work waited for capacity")
		}
	}
}
