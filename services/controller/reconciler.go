package controller

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// reconciler runs one experiment: it folds the experiment's events and
// reconciles whenever its view includes its own last decision.
type reconciler struct {
	s     *Service
	exp   string
	log   zerolog.Logger
	st    *state.Experiment
	space *search.Space
	evs   chan *events.Event // nil marks "caught up"

	caughtUp bool
	waitSeq  uint64 // decide only once the fold has reached this sequence
	workOK   bool   // the work consumer exists
}

func newReconciler(s *Service, exp string) *reconciler {
	return &reconciler{
		s: s, exp: exp, st: state.New(exp), evs: make(chan *events.Event, 1024),
		log: s.log.With().Str("experiment", exp).Logger(),
	}
}

func (r *reconciler) run(ctx context.Context) error {
	if r.completedBefore(ctx) {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- r.s.bus.Watch(wctx, events.ExperimentSubjects(r.exp), 0, bus.Handler{
			Event:    func(ev *events.Event) { r.push(wctx, ev) },
			Invalid:  r.s.deadLetter(wctx),
			CaughtUp: func() { r.push(wctx, nil) },
		})
	}()
	tick := time.NewTicker(r.s.cfg.Tick)
	defer tick.Stop()
	for {
		select {
		case ev := <-r.evs:
			r.apply(ev)
			r.drain()
		case <-tick.C:
		case err := <-watchErr:
			return err
		case <-ctx.Done():
			r.shutdown()
			return ctx.Err()
		}
		if r.caughtUp && r.st.LastSeq >= r.waitSeq {
			r.reconcile(ctx)
		}
		if r.st.Done() {
			r.log.Info().Str("reason", r.st.EndReason).Msg("experiment completed")
			return nil
		}
	}
}

// completedBefore skips replaying experiments that have already completed.
func (r *reconciler) completedBefore(ctx context.Context) bool {
	s, err := r.s.bus.Stream(ctx)
	if err != nil {
		return false
	}
	_, err = s.GetLastMsgForSubject(ctx, events.TypeSubjects(r.exp, events.WriterController, events.TypeExperimentCompleted))
	return err == nil
}

func (r *reconciler) push(ctx context.Context, ev *events.Event) {
	select {
	case r.evs <- ev:
	case <-ctx.Done():
	}
}

func (r *reconciler) apply(ev *events.Event) {
	if ev == nil {
		r.caughtUp = true
		return
	}
	r.st.Apply(ev)
}

// drain folds every event already waiting, so one reconcile covers a burst.
func (r *reconciler) drain() {
	for {
		select {
		case ev := <-r.evs:
			r.apply(ev)
		default:
			return
		}
	}
}

func (r *reconciler) reconcile(ctx context.Context) {
	if r.st.Spec == nil {
		return
	}
	if r.space == nil {
		sp, err := search.ParseSpace(r.st.Spec.ParamSpace)
		if err != nil {
			r.publish(ctx, Action{ID: r.exp + ".invalid", Payload: &events.ExperimentCompleted{Reason: "invalid", Error: err.Error()}})
			return
		}
		r.space = sp
	}
	if r.st.Status == state.ExperimentRunning && !r.ensureWork(ctx) {
		return
	}
	acts := Decide(r.st, Inputs{
		Now: time.Now(), Space: r.space, NewSeed: randomSeed(), NewPrefix: randomPrefix(),
		StoragePath: r.storagePath(), MaxPending: r.s.cfg.MaxPending,
	})
	for _, a := range acts {
		if _, ok := a.Payload.(*events.ExperimentStarted); ok && !r.ensureWork(ctx) {
			return
		}
		if !r.publish(ctx, a) {
			return
		}
	}
}

func (r *reconciler) storagePath() string {
	if r.s.cfg.StoragePath != "" {
		return r.s.cfg.StoragePath
	}
	return storage.DefaultPath()
}

// ensureWork creates the experiment's work consumer before any trial is
// scheduled (and again after a controller restart; it is idempotent).
func (r *reconciler) ensureWork(ctx context.Context) bool {
	if r.workOK {
		return true
	}
	fc := r.st.Spec.RunConfig.FailureConfig
	_, err := r.s.bus.EnsureWorkConsumer(ctx, r.exp, bus.WorkConfig{MaxFailures: fc.MaxFailures, AckWait: heartbeat(fc)})
	if err != nil {
		r.log.Error().Err(err).Msg("cannot create the work consumer; will retry")
		return false
	}
	r.workOK = true
	return true
}

// publish sends one decision and remembers its sequence: the next decision
// waits until the fold has seen it.
func (r *reconciler) publish(ctx context.Context, a Action) bool {
	ev := r.s.bus.Event(r.exp, events.WriterController, a.Payload)
	ev.ID = a.ID
	seq, err := r.s.bus.Publish(ctx, ev)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			r.log.Error().Err(err).Str("type", ev.Type()).Msg("publish decision failed; will retry")
		}
		return false
	}
	if seq > r.waitSeq {
		r.waitSeq = seq
	}
	return true
}

// shutdown marks a running experiment interrupted when the controller is
// configured to (the embedded stack).
func (r *reconciler) shutdown() {
	if !r.s.cfg.InterruptOnShutdown || r.st.Status != state.ExperimentRunning {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ev := r.s.bus.Event(r.exp, events.WriterController, &events.ExperimentInterrupted{Reason: "shutdown"})
	if _, err := r.s.bus.Publish(ctx, ev); err != nil {
		r.log.Warn().Err(err).Msg("could not record the interruption")
	}
}
