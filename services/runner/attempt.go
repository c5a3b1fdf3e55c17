package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/metrics"
	"github.com/tunejet/tunejet/internal/session"
)

// attempt is one run of one trial on this runner. It is the trial's
// session: trainables report through it.
type attempt struct {
	s     *Service
	exp   string
	msg   jetstream.Msg
	work  *events.TrialScheduled
	num   int // attempt number
	tries int // deliveries of this work message
	dir   string
	log   zerolog.Logger

	ctx    context.Context // cancelled with session.ErrStopped on stop
	cancel context.CancelCauseFunc

	// restored is the local copy of the checkpoint this attempt resumes
	// from, restoredName its name.
	restored, restoredName string

	superseded atomic.Bool // a newer attempt owns the trial

	reports reporter // the attempt's results on their way to the log

	mu             sync.Mutex
	stopReason     string
	warnedKeys     map[string]bool
	iteration      int
	sinceRestore   int
	timeBefore     time.Duration // time_total_s of the checkpoint resumed from
	nextCheckpoint int
	start, last    time.Time
	art            artifactLog
}

// runAttempt runs one delivery of trial work to its end and settles the
// message: ack, nak with backoff, or term.
func (s *Service) runAttempt(ctx context.Context, exp string, msg jetstream.Msg) {
	ev, err := bus.FromJS(msg)
	work, ok := eventData[*events.TrialScheduled](ev, err)
	if !ok {
		s.log.Error().Err(err).Str("subject", msg.Subject()).Msg("malformed trial work; terminating it")
		_ = msg.TermWithReason("malformed trial work")
		return
	}
	md, err := msg.Metadata()
	if err != nil {
		s.log.Error().Err(err).Msg("trial work without metadata")
		return
	}
	a := &attempt{
		s: s, exp: exp, msg: msg, work: work, tries: int(md.NumDelivered),
		num: work.AttemptBase + int(md.NumDelivered), dir: filepath.Join(s.cfg.WorkDir, exp, work.DirName),
		warnedKeys: map[string]bool{},
	}
	a.reports.a = a
	a.log = s.log.With().Str("experiment", exp).Str("trial", work.TrialID).Int("attempt", a.num).Logger()
	if md.NumDelivered > 1 {
		metrics.Redeliveries.WithLabelValues(exp).Inc()
	}
	a.ctx, a.cancel = context.WithCancelCause(ctx)
	defer a.cancel(nil)
	defer s.track(a)()
	a.run(ctx)
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

func (a *attempt) run(ctx context.Context) {
	sub, err := a.watchStop()
	if err != nil {
		a.log.Error().Err(err).Msg("cannot watch for stop requests; handing the trial back")
		_ = a.msg.Nak()
		return
	}
	defer sub.Unsubscribe()
	switch ended, stopReason := a.endedByController(ctx); {
	case stopReason != "":
		// A stop was requested; the runner that ran the trial may have died
		// before ending it, so this attempt records the outcome itself.
		a.stop(stopReason)
		a.finishStopped(ctx)
		return
	case ended:
		a.log.Debug().Msg("trial already ended by the controller; skipping")
		_ = a.msg.Ack()
		return
	}
	ref, err := a.begin(ctx)
	if err != nil {
		a.log.WithLevel(handBackLevel(ctx)).Err(err).Msg("cannot start the trial; handing it back")
		_ = a.msg.Nak()
		return
	}
	a.start, a.last = time.Now(), time.Now()
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		a.finish(ctx, fmt.Errorf("create trial dir: %w", err))
		return
	}
	defer a.cleanupRestore()
	if err := a.restore(ctx, ref); err != nil {
		a.finish(ctx, err)
		return
	}
	hbDone := a.heartbeat()
	err = a.execute()
	if !a.superseded.Load() {
		if aerr := a.syncArtifacts(context.WithoutCancel(ctx), true); aerr != nil {
			a.log.Warn().Err(aerr).Msg("final artifact sync")
		}
	}
	hbDone()
	if ferr := a.reports.flush(); err == nil {
		err = ferr
	}
	a.finish(ctx, err)
}

// startTries bounds how often trial.started is refused because an attempt
// presumed lost added a checkpoint meanwhile; the last try is not fenced.
const startTries = 5

// begin publishes trial.started, which fences every earlier attempt off
// the trial, and returns the checkpoint this attempt resumes from: the
// latest the log accepted before the start. An earlier attempt that is
// cut off but not dead may add checkpoints until the start is in the log,
// so the start is published only if the trial's last checkpoint is still
// the one read, else it reads again.
func (a *attempt) begin(ctx context.Context) (*events.CheckpointRef, error) {
	for try := 1; ; try++ {
		ref, fence, err := a.latestCheckpoint(ctx)
		if err != nil {
			return nil, err
		}
		started := &events.TrialStarted{
			TrialID: a.work.TrialID, Attempt: a.num, Runner: a.s.cfg.Name, Hostname: a.s.hostname, PID: os.Getpid(),
		}
		if ref != nil {
			started.RestoredFrom = ref.Name
		}
		var opts []jetstream.PublishOpt
		if try < startTries && (a.num > 1 || a.work.AttemptBase > 0) {
			subject := events.Subject(a.exp, events.WriterRunner, events.TypeTrialCheckpointed, a.work.TrialID)
			opts = append(opts, jetstream.WithExpectLastSequenceForSubject(fence, subject))
		}
		_, err = a.s.bus.Publish(ctx, a.s.bus.Event(a.exp, events.WriterRunner, started), opts...)
		if bus.Fenced(err) {
			a.log.Info().Int("try", try).Msg("an earlier attempt added a checkpoint while this one started; reading again")
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("publish trial.started: %w", err)
		}
		return ref, nil
	}
}

// watchStop subscribes to the controller's stop requests for this trial.
func (a *attempt) watchStop() (*nats.Subscription, error) {
	subj := events.Subject(a.exp, events.WriterController, events.TypeTrialStopRequested, a.work.TrialID)
	return a.s.bus.NC.Subscribe(subj, func(m *nats.Msg) {
		ev, err := events.Decode(m.Subject, m.Header, m.Data)
		if p, ok := eventData[*events.TrialStopRequested](ev, err); ok {
			a.stop(p.Reason)
		}
	})
}

// endedByController reports whether the controller has already ended the
// trial (the work is stale), or the reason of a stop it requested.
func (a *attempt) endedByController(ctx context.Context) (ended bool, stopReason string) {
	st, err := a.s.bus.Stream(ctx)
	if err != nil {
		return false, ""
	}
	m, err := st.GetLastMsgForSubject(ctx, events.TrialSubjects(a.exp, events.WriterController, a.work.TrialID))
	if err != nil {
		return false, ""
	}
	ev, err := events.Decode(m.Subject, m.Header, m.Data)
	if err != nil {
		return false, ""
	}
	switch p := ev.Data.(type) {
	case *events.TrialStopRequested:
		return true, p.Reason
	case *events.TrialCompleted, *events.TrialFailed:
		return true, ""
	}
	return false, ""
}

// finishStopped ends a trial that was asked to stop before this attempt
// ran: started, then completed TERMINATED, so the fold sees it end.
func (a *attempt) finishStopped(ctx context.Context) {
	started := &events.TrialStarted{TrialID: a.work.TrialID, Attempt: a.num, Runner: a.s.cfg.Name, Hostname: a.s.hostname, PID: os.Getpid()}
	if _, err := a.s.bus.Publish(ctx, a.s.bus.Event(a.exp, events.WriterRunner, started)); err != nil {
		a.log.WithLevel(handBackLevel(ctx)).Err(err).Msg("publish trial.started; handing the trial back")
		_ = a.msg.Nak()
		return
	}
	a.finish(ctx, nil)
}

// execute runs the trainable with the right executor.
func (a *attempt) execute() error {
	if len(a.work.Trainable.Command) > 0 {
		return runCommand(a)
	}
	fn, ok := a.s.cfg.Trainables[a.work.Trainable.Name]
	if !ok {
		return fmt.Errorf("invalid trainable: %q is not registered on runner %s", a.work.Trainable.Name, a.s.cfg.Name)
	}
	return runFunc(a, fn)
}

// heartbeat keeps the work message alive; the returned func stops it.
func (a *attempt) heartbeat() func() {
	every := time.Duration(a.work.HeartbeatTimeoutS * float64(time.Second) / 3)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if a.overtaken() {
					a.superseded.Store(true)
					a.cancel(ErrSuperseded)
					return
				}
				if err := a.msg.InProgress(); err != nil {
					a.log.Warn().Err(err).Msg("heartbeat")
				}
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// handBackLevel is the level of a trial handed back before it started:
// an error, unless the runner is shutting down and that is why.
func handBackLevel(ctx context.Context) zerolog.Level {
	if ctx.Err() != nil {
		return zerolog.InfoLevel
	}
	return zerolog.ErrorLevel
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
	st, err := a.s.bus.Stream(ctx)
	if err != nil {
		return false
	}
	m, err := st.GetLastMsgForSubject(ctx, events.Subject(a.exp, events.WriterRunner, events.TypeTrialStarted, a.work.TrialID))
	if err != nil {
		return false
	}
	ev, err := events.Decode(m.Subject, m.Header, m.Data)
	p, ok := eventData[*events.TrialStarted](ev, err)
	return ok && p.Attempt > a.num
}

// stop ends the trial as TERMINATED for reason (first reason wins).
func (a *attempt) stop(reason string) {
	a.mu.Lock()
	if a.stopReason == "" {
		a.stopReason = reason
	}
	a.mu.Unlock()
	a.cancel(session.ErrStopped)
}

func (a *attempt) stopped() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stopReason
}

// finish publishes the attempt's outcome and settles the work message.
func (a *attempt) finish(ctx context.Context, runErr error) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if a.superseded.Load() {
		a.log.Warn().Msg("a newer attempt owns this trial; abandoned this one without a word")
		return
	}
	if ctx.Err() != nil && a.stopped() == "" {
		a.handBack(pctx)
		return
	}
	if reason := a.stopped(); reason != "" || runErr == nil {
		if reason == "" {
			reason = "finished"
		}
		a.publishOutcome(pctx, &events.TrialCompleted{TrialID: a.work.TrialID, Attempt: a.num, Status: events.StatusTerminated, Reason: reason})
		if err := a.msg.DoubleAck(pctx); err != nil {
			a.log.Warn().Err(err).Msg("ack trial work")
		}
		return
	}
	// A checkpoint gone everywhere cannot be resumed from by any retry.
	final := a.work.MaxFailures >= 0 && a.tries >= a.work.MaxFailures+1 || errors.Is(runErr, ckpt.ErrGone)
	a.log.Info().Err(runErr).Bool("final", final).Msg("trial attempt failed")
	metrics.Failures.WithLabelValues(a.exp, events.CauseError).Inc()
	a.publishOutcome(pctx, &events.TrialFailed{
		TrialID: a.work.TrialID, Attempt: a.num, Cause: events.CauseError, ErrorType: errorType(runErr),
		Error: runErr.Error(), Final: final, Counted: true,
	})
	if final {
		_ = a.msg.TermWithReason("max_failures")
		return
	}
	// The attempt number, not the deliveries of this work message, so that
	// a trial's retries back off across reschedulings too.
	_ = a.msg.NakWithDelay(backoff(a.num))
}

// handBack returns the trial of a runner that is shutting down (SIGTERM,
// preemption): the attempt is recorded as preempted — not counted against
// max_failures unless the runner is configured to — and the work is acked,
// so the controller schedules it again with a fresh delivery budget rather
// than waiting for the heartbeat timeout.
func (a *attempt) handBack(ctx context.Context) {
	a.log.Info().Bool("counted", a.s.cfg.CountPreemption).Msg("runner stopping; handing the trial back")
	metrics.Failures.WithLabelValues(a.exp, events.CausePreempted).Inc()
	a.publishOutcome(ctx, &events.TrialFailed{
		TrialID: a.work.TrialID, Attempt: a.num, Cause: events.CausePreempted,
		Error: "runner " + a.s.cfg.Name + " was stopped (preempted)", Counted: a.s.cfg.CountPreemption,
	})
	if err := a.msg.DoubleAck(ctx); err != nil {
		a.log.Warn().Err(err).Msg("ack handed-back work; it will be redelivered after the heartbeat timeout")
	}
}

func (a *attempt) publishOutcome(ctx context.Context, p events.Payload) {
	if _, err := a.s.bus.Publish(ctx, a.s.bus.Event(a.exp, events.WriterRunner, p)); err != nil {
		a.log.Error().Err(err).Str("type", p.Type()).Msg("publish trial outcome")
	}
}

// backoff is the delay before retrying after the n-th failed delivery.
func backoff(n int) time.Duration {
	d := 100 * time.Millisecond * time.Duration(math.Pow(2, float64(n-1)))
	return min(d, 5*time.Second)
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
