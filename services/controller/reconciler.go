package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/metrics"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/tpe"
	"github.com/tunejet/tunejet/internal/tuning"

	"github.com/tunejet/tunejet/internal/settings"
)

// reconciler runs one experiment: it folds the experiment's events and
// reconciles whenever its view includes its own last decision.
type reconciler struct {
	s        *Service
	exp      string
	log      zerolog.Logger
	st       *state.Experiment
	space    *search.Space
	searcher tuning.Suggester   // search_alg tpe, bayesopt or nsga2; nil for random and grid
	known    []tpe.Trial        // tpe's evaluated points_to_evaluate
	external *externalSearcher  // search_alg external; nil for the others
	driver   *driverAsker       // the spec's driver section; nil without
	evs      chan *events.Event // nil marks "caught up"
	// exhausted receives the log sequences of trial work that ran out of
	// deliveries; dead holds those not handled yet.
	exhausted chan uint64
	dead      []uint64

	caughtUp bool
	waitSeq  uint64 // decide only once the fold has reached this sequence
	workOK   bool   // the work consumer exists

	// lease makes this controller the experiment's only decider; every
	// decision is fenced on lastCtlSeq, the last controller event folded.
	lease      *bus.Lease
	nextTry    time.Time
	lastCtlSeq uint64

	unfitTold map[string]string // trial → why it waits for a runner, as last logged

	// judged is, by trial, the attempt and iteration whose results were
	// last announced judged to a runner that waits for decisions.
	judged map[string]bus.Judged
}

func newReconciler(s *Service, exp string) *reconciler {
	return &reconciler{
		s: s, exp: exp, st: state.New(exp), evs: make(chan *events.Event, 1024), exhausted: make(chan uint64, 64),
		log: s.log.With().Str("experiment", exp).Logger(),
	}
}

func (r *reconciler) run(ctx context.Context) error {
	if r.completedBefore(ctx) {
		return nil
	}
	lease, err := r.s.bus.Lease(ctx, r.exp, r.s.bus.Source)
	if err != nil {
		return err
	}
	r.lease = lease
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		r.lease.Release(rctx)
		cancel()
	}()
	from, err := r.startSeq(ctx)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- r.s.bus.Watch(wctx, events.ExperimentSubjects(r.exp), from, bus.Handler{
			Event:    func(ev *events.Event) { r.push(wctx, ev) },
			Invalid:  r.s.deadLetter(wctx),
			CaughtUp: func() { r.push(wctx, nil) },
		})
	}()
	go func() {
		err := r.s.bus.WatchExhausted(wctx, r.exp, func(seq uint64) {
			select {
			case r.exhausted <- seq:
			case <-wctx.Done():
			}
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			r.log.Error().Err(err).Msg("watching for exhausted trial work")
		}
	}()
	tick := time.NewTicker(r.s.cfg.Tick)
	defer tick.Stop()
	liveRead := r.s.live.readCh() // nil once read: decisions wait for the registry
	for {
		select {
		case <-liveRead:
			liveRead = nil
		case ev := <-r.evs:
			r.apply(ctx, ev)
			r.drain(ctx)
		case seq := <-r.exhausted:
			r.dead = append(r.dead, seq)
		case res := <-r.external.replies():
			r.external.answered(ctx, res)
		case res := <-r.driver.replies():
			r.driver.answered(ctx, r.st, res)
		case <-tick.C:
		case err := <-watchErr:
			return err
		case <-ctx.Done():
			r.shutdown(ctx)
			return ctx.Err()
		}
		if r.caughtUp && r.st.LastSeq >= r.waitSeq && r.lead(ctx) {
			r.reconcile(ctx)
		}
		if r.caughtUp && r.st.Done() && len(r.evs) == 0 {
			r.log.Info().Str("reason", r.st.EndReason).Msg("experiment completed")
			return nil
		}
	}
}

// startSeq is where the fold starts: at the newest experiment.restored,
// whose staged state replaces everything folded before it (state.Fold),
// so a controller started after a restore does not replay the history
// before it; else at the beginning. The fence then starts from the newest
// controller event in the log: the fold meets every later one, and any
// before the restored event is the last one written before the fold's
// start.
func (r *reconciler) startSeq(ctx context.Context) (uint64, error) {
	restored, err := r.s.bus.LastSeq(ctx, events.TypeSubjects(r.exp, events.WriterRestorer, events.TypeExperimentRestored))
	if err != nil || restored == 0 {
		return 0, err
	}
	ctl, err := r.s.bus.LastSeq(ctx, events.WriterSubjects(r.exp, events.WriterController))
	if err != nil {
		return 0, err
	}
	r.lastCtlSeq = ctl
	r.log.Info().Uint64("seq", restored).Msg("folding from the last restore")
	return restored, nil
}

// completedBefore skips replaying experiments that have completed and have
// not been restored since.
func (r *reconciler) completedBefore(ctx context.Context) bool {
	done, err := r.s.bus.LastSeq(ctx, events.TypeSubjects(r.exp, events.WriterController, events.TypeExperimentCompleted))
	if err != nil || done == 0 {
		return false
	}
	restored, err := r.s.bus.LastSeq(ctx, events.TypeSubjects(r.exp, events.WriterRestorer, events.TypeExperimentRestored))
	return err == nil && restored < done
}

func (r *reconciler) push(ctx context.Context, ev *events.Event) {
	select {
	case r.evs <- ev:
	case <-ctx.Done():
	}
}

func (r *reconciler) apply(ctx context.Context, ev *events.Event) {
	if ev == nil {
		r.caughtUp = true
		return
	}
	if ev.Writer == events.WriterController && ev.Seq > r.lastCtlSeq {
		r.lastCtlSeq = ev.Seq
	}
	st, _, err := state.Fold(ctx, r.st, ev, restorestate.Loader(r.s.bus, r.exp))
	if err != nil && ctx.Err() != nil {
		return // stopping
	}
	if err != nil {
		r.log.Error().Err(err).Msg("cannot load the restored state; the experiment waits")
		return
	}
	if st.RestoredSeq != r.st.RestoredSeq || st.SubmittedSeq != r.st.SubmittedSeq {
		// A restored run, or a new run of the name: new work consumer,
		// maybe a new param space.
		r.workOK, r.space = false, nil
	}
	r.st = st
}

// drain folds every event already waiting, so one reconcile covers a burst.
func (r *reconciler) drain(ctx context.Context) {
	for {
		select {
		case ev := <-r.evs:
			r.apply(ctx, ev)
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
			err = settings.Prefix("param_space", err)
			r.publish(ctx, Action{ID: runID(r.st, r.st.Run, ".invalid"), Payload: &events.ExperimentCompleted{Reason: "invalid", Error: err.Error()}})
			return
		}
		set, err := r.st.Settings()
		var sampler tuning.Suggester
		var known []tpe.Trial
		if err == nil {
			sampler, err = set.Sampler(sp)
		}
		if t, ok := set.TPE(); ok && err == nil {
			known, err = t.Evaluated(sp, r.st.Spec.ParamSpace, r.st.Spec.TuneConfig.PointsToEvaluate)
		}
		if err != nil {
			r.publish(ctx, Action{ID: runID(r.st, r.st.Run, ".invalid"), Payload: &events.ExperimentCompleted{Reason: "invalid", Error: err.Error()}})
			return
		}
		r.space, r.searcher, r.known, r.external, r.driver = sp, sampler, known, nil, nil
		if ext, ok := set.Search.(*tuning.ExternalConfig); ok {
			r.external = newExternalSearcher(r.s.bus, *ext, r.st, sp, r.log)
		}
		if r.st.Spec.Driver != nil {
			r.driver = newDriverAsker(r.s.bus, r.exp, sp, r.log)
		}
	}
	if err := r.st.JudgeErr(); err != nil {
		r.publish(ctx, Action{ID: runID(r.st, r.st.Run, ".invalid"), Payload: &events.ExperimentCompleted{Reason: "invalid", Error: err.Error()}})
		return
	}
	if r.st.Status == state.ExperimentRunning && !r.ensureWork(ctx) {
		return
	}
	if !r.handleDeadWork(ctx) {
		return
	}
	if !r.s.live.read() {
		// Before the runner registry is read, every trial would look as if
		// some runner could hold it, and work no live runner holds would go
		// out: runners that cannot hold it never take it, and take none of
		// the experiment's work behind it. The first read comes within the
		// liveness watch's first tick.
		return
	}
	counts := r.st.Counts() // one pass over the trials, not one per status
	for _, s := range []string{events.StatusPending, events.StatusRunning, events.StatusPaused, events.StatusTerminated, events.StatusError} {
		metrics.Trials.WithLabelValues(r.exp, s).Set(float64(counts[s]))
	}
	in := Inputs{
		Now: time.Now(), Space: r.space, NewSeed: randomSeed(), NewPrefix: randomPrefix(),
		StoragePath: r.storagePath(), MaxPending: r.s.cfg.MaxPending, Searcher: r.searcher, Evaluated: r.known,
		Runners: r.s.live.totals(),
	}
	if r.external != nil {
		// The I/O Decide must not do: the searcher's config of the next
		// trial, asked for when Decide would create it.
		in.Suggestion = r.external.suggestion(ctx, r.st, wantsTrial(r.st, in))
	}
	if r.driver != nil {
		// The driver's answers go into the log before anything acts on
		// them; the next question is asked beside the loop.
		if a := r.driver.answer(r.st); a != nil {
			r.publish(ctx, Action{ID: actionID(r.st, ".driver.", a.Key), Payload: a})
			return
		}
		r.driver.ask(ctx, r.st, wantsTrial(r.st, in))
	}
	acts := Decide(r.st, in)
	r.warnUnfit(in.Runners)
	for _, a := range acts {
		if _, ok := a.Payload.(*events.ExperimentStarted); ok && !r.ensureWork(ctx) {
			return
		}
		if !r.publish(ctx, a) {
			return
		}
	}
	r.announceJudged()
}

// announceJudged tells the runners that wait for decisions
// (TuneConfig.WaitForDecisions) which of their trials' results are judged
// with nothing to stop or pause them: those of running trials the fold
// holds no pending decision about and no stop or pause for. A trial that
// is to stop or pause hears of it by trial.stop_requested instead, so it
// ends at the result that decided it.
func (r *reconciler) announceJudged() {
	if !r.st.Spec.TuneConfig.WaitForDecisions || !r.st.Judges() {
		return
	}
	pending := map[string]bool{}
	for _, d := range r.st.PendingDecisions() {
		pending[d.TrialID] = true
	}
	for _, a := range r.st.DriverAsks() { // the driver's stopper has not judged them
		pending[a.TrialID] = true
	}
	if r.judged == nil {
		r.judged = map[string]bus.Judged{}
	}
	for _, t := range r.st.TrialList() {
		j := bus.Judged{Attempt: t.Attempt, Iteration: t.AttemptIteration}
		if t.Status != events.StatusRunning || pending[t.ID] || t.StopDecision != "" || t.PauseDecision != "" ||
			j.Iteration == 0 || r.judged[t.ID] == j {
			continue
		}
		if err := r.s.bus.AnnounceJudged(r.exp, t.ID, j); err != nil {
			r.log.Debug().Err(err).Str("trial", t.ID).Msg("announce judged results; the runner goes on after its wait")
			continue
		}
		r.judged[t.ID] = j
	}
}

func (r *reconciler) storagePath() string {
	if r.s.cfg.StoragePath != "" {
		return r.s.cfg.StoragePath
	}
	return storage.DefaultPath()
}

// handleDeadWork ends ERROR the trials whose work ran out of deliveries
// while no runner was alive to say so, and removes that work from the log.
// It reports false if it published (the next decision waits for the fold).
func (r *reconciler) handleDeadWork(ctx context.Context) bool {
	for len(r.dead) > 0 {
		seq := r.dead[0]
		published, err := r.deadWork(ctx, seq)
		if err != nil {
			r.log.Error().Err(err).Uint64("seq", seq).Msg("handling exhausted trial work; will retry")
			return false
		}
		r.dead = r.dead[1:]
		if published {
			return false
		}
	}
	return true
}

func (r *reconciler) deadWork(ctx context.Context, seq uint64) (bool, error) {
	m, err := r.s.bus.RawEvent(ctx, seq)
	if errors.Is(err, bus.ErrNoEvent) {
		return false, nil // handled before
	}
	if err != nil {
		return false, err
	}
	// A notice naming anything but this experiment's trial work is not
	// JetStream's (the work consumer hands out nothing else): removing
	// what it names would take an event out of the log.
	if a, err := events.ParseSubject(m.Subject); err != nil || a.Experiment != r.exp || a.Type != events.TypeTrialScheduled {
		r.log.Warn().Uint64("work_seq", seq).Str("subject", m.Subject).Msg("max-deliveries notice about a message that is not trial work; ignoring it")
		return false, nil
	}
	ev, err := events.Decode(m.Subject, m.Header, m.Data)
	if err != nil {
		return false, r.s.bus.DeleteEvent(ctx, seq)
	}
	p := ev.Data.(*events.TrialScheduled)
	// Only the trial's current work speaks for it. A notice about the work
	// of an earlier run or scheduling (a process killed before a restore)
	// is stale: the attempt it would end is not that work's, so the notice
	// changes nothing, and the log keeps its history.
	t := r.st.Trials[p.TrialID]
	if t == nil || !t.Scheduled || t.WorkSeq != seq {
		r.log.Info().Str("trial", p.TrialID).Uint64("work_seq", seq).Msg("max-deliveries notice about stale trial work; ignoring it")
		return false, nil
	}
	published := false
	if !t.Finished() {
		r.log.Warn().Str("trial", t.ID).Int("attempt", t.Attempt).Msg("trial ran out of attempts with no runner alive; ending it ERROR")
		metrics.Failures.WithLabelValues(r.exp, events.CauseLost).Inc()
		published = r.publish(ctx, Action{ID: fmt.Sprint(r.exp, ".", t.ID, ".lost.", seq), Payload: &events.TrialFailed{
			TrialID: t.ID, Attempt: t.Attempt, Cause: events.CauseLost, Final: true, Counted: true,
			Error: fmt.Sprintf("trial ran out of attempts: its runner stopped heartbeating on attempt %d and no attempts are left (max_failures %d)",
				t.Attempt, r.st.Spec.RunConfig.FailureConfig.MaxFailures),
		}})
		if !published {
			return false, fmt.Errorf("publish the lost trial %s", t.ID)
		}
	}
	return published, r.s.bus.DeleteEvent(ctx, seq)
}

// ensureWork creates the experiment's work consumer before any trial is
// scheduled (and again after a controller restart; it is idempotent).
func (r *reconciler) ensureWork(ctx context.Context) bool {
	if r.workOK {
		return true
	}
	fc := r.st.Spec.RunConfig.FailureConfig
	wc := bus.WorkConfig{MaxFailures: fc.MaxFailures, AckWait: fc.HeartbeatTimeout().Seconds()}
	if r.st.RestoredSeq > 0 {
		wc.StartSeq = r.st.RestoredSeq + 1
	}
	err := r.s.bus.EnsureWorkConsumer(ctx, r.exp, wc)
	if err == nil { // the checkpoint bucket, with the deployment's replicas
		_, err = r.s.bus.Checkpoints(ctx, r.exp)
	}
	if err != nil {
		r.log.Error().Err(err).Msg("cannot create the work consumer; will retry")
		return false
	}
	r.workOK = true
	return true
}

// lead holds (acquiring or renewing) the experiment's lease; a standby
// keeps folding and tries again every so often.
func (r *reconciler) lead(ctx context.Context) bool {
	if r.lease.Held() && time.Since(r.nextTry) < 0 {
		return true
	}
	if !r.lease.Held() && time.Now().Before(r.nextTry) {
		return false
	}
	was := r.lease.Held()
	held := r.lease.Acquire(ctx)
	r.nextTry = time.Now().Add(bus.LeaseTTL / 3) // the next renewal, or the next try
	if held != was {
		r.log.Info().Bool("leader", held).Msg("leadership changed")
	}
	return held
}

// publish sends one decision, fenced: it is stored only if no other
// controller wrote this experiment's controller subjects since the last
// event this one folded. It remembers the sequence: the next decision
// waits until the fold has seen it.
func (r *reconciler) publish(ctx context.Context, a Action) bool {
	ev := r.s.bus.Event(r.exp, events.WriterController, a.Payload)
	ev.ID = a.ID
	fence := bus.Fence{Subject: events.WriterSubjects(r.exp, events.WriterController), Seq: r.lastCtlSeq}
	seq, err := r.s.bus.Publish(ctx, ev, fence)
	if bus.Fenced(err) {
		// Another controller decided first: catch up before deciding again.
		r.log.Info().Str("type", ev.Type()).Msg("another controller wrote first; catching up")
		last, lerr := r.s.bus.LastSeq(ctx, events.WriterSubjects(r.exp, events.WriterController))
		switch {
		case lerr != nil:
		case last > r.waitSeq:
			r.waitSeq = last
		case last < r.lastCtlSeq:
			// Nobody wrote: the last controller event was removed from the
			// log (dead work). The fence starts from what is there now.
			r.lastCtlSeq = last
		}
		return false
	}
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			r.log.Error().Err(err).Str("type", ev.Type()).Msg("publish decision failed; will retry")
		}
		return false
	}
	r.lastCtlSeq = max(r.lastCtlSeq, seq)
	if seq > r.waitSeq {
		r.waitSeq = seq
	}
	return true
}

// shutdownGrace bounds how long a stopping controller tries to record an
// interruption: the lease and one publish, milliseconds when NATS answers;
// 2 s proved too short on a loaded machine (a race-detector test run
// beside others), where the run was then left RUNNING in the log.
const shutdownGrace = 5 * time.Second

// shutdown marks a running experiment interrupted when the controller is
// configured to (the embedded stack); ctx has ended by then, so the event
// gets its own shutdownGrace. It renews the lease first, or takes it back
// if it lapsed and nobody took it over: a loaded machine may have delayed
// the last renewals.
func (r *reconciler) shutdown(ctx context.Context) {
	if !r.s.cfg.InterruptOnShutdown || r.st.Status != state.ExperimentRunning {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if !r.lease.Acquire(ctx) {
		r.log.Warn().Msg("could not hold the lease (another controller leads the experiment, or NATS did not answer in time); not recording the interruption")
		return
	}
	if !r.publish(ctx, Action{ID: actionID(r.st, ".interrupted"), Payload: &events.ExperimentInterrupted{Reason: "shutdown"}}) {
		r.log.Warn().Msg("could not record the interruption")
	}
}
