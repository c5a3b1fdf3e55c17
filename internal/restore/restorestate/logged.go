package restorestate

import (
	"context"
	"errors"
	"fmt"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/state"
)

// Logged folds experiment name from the log b holds.
func Logged(ctx context.Context, b *bus.Bus, name string) (*state.Experiment, error) {
	st, load := state.New(name), Loader(b, name)
	var ferr error
	err := b.Replay(ctx, events.ExperimentSubjects(name), func(ev *events.Event) {
		if ferr == nil {
			st, _, ferr = state.Fold(ctx, st, ev, load)
		}
	})
	if err = errors.Join(err, ferr); err != nil {
		return nil, fmt.Errorf("fold %s: %w", name, err)
	}
	return st, nil
}
