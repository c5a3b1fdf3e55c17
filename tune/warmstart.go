package tune

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/storage"
)

// warmStart reads the finished trials of the experiment tune_config's
// warm_start names into s's WarmStartTrials: each TERMINATED trial whose
// last result holds s's metric, in the trials' order. The other
// experiment's param space must be s's, domain for domain; a difference
// is refused, naming it.
func warmStart(ctx context.Context, s *Spec) error {
	tc := &s.TuneConfig
	if tc.WarmStart == "" || tc.WarmStartTrials != nil {
		return nil
	}
	p, err := storage.Resolve(tc.WarmStart, s.Trainable.Dir)
	if err != nil {
		return fmt.Errorf("%w: tune_config.warm_start: %w", ErrInvalidConfig, err)
	}
	b, err := storage.OpenBucket(ctx, p)
	if err != nil {
		return fmt.Errorf("tune_config.warm_start %s: %w", p, err)
	}
	defer func() { _ = b.Close() }()
	st, _, _, err := storage.LoadNewestState(ctx, b)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: tune_config.warm_start: no experiment_state-*.json at %s: it names an experiment's directory, <storage_path>/<name>", ErrInvalidConfig, p)
	case err != nil:
		return fmt.Errorf("tune_config.warm_start %s: %w", p, err)
	case st.Spec == nil:
		return fmt.Errorf("%w: tune_config.warm_start: the state at %s holds no experiment", ErrInvalidConfig, p)
	}
	if err := sameSpace(s.ParamSpace, st.Spec.ParamSpace); err != nil {
		return fmt.Errorf("%w: tune_config.warm_start: %s's param_space differs from this experiment's: %w", ErrInvalidConfig, p, err)
	}
	trials := []events.WarmTrial{}
	objectives := tc.Objectives()
	for _, t := range st.TrialList() {
		values, ok := events.ObjectiveValues(t.LastResult, objectives)
		switch {
		case t.Status != events.StatusTerminated || !ok || len(values) == 0:
		case tc.MultiObjective():
			trials = append(trials, events.WarmTrial{Config: t.Config, Values: values})
		default:
			trials = append(trials, events.WarmTrial{Config: t.Config, Value: values[0]})
		}
	}
	tc.WarmStartTrials = trials
	return nil
}

// sameSpace reports the first difference between two param spaces'
// domains, by key: a key one has and the other lacks, or a domain of
// another kind, bounds, step, scale or choices.
func sameSpace(mine, theirs map[string]any) error {
	a, err := search.ParseSpace(mine)
	if err != nil {
		return err
	}
	b, err := search.ParseSpace(theirs)
	if err != nil {
		return fmt.Errorf("its param_space: %w", err)
	}
	da, db := a.DomainsByKey(), b.DomainsByKey()
	keys := make([]string, 0, len(da)+len(db))
	for k := range da {
		keys = append(keys, k)
	}
	for k := range db {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		x, inA := da[k]
		y, inB := db[k]
		switch {
		case !inA:
			return fmt.Errorf("param_space.%s is a domain there (%s) and not here", k, describeDomain(y))
		case !inB:
			return fmt.Errorf("param_space.%s is a domain here (%s) and not there", k, describeDomain(x))
		case !reflect.DeepEqual(x, y):
			return fmt.Errorf("param_space.%s is %s here and %s there", k, describeDomain(x), describeDomain(y))
		}
	}
	return nil
}

// describeDomain is a domain for a message: its kind and arguments.
func describeDomain(d search.Domain) string {
	if d.Choices != nil {
		parts := make([]string, len(d.Choices))
		for i, c := range d.Choices {
			parts[i] = fmt.Sprint(c)
		}
		return fmt.Sprintf("%s [%s]", d.Kind, strings.Join(parts, ", "))
	}
	s := fmt.Sprintf("%s [%v, %v]", d.Kind, d.Low, d.High)
	if d.Q != 0 {
		s += fmt.Sprintf(" step %v", d.Q)
	}
	return s
}
