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
	results        resultBuilder
	nextCheckpoint int
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
		warnedKeys: map[string]bool{}, results: resultBuilder{TrialID: work.TrialID, Hostname: s.hostname, PID: pid},
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
	started, ended, err := a.live(ctx)
	if ended {
		a.log.Debug().Msg("trial already ended by the controller; skipping")
	}
	o := decide(situation{
		Trial: a.work.TrialID, Runner: a.s.cfg.Name, Attempt: a.num, Tries: a.tries, MaxFailures: a.work.MaxFailures,
		Started: started, Ended: ended, Superseded: a.superseded.Load(), ShuttingDown: ctx.Err() != nil,
		StopReason: a.stopped(), Err: err, CountPreemption: a.s.cfg.CountPreemption,
	})
	a.logOutcome(o, err)
	a.settle(ctx, o)
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
	defer a.heartbeat()()
	sub, err := a.watchStop()
	if err != nil {
		return false, false, fmt.Errorf("watch for stop requests: %w", err)
	}
	defer sub.Unsubscribe()
	switch ended, stopReason := a.endedByController(ctx); {
	case stopReason != "":
		// A stop was requested; the runner that ran the trial may have died
		// before ending it, so this attempt records the outcome itself.
		a.stop(stopReason)
		return false, false, nil
	case ended:
		return false, true, nil
	}
	ref, err := a.begin(ctx)
	if err != nil {
		return false, false, fmt.Errorf("start the trial: %w", err)
	}
	a.results.Start = time.Now()
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		return true, false, fmt.Errorf("create trial dir: %w", err)
	}
	defer a.cleanupRestore()
	if err := a.restore(ctx, ref); err != nil {
		return true, false, err
	}
	err = a.execute()
	if !a.superseded.Load() {
		if aerr := a.syncArtifacts(context.WithoutCancel(ctx), true); aerr != nil {
			a.log.Warn().Err(aerr).Msg("final artifact sync")
		}
	}
	if ferr := a.reports.flush(); err == nil {
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
// attempt wrote about the trial meanwhile; the last try is not fenced.
const startTries = 5

// errSuperseded ends an attempt that finds a newer one already started.
var errSuperseded = errors.New("a newer attempt of the trial has started")

// begin publishes trial.started, which fences every earlier attempt off
// the trial, and returns the checkpoint this attempt resumes from: the
// newest the log keeps whose staged copy is usable (resumePoint). An earlier attempt that is cut
// off but not dead may still write (checkpoints, reports, a late start)
// until this start is in the log, so the start is published only if no
// runner event of the trial came after the ones read; else it reads again.
func (a *attempt) begin(ctx context.Context) (*events.CheckpointRef, error) {
	subject := events.TrialSubjects(a.exp, events.WriterRunner, a.work.TrialID)
	for try := 1; ; try++ {
		fence, err := a.s.bus.LastSeq(ctx, subject) // read first: what follows covers it
		if err != nil {
			return nil, err
		}
		refs, current, err := a.checkpoints(ctx)
		if err != nil {
			return nil, err
		}
		if current >= a.num {
			a.superseded.Store(true)
			return nil, fmt.Errorf("attempt %d: %w (attempt %d)", a.num, errSuperseded, current)
		}
		ref, err := a.resumePoint(ctx, refs)
		if err != nil {
			return nil, err
		}
		started := &events.TrialStarted{
			TrialID: a.work.TrialID, Attempt: a.num, Runner: a.s.cfg.Name, Hostname: a.s.hostname, PID: pid,
		}
		if ref != nil {
			started.RestoredFrom = ref.Name
		}
		var opts []jetstream.PublishOpt
		if try < startTries {
			opts = append(opts, jetstream.WithExpectLastSequenceForSubject(fence, subject))
		}
		_, err = a.s.bus.Publish(ctx, a.s.bus.Event(a.exp, events.WriterRunner, started), opts...)
		if bus.Fenced(err) {
			a.log.Info().Int("try", try).Msg("another attempt wrote about the trial while this one started; reading again")
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

// execute runs the trainable with its executor.
func (a *attempt) execute() error {
	ex, err := a.s.executor(a.work.Trainable, a.log)
	if err != nil {
		return err
	}
	return ex.Execute(a.ctx, a, a.work.Config)
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
				// The heartbeat first: the check below may wait up to 2 s
				// for the log, and a heartbeat sent after it could come
				// past the ack timeout, so the work went to another runner
				// while this one still ran it.
				if err := a.msg.InProgress(); err != nil {
					a.log.Warn().Err(err).Msg("heartbeat")
				}
				if a.overtaken() {
					a.superseded.Store(true)
					a.cancel(ErrSuperseded)
					return
				}
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
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
