package tune

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// Result is one trial's outcome (Ray's Result).
type Result struct {
	TrialID   string
	TrialName string
	Status    string
	Config    map[string]any
	// Metrics is the trial's last result.
	Metrics map[string]any
	// Error is the trial's last error when it ended ERROR, else nil.
	Error error
	// Path is the trial's directory in storage.
	Path string
	// NumFailures counts the trial's failures against max_failures.
	NumFailures int

	analysis map[string]*state.MetricStats
}

// ResultGrid holds the results of an experiment (Ray's ResultGrid).
type ResultGrid struct {
	// ExperimentPath is the experiment directory in storage.
	ExperimentPath string
	results        []Result
	metric, mode   string
}

func newResultGrid(st *state.Experiment) *ResultGrid {
	g := &ResultGrid{}
	if st.Spec != nil {
		g.metric, g.mode = st.Spec.TuneConfig.Metric, st.Spec.TuneConfig.Mode
	}
	if dir, err := storage.Open(st.StoragePath, st.Name); err == nil && st.StoragePath != "" {
		g.ExperimentPath = dir.Root
	}
	for _, t := range st.TrialList() {
		r := Result{
			TrialID: t.ID, TrialName: t.Name, Status: t.Status, Config: t.Config, Metrics: t.LastResult,
			NumFailures: t.NumFailures, analysis: t.Metrics,
		}
		if g.ExperimentPath != "" {
			r.Path = filepath.Join(g.ExperimentPath, t.DirName)
		}
		if t.Status == events.StatusError {
			r.Error = errors.New(t.LastError)
		}
		g.results = append(g.results, r)
	}
	return g
}

// LoadResults reads the results of an experiment from its newest state
// file, e.g. LoadResults(ctx, "~/tunejet_results/my_exp").
func LoadResults(ctx context.Context, path string) (*ResultGrid, error) {
	p, err := storage.Resolve(path, "")
	if err != nil {
		return nil, err
	}
	local, err := storage.LocalPath(p)
	if err != nil {
		return nil, err
	}
	dir := &storage.Dir{Root: local}
	name, err := dir.NewestState()
	if err != nil {
		return nil, fmt.Errorf("no experiment snapshot file of form 'experiment_state-*.json' was found at %s; check that the path is the combination of storage_path and name of your run: %w", local, err)
	}
	b, err := dir.Read(name)
	if err != nil {
		return nil, err
	}
	st, err := state.Load(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(local, name), err)
	}
	g := newResultGrid(st)
	g.ExperimentPath = local
	for i := range g.results {
		g.results[i].Path = filepath.Join(local, st.Trials[g.results[i].TrialID].DirName)
	}
	return g, nil
}

// Len is the number of trials.
func (g *ResultGrid) Len() int { return len(g.results) }

// Get returns the i-th trial's result, in creation order.
func (g *ResultGrid) Get(i int) *Result { return &g.results[i] }

// Results returns every trial's result.
func (g *ResultGrid) Results() []Result { return append([]Result(nil), g.results...) }

// Errors returns the errors of the trials that ended ERROR.
func (g *ResultGrid) Errors() []error {
	var out []error
	for _, r := range g.results {
		if r.Error != nil {
			out = append(out, r.Error)
		}
	}
	return out
}

// NumErrors counts the trials that ended ERROR.
func (g *ResultGrid) NumErrors() int { return g.count(events.StatusError) }

// NumTerminated counts the trials that ended TERMINATED.
func (g *ResultGrid) NumTerminated() int { return g.count(events.StatusTerminated) }

func (g *ResultGrid) count(status string) int {
	n := 0
	for _, r := range g.results {
		if r.Status == status {
			n++
		}
	}
	return n
}

// Scopes accepted by GetBestResult.
var Scopes = []string{"all", "last", "avg", "last-5-avg", "last-10-avg"}

// GetBestResult returns the best trial by metric and mode ("min" or
// "max"); empty arguments default to the TuneConfig's. scope is Ray's:
// "last" compares each trial's last value, "all" its best value, "avg",
// "last-5-avg" and "last-10-avg" averages. NaN and infinite values are
// skipped. Errors keep Ray's wording.
func (g *ResultGrid) GetBestResult(metric, mode, scope string) (*Result, error) {
	if len(g.results) == 1 {
		return &g.results[0], nil
	}
	if metric == "" {
		metric = g.metric
	}
	if mode == "" {
		mode = g.mode
	}
	if scope == "" {
		scope = "last"
	}
	if metric == "" {
		return nil, errors.New("No metric is provided. Either pass in a `metric` arg to `GetBestResult` or specify a metric in the `TuneConfig` of your `Tuner`.")
	}
	if mode == "" {
		return nil, errors.New("No mode is provided. Either pass in a `mode` arg to `GetBestResult` or specify a mode in the `TuneConfig` of your `Tuner`.")
	}
	if mode != "min" && mode != "max" {
		return nil, fmt.Errorf("If set, `mode` has to be one of [min, max], got %q", mode)
	}
	if !validScope(scope) {
		return nil, fmt.Errorf("ExperimentAnalysis: attempting to get best trial for metric %s for scope %s not in %q. If you didn't pass a `metric` parameter to `tune.run()`, you have to pass one when fetching the best trial.", metric, scope, Scopes)
	}
	var best *Result
	bestV := 0.0
	for i := range g.results {
		v, ok := g.results[i].score(metric, mode, scope)
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		if best == nil || (mode == "max" && v > bestV) || (mode == "min" && v < bestV) {
			best, bestV = &g.results[i], v
		}
	}
	if best == nil {
		return nil, fmt.Errorf("No best trial found for the given metric: %s. This means that no trial has reported this metric, or all values reported for this metric are NaN.", metric)
	}
	return best, nil
}

func validScope(s string) bool {
	for _, x := range Scopes {
		if s == x {
			return true
		}
	}
	return false
}

// score is the trial's value of metric under scope.
func (r *Result) score(metric, mode, scope string) (float64, bool) {
	m := r.analysis[metric]
	if m == nil || m.Count == 0 {
		return 0, false
	}
	switch scope {
	case "all":
		if mode == "max" {
			return m.Max, true
		}
		return m.Min, true
	case "avg":
		return m.Avg(), true
	case "last-5-avg":
		return m.LastNAvg(5), true
	case "last-10-avg":
		return m.LastNAvg(10), true
	}
	return m.Last, true
}
