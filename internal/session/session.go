// Package session carries a running trial's session in its context, so a Go
// trainable can report results and read its checkpoint (tune.Report,
// tune.GetCheckpoint) while the runner owns the plumbing.
//
// Exposed as: tune.Report, tune.GetCheckpoint, tune.Trainable.
package session

import (
	"context"
	"errors"
)

// Func is a Go trainable: it trains with config, reporting through the
// session in ctx, and returns nil when training is done. It should return
// promptly once ctx is done.
type Func func(ctx context.Context, config map[string]any) error

// Session is what a runner gives one trial attempt.
type Session interface {
	// Report records one result (and a checkpoint directory, if not "")
	// and returns whether the trial should stop now.
	Report(ctx context.Context, metrics map[string]any, checkpointDir string) (stop bool, err error)
	// Checkpoint is the local directory of the checkpoint this attempt
	// resumes from, or "".
	Checkpoint() string
	// Info describes the trial.
	Info() Info
	// Object reads an object stored with tune.Put.
	Object(ctx context.Context, name string) ([]byte, error)
}

// Info describes the trial a session belongs to.
type Info struct {
	Experiment string
	TrialID    string
	TrialName  string
	TrialDir   string
	Attempt    int
}

// ErrNoSession is returned when a function that needs a trial session is
// called outside a trial.
var ErrNoSession = errors.New("no trial session in context: call this from a trainable run by tunejet")

// ErrStopped is the cause of a trial context that was stopped (a stop
// criterion was met or the controller asked), and what Report returns then.
var ErrStopped = errors.New("trial stopped")

type key struct{}

// With returns ctx carrying s.
func With(ctx context.Context, s Session) context.Context {
	return context.WithValue(ctx, key{}, s)
}

// From returns the session in ctx.
func From(ctx context.Context) (Session, error) {
	s, ok := ctx.Value(key{}).(Session)
	if !ok {
		return nil, ErrNoSession
	}
	return s, nil
}
