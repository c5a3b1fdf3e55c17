package tpe

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tunejet/tunejet/internal/search"
)

// State is a trial's state as TPE counts it.
type State string

// The states of a trial in the history. A trial a scheduler or stopper
// ended early is Pruned; an errored trial is not passed at all.
const (
	Complete State = "complete" // finished with its final value
	Pruned   State = "pruned"   // stopped early, with its last step and value
	Running  State = "running"  // suggested and not yet finished
)

// Trial is one trial of the history Suggest learns from.
type Trial struct {
	// Number is the trial's ordinal; the history is used in this order.
	Number int `json:"number"`
	// State is Complete, Pruned or Running.
	State State `json:"state"`
	// Config is the trial's config, as Space.Trial or a suggestion built it
	// or as decoded from JSON.
	Config map[string]any `json:"config"`
	// Value is the metric: a Complete trial's final value, a Pruned trial's
	// value at Step (NaN ranks it last among the trials pruned at that
	// step). Unused for Running trials.
	Value float64 `json:"value"`
	// Step is a Pruned trial's last reported step (training_iteration);
	// 0 when it reported nothing, which ranks it after every pruned trial
	// that did.
	Step int `json:"step"`
	// Values are a multi-objective trial's values, one per objective in
	// tune_config's metric order, each to be minimized: a maximized
	// objective's value is negated. Nil with one objective (Value holds
	// it) and for Running trials.
	Values []float64 `json:"values,omitempty"`
}

// Options are the TPE knobs, with Optuna's names. Start from Defaults.
type Options struct {
	// NStartupTrials is how many trials are sampled at random before TPE
	// starts; finished (Complete and Pruned) trials count.
	NStartupTrials int `json:"n_startup_trials"`
	// NEICandidates is how many candidates are drawn from l(x).
	NEICandidates int `json:"n_ei_candidates"`
	// Gamma maps the number of finished trials to the size of "below".
	Gamma func(n int) int `json:"-"`
	// Weights gives the weights of n trials' kernels, in trial-number
	// order; it returns at least n non-negative values.
	Weights func(n int) []float64 `json:"-"`
	// PriorWeight is the weight of the prior kernel (>= 0).
	PriorWeight float64 `json:"prior_weight"`
	// ConsiderMagicClip bounds the bandwidths from below by
	// range/min(100, n+2).
	ConsiderMagicClip bool `json:"consider_magic_clip"`
	// ConsiderEndpoints lets the domain's bounds count as neighbours of
	// the smallest and the largest value.
	ConsiderEndpoints bool `json:"consider_endpoints"`
	// Multivariate models all parameters jointly.
	Multivariate bool `json:"multivariate"`
	// ConstantLiar puts Running trials in "above", so that trials
	// suggested while others run do not all land on the same spot.
	ConstantLiar bool `json:"constant_liar"`
	// Estimator picks the Parzen estimator's rules: Optuna 5's (the
	// default) or Optuna 4.5's.
	Estimator Estimator `json:"-"`
	// Maximize ranks larger values as better (mode "max").
	Maximize bool `json:"-"`
}

// Estimator names the rules of a Parzen estimator, after the Optuna
// version that has them.
type Estimator string

// The estimators; the package doc describes both.
const (
	// Optuna5 is Optuna 5.0's estimator: the bandwidth of a kernel is the
	// distance to its neighbours among the observations (not the prior's
	// mean), multivariate or not; a log domain with a step is discrete.
	Optuna5 Estimator = "optuna5"
	// Optuna4 is Optuna 4.5's estimator: the prior's mean counts as a
	// neighbour, the multivariate bandwidth is Scott-like, and a log domain
	// with a step is continuous in log space, rounded.
	Optuna4 Estimator = "optuna4"
)

// Defaults are Optuna 5.0's TPESampler defaults for one objective:
// multivariate, with the constant liar and Optuna 5's estimator. They reach
// a lower regret than Optuna 4.5's on Branin and Hartmann6 (see
// TestRegret). The constant liar changes nothing with one trial in flight
// and keeps trials suggested while others run apart.
func Defaults() Options {
	return Options{
		NStartupTrials:    10,
		NEICandidates:     24,
		Gamma:             DefaultGamma,
		Weights:           DefaultWeights,
		PriorWeight:       1,
		ConsiderMagicClip: true,
		Multivariate:      true,
		ConstantLiar:      true,
		Estimator:         Optuna5,
	}
}

// Optuna45 are Optuna 4.5's TPESampler defaults (univariate, its
// estimator) but for the constant liar, which tunejet keeps on.
func Optuna45() Options {
	o := Defaults()
	o.Multivariate, o.Estimator = false, Optuna4
	return o
}

// DefaultGamma is Optuna's default_gamma: min(ceil(0.1 n), 25).
func DefaultGamma(n int) int { return min((n+9)/10, 25) }

// HyperoptGamma is Optuna's hyperopt_default_gamma:
// min(ceil(0.25 sqrt(n)), 25).
func HyperoptGamma(n int) int { return min(int(math.Ceil(0.25*math.Sqrt(float64(n)))), 25) }

// DefaultWeights is Optuna's default_weights: 1 for each of n < 25 trials;
// from 25 on, the older n − 25 rise linearly from 1/n to 1 and the newest
// 25 get 1.
func DefaultWeights(n int) []float64 {
	w := make([]float64, n)
	ramp := max(n-25, 0)
	for i := range w {
		w[i] = 1
		if i < ramp {
			w[i] = linspace(1/float64(n), 1, ramp, i)
		}
	}
	return w
}

// linspace is numpy's linspace(start, stop, num)[i].
func linspace(start, stop float64, num, i int) float64 {
	if num == 1 {
		return start
	}
	if i == num-1 {
		return stop
	}
	return start + float64(i)*((stop-start)/float64(num-1))
}

// Sampler suggests configs for one param space. It is immutable and safe
// for concurrent use.
type Sampler struct {
	opts    Options
	space   *search.Space
	dims    []*dim // one per domain, in the order of Space.Domains
	modeled []*dim // the dims TPE models: not fixed
}

// New returns a Sampler for space. It refuses a space with grid_search,
// randn or qrandn domains with a *settings.Error naming the key, and
// options out of range.
func New(space *search.Space, opts Options) (*Sampler, error) {
	switch {
	case opts.NStartupTrials < 0:
		return nil, fmt.Errorf("tpe: n_startup_trials (%d) must be >= 0", opts.NStartupTrials)
	case opts.NEICandidates < 1:
		return nil, fmt.Errorf("tpe: n_ei_candidates (%d) must be >= 1", opts.NEICandidates)
	case !(opts.PriorWeight >= 0) || math.IsInf(opts.PriorWeight, 1):
		return nil, fmt.Errorf("tpe: prior_weight (%v) must be a finite number >= 0", opts.PriorWeight)
	case opts.Estimator != Optuna5 && opts.Estimator != Optuna4:
		return nil, fmt.Errorf("tpe: estimator %q is neither %q nor %q", opts.Estimator, Optuna5, Optuna4)
	}
	if opts.Gamma == nil {
		opts.Gamma = DefaultGamma
	}
	if opts.Weights == nil {
		opts.Weights = DefaultWeights
	}
	s := &Sampler{opts: opts, space: space}
	for i, d := range space.Domains() {
		dm, err := newDim(i, d, opts.Estimator)
		if err != nil {
			return nil, err
		}
		s.dims = append(s.dims, dm)
		if !dm.fixed {
			s.modeled = append(s.modeled, dm)
		}
	}
	return s, nil
}

// Suggest returns the config of the next trial given the history: the
// finished (Complete, Pruned) and Running trials, which it uses in
// trial-number order whatever their order in the slice. Every random number
// comes from rng, which Suggest advances and never keeps: the same history
// and an rng in the same state give the same config.
func (s *Sampler) Suggest(history []Trial, rng *rand.Rand) map[string]any {
	trials := slices.Clone(history)
	slices.SortStableFunc(trials, func(a, b Trial) int { return cmp.Compare(a.Number, b.Number) })
	finished := 0
	for _, t := range trials {
		if t.State == Complete || t.State == Pruned {
			finished++
		}
	}
	raw := make([]float64, len(s.dims)) // the internal value of every dim
	for _, d := range s.dims {
		raw[d.index] = d.fixedValue()
	}
	switch {
	case len(s.modeled) == 0:
	case finished < s.opts.NStartupTrials:
		for _, d := range s.modeled {
			raw[d.index] = d.random(rng)
		}
	default:
		s.suggest(trials, finished, rng, raw)
	}
	values := make([]any, len(s.dims))
	for _, d := range s.dims {
		values[d.index] = d.external(raw[d.index])
	}
	config, err := s.space.Config(values)
	if err != nil {
		panic(err) // one value per domain, by construction
	}
	return config
}

// suggest fills raw with TPE's choice for each modeled dim.
func (s *Sampler) suggest(trials []Trial, finished int, rng *rand.Rand, raw []float64) {
	below, above := s.partition(trials, finished)
	belowW := belowWeights(trials, below) // nil with one objective
	values := modelValues(s.dims, trials)
	groups := [][]*dim{s.modeled}
	if !s.opts.Multivariate {
		groups = make([][]*dim, len(s.modeled))
		for i, d := range s.modeled {
			groups[i] = []*dim{d}
		}
	}
	p := params{opts: &s.opts, nParams: len(s.modeled)}
	for _, dims := range groups {
		l := newEstimator(dims, observe(dims, values, below), belowParams(p, dims, values, below, belowW))
		g := newEstimator(dims, observe(dims, values, above), p)
		cands := l.sample(rng, s.opts.NEICandidates)
		best, bestScore := 0, math.Inf(-1)
		for i, c := range cands {
			if score := l.logPdf(c) - g.logPdf(c); score > bestScore || i == 0 {
				best, bestScore = i, score
			}
		}
		for j, d := range dims {
			raw[d.index] = cands[best][j]
		}
	}
}

// partition splits the trials for the estimators l (below) and g (above),
// as positions in trials, by their Values when they carry several
// objectives (motpe.go). Running trials join above with the constant
// liar, and are left out without it.
func (s *Sampler) partition(trials []Trial, finished int) (below, above []int) {
	var used []int
	for i, t := range trials {
		if t.State == Complete || t.State == Pruned || t.State == Running && s.opts.ConstantLiar {
			used = append(used, i)
		}
	}
	if m := objectives(trials); m > 0 {
		return splitMulti(trials, used, s.opts.Gamma(finished), m)
	}
	return split(trials, used, s.opts.Gamma(finished), s.opts.Maximize)
}

// modelValue is a trial's value of a dim in model space, if it has a
// usable one.
type modelValue struct {
	x  float64
	ok bool
}

// modelValues reads every trial's value of every dim once: [trial][dim].
func modelValues(dims []*dim, trials []Trial) [][]modelValue {
	out := make([][]modelValue, len(trials))
	for i, t := range trials {
		out[i] = make([]modelValue, len(dims))
		for _, d := range dims {
			x, ok := d.internal(t.Config)
			out[i][d.index] = modelValue{x, ok}
		}
	}
	return out
}

// observe returns the model-space values of dims of the trials at the
// positions picked, one row per trial that has a usable value for every
// dim, in the order of picked.
func observe(dims []*dim, values [][]modelValue, picked []int) [][]float64 {
	var rows [][]float64
	for _, i := range picked {
		row := make([]float64, len(dims))
		ok := true
		for j, d := range dims {
			v := values[i][d.index]
			row[j], ok = v.x, v.ok
			if !ok {
				break
			}
		}
		if ok {
			rows = append(rows, row)
		}
	}
	return rows
}

// split is Optuna's _split_trials for one objective, over the trials at
// the positions in used (ascending): below holds the nBelow best Complete
// trials, filled up from the Pruned ones ranked by (−step, value); above
// holds the rest and every Running trial. Both are positions, ascending.
// Ties keep trial order, as Python's stable sort does.
func split(trials []Trial, used []int, nBelow int, maximize bool) (below, above []int) {
	var complete, pruned []int
	for _, i := range used {
		switch trials[i].State {
		case Complete:
			complete = append(complete, i)
		case Pruned:
			pruned = append(pruned, i)
		}
	}
	sign := 1.0
	if maximize {
		sign = -1
	}
	key := func(t Trial) float64 {
		if math.IsNaN(t.Value) {
			return math.Inf(1)
		}
		return sign * t.Value
	}
	slices.SortFunc(complete, func(a, b int) int {
		return cmp.Or(cmp.Compare(key(trials[a]), key(trials[b])), cmp.Compare(a, b))
	})
	slices.SortFunc(pruned, func(a, b int) int {
		sa, va := prunedScore(trials[a], key)
		sb, vb := prunedScore(trials[b], key)
		return cmp.Or(cmp.Compare(sa, sb), cmp.Compare(va, vb), cmp.Compare(a, b))
	})
	isBelow := make(map[int]bool, nBelow)
	for _, ranked := range [][]int{complete, pruned} {
		n := min(max(nBelow, 0), len(ranked))
		for _, i := range ranked[:n] {
			isBelow[i] = true
		}
		nBelow -= n
	}
	return splitBy(used, isBelow)
}

// splitBy splits the trials used, in their order, into those isBelow
// marks and the others.
func splitBy(used []int, isBelow map[int]bool) (below, above []int) {
	for _, i := range used {
		if isBelow[i] {
			below = append(below, i)
		} else {
			above = append(above, i)
		}
	}
	return below, above
}

// prunedScore is Optuna's _get_pruned_trial_score: (−last step, value at
// it), or (1, 0) without any step.
func prunedScore(t Trial, key func(Trial) float64) (int, float64) {
	if t.Step <= 0 {
		return 1, 0
	}
	return -t.Step, key(t)
}
