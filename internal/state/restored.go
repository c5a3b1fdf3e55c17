package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/tunejet/tunejet/events"
)

// Loader reads the state an experiment.restored event names. The restorer
// stages that state in the experiment's Object Store;
// restorestate.Loader reads it there, and tests may hand one over
// directly.
type Loader func(ctx context.Context, r *events.ExperimentRestored) (*Experiment, error)

// ErrNoLoader is returned by Fold for an experiment.restored event when no
// Loader was given.
var ErrNoLoader = errors.New("no loader for the restored state")

// Fold applies one event to e and returns the state after it, with
// whether anything changed. It is the one fold every reader of the log
// uses. For experiment.restored the state after it is the restored state
// load supplies, which replaces everything folded before; an event at or
// before the restore's sequence, met again, changes nothing. An
// experiment.submitted other than the one folded starts a new experiment
// of that name from nothing: the old one was removed from the log (a new
// run, tune.WithNewRun). Every other event is applied to e in place. Given load's answers, Fold is deterministic: it reads no
// clock and draws no random number.
func Fold(ctx context.Context, e *Experiment, ev *events.Event, load Loader) (*Experiment, bool, error) {
	if ev.Seq != 0 && ev.Seq <= e.RestoredSeq {
		return e, false, nil // the restored state holds everything before it
	}
	if _, ok := ev.Data.(*events.ExperimentSubmitted); ok && ev.Experiment == e.Name &&
		e.Spec != nil && ev.Seq != 0 && ev.Seq != e.SubmittedSeq {
		fresh := New(e.Name)
		return fresh, fresh.apply(ev), nil
	}
	r, ok := ev.Data.(*events.ExperimentRestored)
	if !ok || ev.Experiment != e.Name {
		return e, e.apply(ev), nil
	}
	if load == nil {
		return e, false, fmt.Errorf("fold %s at %d: %w", e.Name, ev.Seq, ErrNoLoader)
	}
	loaded, err := load(ctx, r)
	if err != nil {
		return e, false, err
	}
	// The time between the runs is not the experiment's: LastEventTime
	// stays the last event of the run the state was taken from.
	loaded.LastSeq, loaded.LastEventID, loaded.RestoredSeq = ev.Seq, ev.ID, ev.Seq
	loaded.Recount() // the restore changed its trials by hand
	return loaded, true, nil
}
