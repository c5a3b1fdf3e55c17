package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/metrics"
	"github.com/tunejet/tunejet/internal/session"
)

// attemptRef is one attempt of one trial: what the attempt's parts name
// in their events and logs, and the runner they publish through.
type attemptRef struct {
	s     *Service
	exp   string
	trial string
	num   int // attempt number
	log   zerolog.Logger
}

// publish stores an event about the attempt's trial.
func (r attemptRef) publish(ctx context.Context, p events.Payload, fence ...bus.Fence) error {
	_, err := r.s.bus.Publish(ctx, r.s.bus.Event(r.exp, events.WriterRunner, p), fence...)
	return err
}

// attempt is one run of one trial on this runner, from the delivery of
// its work to the settling of it. The trainable runs in an Executor and
// reports through the attempt's session.
type attempt struct {
	attemptRef
	msg   *bus.Delivery
	work  *events.TrialScheduled
	tries int // deliveries of this work message
	dir   string

	ctx        context.Context // the trainable's: cancelled with session.ErrStopped on a stop, ErrSuperseded when overtaken
	cancel     context.CancelCauseFunc
	stopper    *stopper
	superseded atomic.Bool // a newer attempt owns the trial
	// judged is how far the attempt's results are judged, when each report
	// waits for its judgement (TrialScheduled.WaitForDecisions); else nil.
	judged *judgedMark

	route *route // how the experiment's checkpoints reach storage
	// local is the checkpoint resumePoint already copied from storage.
	local *localCopy
	// stageRestore: the checkpoint resumed from is in storage, which this
	// runner cannot read; the syncer stages it (trial.started says so).
	stageRestore bool
	// startSeq is the log sequence of this attempt's trial.started, once
	// begin stored it: the attempt's end is fenced on it (endFence).
	startSeq uint64
	// fence is the trial's last runner event as checkWork read it, which
	// begin's first try fences its start on.
	fence struct {
		seq  uint64
		err  error
		read bool
	}
}

// runAttempt runs one delivery of trial work to its end and returns how
// to settle it (bus.Settle): nil acks, a bus.Retry naks with backoff, a
// bus.Terminate ends it, bus.ErrLeave leaves it to the heartbeat timeout.
func (s *Service) runAttempt(ctx context.Context, exp string, msg *bus.Delivery) error {
	work, ok := eventData[*events.TrialScheduled](msg.Event, msg.Malformed)
	if !ok {
		s.log.Error().Err(msg.Malformed).Str("subject", msg.Subject).Msg("malformed trial work; terminating it")
		return bus.Terminate(errors.New("malformed trial work"))
	}
	num := work.AttemptBase + msg.Num
	a := &attempt{
		attemptRef: attemptRef{
			s: s, exp: exp, trial: work.TrialID, num: num,
			log: s.log.With().Str("experiment", exp).Str("trial", work.TrialID).Int("attempt", num).Logger(),
		},
		msg: msg, work: work, tries: msg.Num, dir: filepath.Join(s.cfg.WorkDir, exp, work.DirName),
	}
	if msg.Num > 1 {
		metrics.Redeliveries.WithLabelValues(exp).Inc()
	}
	a.ctx, a.cancel = context.WithCancelCause(ctx)
	defer a.cancel(nil)
	a.stopper = &stopper{cancel: a.cancel}
	defer s.track(a)()
	return a.run(ctx)
}

// eventData returns the typed payload of a decoded event.
func eventData[T events.Payload](ev *events.Event, err error) (T, bool) {
	var zero T
	if err != nil || ev == nil {
		return zero, false
	}
	p, ok := ev.Data.(T)
	return p, ok
}

func (a *attempt) run(ctx context.Context) error {
	started, ended, err := a.live(ctx)
	if ended {
		a.log.Debug().Msg("trial already ended by the controller; skipping")
	}
	o := decide(situation{
		Trial: a.work.TrialID, Runner: a.s.cfg.Name, Attempt: a.num, Tries: a.tries, MaxFailures: a.work.MaxFailures,
		Started: started, Ended: ended, Superseded: a.superseded.Load(), ShuttingDown: ctx.Err() != nil,
		StopReason: a.stopper.Reason(), Paused: a.stopper.Paused(), Err: err, CountPreemption: a.s.cfg.CountPreemption,
	})
	a.logOutcome(o, err)
	return a.settle(ctx, o)
}

// live runs the attempt: it reports whether trial.started is stored,
// whether the controller had already ended the trial (the work is stale),
// and the error the attempt ended with.
func (a *attempt) live(ctx context.Context) (started, ended bool, err error) {
	// Heartbeats from the delivery on: reading the trial's history (a
	// restored state may be large), fetching a large checkpoint, or one a
	// lagging replica has not applied yet, may each take longer than the
	// ack timeout under load, and the work must not run out of deliveries
	// meanwhile.
	defer heartbeat(a.msg, a.work.HeartbeatTimeoutS, a.log, a.overtaken, func() {
		a.superseded.Store(true)
		a.cancel(ErrSuperseded)
	})()
	stopWatch, err := a.watchStop()
	if err != nil {
		return false, false, fmt.Errorf("watch for stop requests: %w", err)
	}
	defer stopWatch()
	if a.work.WaitForDecisions {
		a.judged = newJudgedMark()
		stopJudged, err := a.s.bus.OnJudged(a.exp, a.work.TrialID, func(j bus.Judged) {
			if j.Attempt == a.num {
				a.judged.set(j.Iteration)
			}
		})
		if err != nil {
			return false, false, err
		}
		defer stopJudged()
	}
	stale, ended, request := a.checkWork(ctx)
	if stale {
		return false, true, nil
	}
	switch {
	case request != nil:
		// A stop or pause was requested; the runner that ran the trial may
		// have died before ending it, so this attempt records the outcome
		// itself.
		a.request(request)
		return false, false, nil
	case ended:
		return false, true, nil
	}
	ref, donor, err := a.begin(ctx)
	if err != nil {
		return false, false, fmt.Errorf("start the trial: %w", err)
	}
	sess := a.newSession(time.Now())
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		return true, false, fmt.Errorf("create trial dir: %w", err)
	}
	restored, err := a.restore(ctx, ref)
	if err != nil {
		return true, false, err
	}
	if restored != "" {
		defer func() { _ = os.RemoveAll(filepath.Dir(restored)) }()
		sess.resumeFrom(ref, restored)
		if w := a.work.Checkpoint; donor != "" && w != nil {
			// From a donor's checkpoint, the trial's own numbering goes on.
			sess.stager.next = max(sess.stager.next, w.Index+1)
		}
	}
	err = a.execute(sess)
	if !a.superseded.Load() {
		if aerr := sess.artifacts.sync(context.WithoutCancel(ctx), true); aerr != nil {
			a.log.Warn().Err(aerr).Msg("final artifact sync")
		}
	}
	if ferr := sess.reports.flush(); err == nil {
		err = ferr
	}
	return true, false, err
}

// logOutcome logs how the attempt ended, at the level it deserves.
func (a *attempt) logOutcome(o outcome, err error) {
	switch {
	case a.superseded.Load():
		a.log.Warn().Msg("a newer attempt owns this trial; abandoned this one without a word")
	case o.Settle == ack && len(o.Publish) > 0:
		if f, ok := o.Publish[len(o.Publish)-1].(*events.TrialFailed); ok && f.Cause == events.CausePreempted {
			a.log.Info().Bool("counted", f.Counted).Msg("runner stopping; handing the trial back")
		}
	case o.Settle == nak && len(o.Publish) == 0:
		a.log.Error().Err(err).Msg("cannot start the trial; handing it back")
	case o.Settle == nak || o.Settle == term:
		a.log.Info().Err(err).Bool("final", o.Settle == term).Msg("trial attempt failed")
	}
}

// startTries bounds how often trial.started is refused because another
// attempt wrote about the trial meanwhile; the last try is not fenced, so
// an earlier attempt that goes on writing cannot keep this one from
// starting. That start may name an older resume point than the newest
// checkpoint in the log: the fold then drops the newer checkpoints and
// takes each repeated iteration once (internal/state's
// TestStartFromAnOlderCheckpointDropsTheNewerOnes and
// TestARetryDoesNotRepeatIterations), so nothing is lost or counted twice.
const startTries = 5

// errSuperseded ends an attempt that finds a newer one already started.
var errSuperseded = errors.New("a newer attempt of the trial has started")

// begin publishes trial.started, which fences every earlier attempt off
// the trial, and returns the checkpoint this attempt resumes from: the
// newest the log keeps whose staged copy is usable (resumePoint), or a PBT
// donor's, with the donor's id. An earlier attempt that is cut
// off but not dead may still write (checkpoints, reports, a late start)
// until this start is in the log, so the start is published only if no
// runner event of the trial came after the ones read; else it reads again.
// What the log keeps is read from the work when the work says the
// controller had read every runner event there is (known), else from the
// trial's history (checkpoints).
func (a *attempt) begin(ctx context.Context) (_ *events.CheckpointRef, donor string, _ error) {
	subject := a.runnerSubjects()
	if err := a.prepareStorage(ctx); err != nil {
		return nil, "", err
	}
	for try := 1; ; try++ {
		// Read first: what follows covers it. The first try's was read
		// with the work's checks.
		fence, err := a.fence.seq, a.fence.err
		if try > 1 || !a.fence.read {
			fence, err = a.s.bus.LastSeq(ctx, subject)
		}
		if err != nil {
			return nil, "", err
		}
		refs, donor, current, known := a.known(fence)
		if !known {
			if refs, donor, current, err = a.checkpoints(ctx); err != nil {
				return nil, "", err
			}
		}
		if current >= a.num {
			a.superseded.Store(true)
			return nil, "", fmt.Errorf("attempt %d: %w (attempt %d)", a.num, errSuperseded, current)
		}
		ref, usable, err := a.resumePoint(ctx, refs)
		if known && (errors.Is(err, ckpt.ErrGone) || err == nil && !usable) {
			// The work's checkpoint cannot be resumed from: the history
			// names the ones kept before it.
			a.log.Info().Msg("the work's checkpoint cannot be resumed from; reading the trial's history for the ones before it")
			if refs, donor, _, err = a.checkpoints(ctx); err != nil {
				return nil, "", err
			}
			ref, _, err = a.resumePoint(ctx, refs)
		}
		if err != nil {
			return nil, "", err
		}
		started := &events.TrialStarted{
			TrialID: a.work.TrialID, Attempt: a.num, Runner: a.s.cfg.Name, Hostname: a.s.hostname, PID: pid,
			WorkSeq: a.msg.Event.Seq,
		}
		if ref != nil {
			started.StageRestore = a.stageRestore
			started.RestoredFrom = ref.Name
			if donor != "" {
				started.RestoredFrom = donor + "/" + ref.Name
			}
		}
		var fences []bus.Fence
		if try < startTries {
			fences = append(fences, bus.Fence{Subject: subject, Seq: fence})
		}
		seq, err := a.s.bus.Publish(ctx, a.s.bus.Event(a.exp, events.WriterRunner, started), fences...)
		if bus.Fenced(err) {
			a.log.Info().Int("try", try).Msg("another attempt wrote about the trial while this one started; reading again")
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("publish trial.started: %w", err)
		}
		a.startSeq = seq
		return ref, donor, nil
	}
}

// watchStop subscribes to the controller's stop requests for this trial.
func (a *attempt) watchStop() (stop func(), err error) {
	subj := events.Subject(a.exp, events.WriterController, events.TypeTrialStopRequested, a.work.TrialID)
	return a.s.bus.Subscribe(subj, func(ev *events.Event) {
		if p, ok := eventData[*events.TrialStopRequested](ev, nil); ok {
			a.request(p)
		}
	})
}

// request carries out a stop or pause request.
func (a *attempt) request(p *events.TrialStopRequested) {
	if p.Pause {
		a.stopper.Pause(p.Reason)
		return
	}
	a.stopper.Stop(p.Reason)
}

// endedByController reports whether the controller has already ended the
// trial (the work is stale), or the stop or pause it requested last.
func (a *attempt) endedByController(ctx context.Context) (ended bool, request *events.TrialStopRequested) {
	ev, _, err := a.s.bus.LastEvent(ctx, events.TrialSubjects(a.exp, events.WriterController, a.work.TrialID))
	if err != nil || ev == nil {
		return false, nil
	}
	switch p := ev.Data.(type) {
	case *events.TrialStopRequested:
		return true, p
	case *events.TrialCompleted, *events.TrialFailed:
		return true, nil
	}
	return false, nil
}

// checkWork reads, at once, whether the work is stale (from before the
// experiment's newest restore, or handed back already) and whether the
// controller has ended the trial or asked it to stop or pause: three
// reads of the log that each start of an attempt waits for. With them it
// reads the fence of the attempt's start (begin), the last runner event
// of the trial, so that the start waits for one read fewer.
func (a *attempt) checkWork(ctx context.Context) (stale, ended bool, request *events.TrialStopRequested) {
	var before, returned bool
	var wg sync.WaitGroup
	wg.Go(func() { before = a.beforeRestore(ctx) })
	wg.Go(func() { returned = a.returnedBefore(ctx) })
	wg.Go(func() { a.fence.seq, a.fence.err = a.s.bus.LastSeq(ctx, a.runnerSubjects()) })
	ended, request = a.endedByController(ctx)
	wg.Wait()
	a.fence.read = true
	return before || returned, ended, request
}

// runnerSubjects is the filter of every runner event of the attempt's trial.
func (a *attempt) runnerSubjects() string {
	return events.TrialSubjects(a.exp, events.WriterRunner, a.work.TrialID)
}

// beforeRestore reports whether the work was scheduled before the
// experiment's newest restore: it is of a run that is over (pulled from
// that run's consumer before the restored run replaced it), and the
// restored state decides what runs again. Should the restore be stored
// only after this check, the fold still ignores the start: trial.started
// names its work, and only the trial's current work counts.
func (a *attempt) beforeRestore(ctx context.Context) bool {
	restored, err := a.s.bus.LastSeq(ctx, events.TypeSubjects(a.exp, events.WriterRestorer, events.TypeExperimentRestored))
	if err != nil || restored < a.msg.Event.Seq {
		return false
	}
	a.log.Info().Uint64("work_seq", a.msg.Event.Seq).Uint64("restored_seq", restored).Msg("trial work from before the experiment's restore; dropping it")
	return true
}

// returnedBefore reports whether a runner handed this work back (or work
// of the trial scheduled after it): its runner died between storing the
// hand-back and ending the message, which was handed out again. The trial
// has been, or will be, scheduled anew; this work is stale.
func (a *attempt) returnedBefore(ctx context.Context) bool {
	ev, _, err := a.s.bus.LastEvent(ctx, events.Subject(a.exp, events.WriterRunner, events.TypeTrialReturned, a.work.TrialID))
	p, ok := eventData[*events.TrialReturned](ev, err)
	if !ok || p.WorkSeq < a.msg.Event.Seq {
		return false
	}
	a.log.Info().Uint64("work_seq", a.msg.Event.Seq).Str("runner", p.Runner).Msg("trial work handed back already; dropping it")
	return true
}

// execute runs the trainable with its executor, reporting through sess.
func (a *attempt) execute(sess *trialSession) error {
	ex, err := a.s.executor(a.ctx, a.work.Trainable, a.log)
	if err != nil {
		return err
	}
	return ex.Execute(a.ctx, sess, a.work.Config)
}

// ErrSuperseded is the cause of an attempt's context when a newer attempt
// of the trial has started elsewhere (this runner was presumed dead).
var ErrSuperseded = errors.New("a newer attempt of the trial has started elsewhere")

// overtaken reports whether a newer attempt of the trial has started: this
// runner was frozen or cut off past the heartbeat timeout and the work went
// to another runner.
func (a *attempt) overtaken() bool {
	ctx, cancel := context.WithTimeout(a.ctx, 2*time.Second)
	defer cancel()
	_, attempt, err := a.lastStart(ctx)
	return err == nil && attempt > a.num
}

// lastStart reads the trial's last trial.started: its log sequence and
// attempt (0, 0 when the trial has none).
func (a *attempt) lastStart(ctx context.Context) (seq uint64, attempt int, err error) {
	ev, seq, err := a.s.bus.LastEvent(ctx, events.Subject(a.exp, events.WriterRunner, events.TypeTrialStarted, a.work.TrialID))
	if err != nil {
		return 0, 0, err
	}
	p, ok := eventData[*events.TrialStarted](ev, nil)
	if !ok {
		return seq, 0, nil // none, or not a start the fold takes
	}
	return seq, p.Attempt, nil
}

// stopper ends an attempt as TERMINATED (the controller asked, or a stop
// criterion was met) or PAUSED (a scheduler paused the trial). The first
// stop's reason wins, and a stop overrides a pause; the attempt's context
// is cancelled with session.ErrStopped.
type stopper struct {
	cancel context.CancelCauseFunc

	mu     sync.Mutex
	reason string
	paused bool
}

// Stop stops the attempt for reason.
func (s *stopper) Stop(reason string) {
	s.mu.Lock()
	if s.reason == "" || s.paused {
		s.reason, s.paused = reason, false
	}
	s.mu.Unlock()
	s.cancel(session.ErrStopped)
}

// Pause ends the attempt with the trial paused, for reason, unless it was
// stopped already.
func (s *stopper) Pause(reason string) {
	s.mu.Lock()
	if s.reason == "" {
		s.reason, s.paused = reason, true
	}
	s.mu.Unlock()
	s.cancel(session.ErrStopped)
}

// Paused reports whether the attempt ends with the trial paused.
func (s *stopper) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// Reason is why the attempt was stopped, or "".
func (s *stopper) Reason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// errorType classifies an error for trial.failed.
func errorType(err error) string {
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return "ExitError"
	case errors.Is(err, ckpt.ErrGone):
		return "CheckpointGone"
	}
	return "Error"
}
