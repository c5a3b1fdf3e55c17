package runner

import (
	"context"
	"errors"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/metrics"
)

// settlement is what is done with a work message once its outcome is
// stored.
type settlement int

const (
	// leave settles nothing: the message is redelivered after the
	// heartbeat timeout, as if this runner had died.
	leave settlement = iota
	// ack ends the work: the trial ended, or went back to the controller.
	ack
	// nak asks for a redelivery after a delay: the trial is retried.
	nak
	// term ends the work for good: the trial ran out of attempts.
	term
)

func (s settlement) String() string {
	return [...]string{"leave", "ack", "nak", "term"}[s]
}

// situation is what an attempt knows when it ends.
type situation struct {
	Trial, Runner   string
	Attempt         int    // this attempt's number
	Tries           int    // deliveries of this work message
	MaxFailures     int    // -1: unlimited
	Started         bool   // trial.started of this attempt is stored
	Ended           bool   // the controller had ended the trial: the work is stale
	Superseded      bool   // a newer attempt has started elsewhere
	ShuttingDown    bool   // the runner is stopping (SIGTERM, preemption)
	StopReason      string // the controller or a stop criterion stopped it
	Paused          bool   // the stop is a pause: the trial resumes later
	Err             error  // the trainable's error, or why it could not run
	CountPreemption bool
}

// outcome is what to publish, in order, and then how to settle the work.
// The work is settled only once every event is stored: work whose outcome
// the log does not hold is left to be redelivered.
type outcome struct {
	Publish []events.Payload
	Settle  settlement
	Delay   time.Duration // with nak
}

// decide is the outcome of an attempt. It is pure: every rule for how an
// attempt ends lives here.
func decide(s situation) outcome {
	switch {
	case s.Ended:
		return outcome{Settle: ack}
	case s.Superseded:
		// The work went to a newer attempt; this one says nothing and must
		// not settle a delivery that is no longer its own.
		return outcome{Settle: leave}
	case s.ShuttingDown && s.StopReason == "":
		// Handed back, not counted unless configured: the controller
		// schedules the trial again with a fresh delivery budget. An
		// attempt that had not started records its start first, so the
		// fold sees it end; a redelivery would spend one of the trial's
		// max_failures + 1 deliveries.
		p := []events.Payload{&events.TrialFailed{
			TrialID: s.Trial, Attempt: s.Attempt, Cause: events.CausePreempted,
			Error: "runner " + s.Runner + " was stopped (preempted)", Counted: s.CountPreemption,
		}}
		if !s.Started {
			p = append([]events.Payload{started(s)}, p...)
		}
		return outcome{Publish: p, Settle: ack}
	case !s.Started && s.StopReason == "":
		// It could not start (the log or the bucket did not answer):
		// another delivery tries again.
		return outcome{Settle: nak, Delay: backoff(s.Attempt)}
	case s.StopReason != "" && s.Paused:
		// Paused at a scheduler's decision: the trial frees its slot and
		// resumes from its latest checkpoint when scheduled again.
		p := []events.Payload{&events.TrialPaused{TrialID: s.Trial, Attempt: s.Attempt, Reason: s.StopReason}}
		if !s.Started {
			p = append([]events.Payload{started(s)}, p...)
		}
		return outcome{Publish: p, Settle: ack}
	case s.StopReason != "" || s.Err == nil:
		reason := s.StopReason
		if reason == "" {
			reason = "finished"
		}
		p := []events.Payload{&events.TrialCompleted{TrialID: s.Trial, Attempt: s.Attempt, Status: events.StatusTerminated, Reason: reason}}
		if !s.Started { // stopped before it ran: the fold sees it start, then end
			p = append([]events.Payload{started(s)}, p...)
		}
		return outcome{Publish: p, Settle: ack}
	}
	// A checkpoint gone everywhere cannot be resumed from by any retry.
	final := events.FailureConfig{MaxFailures: s.MaxFailures}.Exhausted(s.Tries) || errors.Is(s.Err, ckpt.ErrGone)
	o := outcome{Publish: []events.Payload{&events.TrialFailed{
		TrialID: s.Trial, Attempt: s.Attempt, Cause: events.CauseError, ErrorType: errorType(s.Err),
		Error: s.Err.Error(), Final: final, Counted: true,
	}}}
	if final {
		o.Settle = term
		return o
	}
	// The attempt number, not the deliveries of this work message, so that
	// a trial's retries back off across reschedulings too.
	o.Settle, o.Delay = nak, backoff(s.Attempt)
	return o
}

func started(s situation) *events.TrialStarted {
	return &events.TrialStarted{TrialID: s.Trial, Attempt: s.Attempt, Runner: s.Runner}
}

// settle publishes the outcome's events and then returns how to settle
// the work message (bus.Settle). It is the only place the settlement is
// decided once an attempt exists.
func (a *attempt) settle(ctx context.Context, o outcome) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, p := range o.Publish {
		var fences []bus.Fence
		if sp, ok := p.(*events.TrialStarted); ok {
			sp.Hostname, sp.PID = a.s.hostname, pid
		} else {
			fence, ok := a.endFence(ctx)
			if !ok {
				return bus.ErrLeave
			}
			fences = append(fences, fence)
		}
		_, err := a.s.bus.Publish(ctx, a.s.bus.Event(a.exp, events.WriterRunner, p), fences...)
		if bus.Fenced(err) {
			a.superseded.Store(true)
			a.log.Warn().Str("type", p.Type()).Msg("a newer attempt started as this one ended; leaving the work to it")
			return bus.ErrLeave
		}
		if err != nil {
			// Acking would lose the outcome: the work is redelivered after
			// the heartbeat timeout instead, as if this runner had died.
			a.log.Error().Err(err).Str("type", p.Type()).Msg("publish trial outcome; leaving the work to be redelivered")
			return bus.ErrLeave
		}
		countFailure(a.exp, p)
	}
	switch o.Settle {
	case ack:
		return nil
	case nak:
		return bus.Retry(errors.New("the trial is retried"), o.Delay)
	case term:
		return bus.Terminate(errors.New("max_failures"))
	}
	return bus.ErrLeave
}

// endFence is the fence that stores the attempt's end only while
// no newer attempt of the trial has started, or false (with the reason
// logged) when one has or the log cannot tell. The fold takes the end of
// the current attempt only: an end published after a newer start would be
// ignored while its ack took the work from the newer attempt, which, were
// its runner to die, would never be redelivered. An attempt that stored
// its own start fences on it without reading the log: a newer start
// after it fails the publish (settle).
func (a *attempt) endFence(ctx context.Context) (bus.Fence, bool) {
	subject := events.Subject(a.exp, events.WriterRunner, events.TypeTrialStarted, a.work.TrialID)
	if a.startSeq != 0 {
		return bus.Fence{Subject: subject, Seq: a.startSeq}, true
	}
	seq, attempt, err := a.lastStart(ctx)
	switch {
	case err != nil:
		a.log.Error().Err(err).Msg("read the trial's last start; leaving the work to be redelivered")
		return bus.Fence{}, false
	case attempt > a.num:
		a.superseded.Store(true)
		a.log.Warn().Int("newer_attempt", attempt).Msg("a newer attempt started as this one ended; leaving the work to it")
		return bus.Fence{}, false
	}
	return bus.Fence{Subject: subject, Seq: seq}, true
}

func countFailure(exp string, p events.Payload) {
	if f, ok := p.(*events.TrialFailed); ok {
		metrics.Failures.WithLabelValues(exp, f.Cause).Inc()
	}
}

// backoff is the delay before retrying after the n-th failed attempt:
// 100 ms doubling up to 5 s. (Computed as a power of two for every n, it
// overflowed past n = 47 into a negative delay, so a trial retried without
// limit was redelivered at once, forever.)
func backoff(n int) time.Duration {
	const first, most = 100 * time.Millisecond, 5 * time.Second
	d := first
	for i := 1; i < n && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}
