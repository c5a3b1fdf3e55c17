package stopper

import "github.com/tunejet/tunejet/internal/settings"

// MaximumIterationStopper is Ray's MaximumIterationStopper: it stops a
// trial after it has reported MaxIter results. It counts the results it
// sees, not the training_iteration they report.
type MaximumIterationStopper struct {
	// MaxIter is the number of results after which a trial stops. No
	// default; must be >= 1 (Ray stops at the first result when <= 1).
	MaxIter int `json:"max_iter" settings:"required"`

	// Iterations counts each trial's results so far.
	Iterations map[string]int `json:"iterations,omitempty" settings:"-"`
}

func init() {
	register(typeMaximumIteration, func() Stopper { return &MaximumIterationStopper{} })
	register(typeTimeout, func() Stopper { return &TimeoutStopper{} })
}

// MaximumIteration returns a MaximumIterationStopper for maxIter results.
func MaximumIteration(maxIter int) *MaximumIterationStopper {
	return &MaximumIterationStopper{MaxIter: maxIter}
}

// StopTrial counts the result and stops the trial at MaxIter results.
func (s *MaximumIterationStopper) StopTrial(trialID string, _ map[string]any) Decision {
	if s.Iterations == nil {
		s.Iterations = map[string]int{}
	}
	s.Iterations[trialID]++
	if n := s.Iterations[trialID]; n >= s.MaxIter {
		return stop("maximum iteration: %d results reached max_iter %d", n, s.MaxIter)
	}
	return Decision{}
}

// StopAll never stops the experiment.
func (*MaximumIterationStopper) StopAll(float64) Decision { return Decision{} }

func (*MaximumIterationStopper) kind() string { return typeMaximumIteration }

func (s *MaximumIterationStopper) validate(p *settings.Problems) {
	p.AtLeast("max_iter", s.MaxIter, 1)
}

// TimeoutStopper is Ray's TimeoutStopper, which Ray also makes of
// time_budget_s: it stops the experiment once Timeout seconds have passed
// since it started. It never stops a single trial.
//
// Ray counts from its first check and, after a restore, on from the budget
// left; here the caller's clock is the experiment's running time, which
// state.Experiment.Elapsed gives with the same meaning.
type TimeoutStopper struct {
	// Timeout is the experiment's time budget in seconds. No default;
	// must be > 0.
	Timeout float64 `json:"timeout" settings:"required"`
}

// Timeout returns a TimeoutStopper for seconds.
func Timeout(seconds float64) *TimeoutStopper { return &TimeoutStopper{Timeout: seconds} }

// StopTrial never stops a trial.
func (*TimeoutStopper) StopTrial(string, map[string]any) Decision { return Decision{} }

// StopAll stops the experiment when now >= Timeout (Ray: budget <= 0).
func (s *TimeoutStopper) StopAll(now float64) Decision {
	if now >= s.Timeout {
		return stop("timeout: %.6g s elapsed, timeout %g s", now, s.Timeout)
	}
	return Decision{}
}

func (*TimeoutStopper) kind() string { return typeTimeout }

func (s *TimeoutStopper) validate(p *settings.Problems) {
	p.Positive("timeout", s.Timeout)
}
