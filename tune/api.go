package tune

import (
	"context"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/session"
)

// Trainable is a Go trainable: it trains with config, calls Report with
// its results, and returns nil when done. It should return once ctx is
// done (the trial was stopped).
type Trainable = func(ctx context.Context, config map[string]any) error

// The experiment's configuration, as in Ray Tune. Every field's default is
// documented on the field.
type (
	TuneConfig       = events.TuneConfig
	RunConfig        = events.RunConfig
	FailureConfig    = events.FailureConfig
	CheckpointConfig = events.CheckpointConfig
	SyncConfig       = events.SyncConfig
	// Spec is a whole experiment, as an experiment file describes it.
	Spec = events.ExperimentSpec
)

// FailFast values for FailureConfig.FailFast.
const (
	FailFastOff   = events.FailFastOff
	FailFastOn    = events.FailFastOn
	FailFastRaise = events.FailFastRaise
)

// ErrStopped is what Report returns once the trial has been told to stop
// (a stop criterion was met, or the controller asked). Returning it, or
// any error, from the trainable then ends the trial TERMINATED; or PAUSED,
// when a scheduler paused it: it runs again later from its latest
// checkpoint (GetCheckpoint), so a trainable that reports checkpoints
// loses nothing.
var ErrStopped = session.ErrStopped

// ReportOption adds to a report.
type ReportOption func(*reportOptions)

type reportOptions struct{ checkpointDir string }

// WithCheckpoint reports a checkpoint directory along with the metrics.
func WithCheckpoint(dir string) ReportOption {
	return func(o *reportOptions) { o.checkpointDir = dir }
}

// Report records one result of the running trial. tunejet adds Ray's
// automatic fields (training_iteration, time_this_iter_s, ...). It returns
// ErrStopped when the trial should end now.
//
// Report returns once the result is queued for the event log, not stored;
// the trial's end waits for every queued result. Call it from one
// goroutine at a time: of reports made at once, one that reaches the log
// after a newer one is dropped (with a warning), as the state would ignore
// it.
func Report(ctx context.Context, metrics map[string]any, opts ...ReportOption) error {
	s, err := session.From(ctx)
	if err != nil {
		return err
	}
	var o reportOptions
	for _, opt := range opts {
		opt(&o)
	}
	stop, err := s.Report(ctx, metrics, o.checkpointDir)
	if err != nil {
		return err
	}
	if stop {
		return ErrStopped
	}
	return nil
}

// GetCheckpoint returns the local directory of the checkpoint the trial
// resumes from, or "" when it starts fresh.
func GetCheckpoint(ctx context.Context) (string, error) {
	s, err := session.From(ctx)
	if err != nil {
		return "", err
	}
	return s.Checkpoint(), nil
}

// TrialInfo describes the running trial.
type TrialInfo struct {
	Experiment string
	TrialID    string
	TrialName  string
	// TrialDir is the trial's directory.
	TrialDir string
	// Attempt counts the trial's runs, from 1.
	Attempt int
}

// GetTrialInfo returns the running trial's id, name, directory and attempt.
func GetTrialInfo(ctx context.Context) (TrialInfo, error) {
	s, err := session.From(ctx)
	if err != nil {
		return TrialInfo{}, err
	}
	return TrialInfo(s.Info()), nil
}
