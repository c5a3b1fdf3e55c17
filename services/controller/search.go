package controller

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/sched"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/tpe"
	"github.com/tunejet/tunejet/internal/tuning"
)

// searcher makes the configs of new trials: the search algorithm's (the
// space's random or grid draw, a TPE suggestion from the trials so far, or
// the config an external searcher suggested), with the point to evaluate
// of that index, if any, over it.
type searcher struct {
	st       *state.Experiment
	in       Inputs
	external bool        // search_alg external: in.Suggestion is the config
	driver   bool        // the driver's searcher: st.Suggested is the config
	sampled  bool        // sample_from domains: st.Suggested holds their values
	history  []tpe.Trial // for TPE: the trials so far, and those created since
}

func newSearcher(st *state.Experiment, in Inputs) *searcher {
	s := &searcher{st: st, in: in, external: st.Spec.TuneConfig.SearchAlg == tuning.SearchExternal, driver: st.Spec.Driver.Searches()}
	if in.Searcher != nil {
		s.history = append(append(warmHistory(st, len(in.Evaluated)), in.Evaluated...), tpeHistory(st)...)
	}
	s.sampled = in.Space != nil && len(in.Space.SampledByDriver()) > 0
	return s
}

// driverSample returns the config of trial index with its sample_from
// values null, as the driver is asked to resolve them (Ray's
// BasicVariantGenerator calls the functions after drawing the rest).
func driverSample(st *state.Experiment, space *search.Space, index int) map[string]any {
	s := &searcher{st: st, in: Inputs{Space: space}}
	config, _, _, _ := s.draft(index)
	return config
}

// config returns the config and experiment tag of trial index, and the
// log sequence its suggestion saw (0 when no model was asked); ok is false
// when an external searcher's config for index is not in the inputs.
func (s *searcher) config(index int) (config map[string]any, tag string, seq uint64, ok bool) {
	if s.sampled {
		sg := s.st.Suggested
		if sg == nil || sg.Index != index {
			return nil, "", 0, false
		}
		config, _, _, _ = s.draft(index)
		if err := s.in.Space.TakeSampled(config, sg.Config); err != nil {
			return nil, "", 0, false // the asker checked it: not reached
		}
		return config, s.in.Space.Tag(index, config), sg.Seq, true
	}
	return s.draft(index)
}

// draft is config without the driver's sample_from values.
func (s *searcher) draft(index int) (config map[string]any, tag string, seq uint64, ok bool) {
	switch {
	case s.external:
		sg := s.in.Suggestion
		if sg == nil || sg.Index != index {
			return nil, "", 0, false
		}
		config, seq = search.CopyValue(sg.Config).(map[string]any), sg.Seq
	case s.driver:
		// As Ray merges a searcher's config into the param space: the
		// space's constants, and its domains the suggestion leaves out
		// drawn as random search would.
		sg := s.st.Suggested
		if sg == nil || sg.Index != index {
			return nil, "", 0, false
		}
		config, _ = s.in.Space.Trial(index, s.st.Seed)
		overlay(config, search.CopyValue(sg.Config).(map[string]any))
		seq = sg.Seq
	case s.in.Searcher == nil:
		config, tag = s.in.Space.Trial(index, s.st.Seed)
	default:
		rng := tuning.Rand(s.st.Seed, "suggest", uint64(index))
		if n, ok := s.in.Searcher.(numbered); ok {
			config = n.SuggestFor(index, s.historyFor(index), rng)
		} else {
			config = s.in.Searcher.Suggest(s.historyFor(index), rng)
		}
		seq = s.st.LastSeq
	}
	if points := s.st.Spec.TuneConfig.PointsToEvaluate; index < len(points) && s.in.Evaluated == nil {
		overlay(config, points[index])
	}
	filled := s.st.FillConfig(config, index)
	if s.in.Searcher != nil || s.external || s.driver || index < len(s.st.Spec.TuneConfig.PointsToEvaluate) && s.in.Evaluated == nil || filled {
		tag = s.in.Space.Tag(index, config)
	}
	if s.in.Searcher != nil {
		s.history = append(s.history, tpe.Trial{Number: index, State: tpe.Running, Config: config})
	}
	return config, tag, seq, true
}

// numbered is a searcher whose suggestion depends on the number of the
// trial it is for besides the history (NSGA-II's generation), which may
// end before it.
type numbered interface {
	SuggestFor(number int, history []tpe.Trial, rng *rand.Rand) map[string]any
}

// historyFor is the history the suggestion for trial index learns from:
// every trial so far, or with tune_config.reproducible only those
// numbered up to index − max_concurrent_trials (and the evaluated points
// before the first), which waitsForHistory made sure have all finished:
// the same whatever the timing.
func (s *searcher) historyFor(index int) []tpe.Trial {
	tc := s.st.Spec.TuneConfig
	if !tc.Reproducible {
		return s.history
	}
	var out []tpe.Trial
	for _, h := range s.history {
		if h.Number <= index-tc.MaxConcurrentTrials {
			out = append(out, h)
		}
	}
	return out
}

// overlay sets the keys point names in config, nested mappings key by key.
func overlay(config, point map[string]any) {
	for k, v := range point {
		sub, isMap := v.(map[string]any)
		into, intoMap := config[k].(map[string]any)
		if isMap && intoMap {
			overlay(into, sub)
			continue
		}
		if isMap {
			v = search.CopyValue(sub)
		}
		config[k] = v
	}
}

// tpeHistory is what TPE learns from, as Optuna sees its study: a trial
// that ended with the metric is complete with its last value, one a
// scheduler cut short is pruned with the value and iteration it was judged
// at last (Optuna's pruned trial; one a scheduler ended at its end is
// complete with that value), one still pending or running is running (the constant liar puts
// it above the split), and one that errored, or never reported the
// metric, is left out.
func tpeHistory(st *state.Experiment) []tpe.Trial {
	tc := &st.Spec.TuneConfig
	if tc.MultiObjective() {
		return multiHistory(st)
	}
	metric := tc.Metric
	var out []tpe.Trial
	for _, t := range st.TrialList() {
		h := tpe.Trial{Number: t.Index, Config: t.Config}
		v, ok := metricValue(t.LastResult, metric)
		stopped := strings.HasPrefix(t.StopDecision, events.DecidedByScheduler+": ") && t.JudgedValue != nil
		if stopped {
			// At the result it was stopped at: results that came before the
			// stop reached its runner are timing's, not the decision's.
			v = *t.JudgedValue
			ok = !math.IsNaN(v) && !math.IsInf(v, 0)
		}
		switch {
		case !t.Finished():
			h.State = tpe.Running
		case t.Status == events.StatusError || !ok:
			continue
		case stopped && pruned(t.StopDecision):
			h.State, h.Value, h.Step = tpe.Pruned, v, t.JudgedIteration
		default:
			h.State, h.Value = tpe.Complete, v
		}
		out = append(out, h)
	}
	return out
}

// multiHistory is tpeHistory with several metrics: a finished trial is
// complete with its last result's values, each to be minimized (a
// maximized metric's negated), as Optuna's multi-objective study sees it;
// one that errored or lacks a metric is left out. No scheduler cuts a
// multi-objective trial short (they judge by one metric): a stopper's
// stop is a complete trial, as in single-objective search.
func multiHistory(st *state.Experiment) []tpe.Trial {
	objectives := st.Spec.TuneConfig.Objectives()
	var out []tpe.Trial
	for _, t := range st.TrialList() {
		h := tpe.Trial{Number: t.Index, Config: t.Config}
		switch values, ok := events.ObjectiveValues(t.LastResult, objectives); {
		case !t.Finished():
			h.State = tpe.Running
		case t.Status == events.StatusError || !ok:
			continue
		default:
			h.State, h.Values = tpe.Complete, minimized(values, objectives)
		}
		out = append(out, h)
	}
	return out
}

// minimized is values, one per objective, as the searchers take them:
// each maximized one negated.
func minimized(values []float64, objectives []events.Objective) []float64 {
	out := make([]float64, len(values))
	for i, v := range values {
		out[i] = v
		if i < len(objectives) {
			out[i] = objectives[i].Minimized(v)
		}
	}
	return out
}

// warmHistory is tune_config.warm_start's trials as completed trials of
// the history, numbered before the evaluated points (which take −evaluated
// to −1) and the experiment's own trials.
func warmHistory(st *state.Experiment, evaluated int) []tpe.Trial {
	warm := st.Spec.TuneConfig.WarmStartTrials
	objectives := st.Spec.TuneConfig.Objectives()
	out := make([]tpe.Trial, len(warm))
	for i, w := range warm {
		out[i] = tpe.Trial{Number: i - len(warm) - evaluated, State: tpe.Complete, Config: w.Config, Value: w.Value}
		if len(w.Values) > 0 {
			out[i].Values = minimized(w.Values, objectives)
		}
	}
	return out
}

// pruned reports whether a stop decision cut the trial short: a
// scheduler's, but not one that ends a trial that trained to its end
// (ASHA at max_t, a HyperBand bracket at its last milestone), which
// Optuna counts complete.
func pruned(stopDecision string) bool {
	why, ok := strings.CutPrefix(stopDecision, events.DecidedByScheduler+": ")
	return ok && !sched.TrainedOut(why)
}

// metricValue reads a result's metric ("a/b" nests), a finite number.
func metricValue(r map[string]any, metric string) (float64, bool) {
	v, _ := events.ResultValue(r, metric)
	f, ok := v.(float64)
	return f, ok && !math.IsNaN(f) && !math.IsInf(f, 0)
}
