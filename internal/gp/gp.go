package gp

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/tpe"
)

// Options are the GP sampler's knobs, with Optuna's names. Start from
// Defaults.
type Options struct {
	// NStartupTrials is how many completed trials are drawn at random
	// before the GP takes over.
	NStartupTrials int `json:"n_startup_trials"`
	// DeterministicObjective fixes the noise variance at its floor
	// (10⁻⁶): for objectives that give the same value for the same config.
	DeterministicObjective bool `json:"deterministic_objective"`
	// Maximize ranks larger values as better (mode "max").
	Maximize bool `json:"-"`
}

// Defaults are Optuna's GPSampler defaults.
func Defaults() Options { return Options{NStartupTrials: 10} }

// Sampler suggests configs for one param space. It is immutable and safe
// for concurrent use.
type Sampler struct {
	opts    Options
	space   *search.Space
	dims    []*dim // one per domain, in the order of Space.Domains
	modeled []*dim // the dims the GP models: not fixed
}

// New returns a Sampler for space. It refuses a space with grid_search,
// randn or qrandn domains with a *settings.Error naming the key, and
// options out of range.
func New(space *search.Space, opts Options) (*Sampler, error) {
	if opts.NStartupTrials < 0 {
		return nil, fmt.Errorf("bayesopt: n_startup_trials (%d) must be >= 0", opts.NStartupTrials)
	}
	s := &Sampler{opts: opts, space: space}
	for i, d := range space.Domains() {
		m, err := newDim(i, d)
		if err != nil {
			return nil, err
		}
		s.dims = append(s.dims, m)
		if !m.fixed {
			s.modeled = append(s.modeled, m)
		}
	}
	return s, nil
}

// Suggest returns the config of the next trial given the history: the
// Complete trials the GP learns from and the Running ones it believes at
// its own mean (Pruned trials are not used), in trial-number order
// whatever their order in the slice. Every random number comes from rng,
// which Suggest advances and never keeps: the same history and an rng in
// the same state give the same config.
func (s *Sampler) Suggest(history []tpe.Trial, rng *rand.Rand) map[string]any {
	trials := slices.Clone(history)
	slices.SortStableFunc(trials, func(a, b tpe.Trial) int { return cmp.Compare(a.Number, b.Number) })
	var done, running [][]float64
	var values []float64
	for _, t := range trials {
		u, ok := s.normalized(t.Config)
		switch {
		case !ok:
		case t.State == tpe.Complete && !math.IsNaN(t.Value) && !math.IsInf(t.Value, 0):
			done, values = append(done, u), append(values, t.Value)
		case t.State == tpe.Running:
			running = append(running, u)
		}
	}
	u := make([]float64, len(s.modeled))
	if len(s.modeled) > 0 && len(done) >= max(s.opts.NStartupTrials, 1) {
		u = s.suggest(done, values, running, rng)
	} else {
		for j, d := range s.modeled {
			u[j] = d.random(rng)
		}
	}
	out := make([]any, len(s.dims))
	for _, d := range s.dims {
		out[d.index] = d.external(0)
	}
	for j, d := range s.modeled {
		out[d.index] = d.external(u[j])
	}
	config, err := s.space.Config(out)
	if err != nil {
		panic(err) // one value per domain, by construction
	}
	return config
}

// normalized is a config's point in the model: false when it lacks a
// usable value of a modeled dim.
func (s *Sampler) normalized(config map[string]any) ([]float64, bool) {
	u := make([]float64, len(s.modeled))
	for j, d := range s.modeled {
		x, ok := d.internal(config)
		if !ok {
			return nil, false
		}
		u[j] = x
	}
	return u, true
}

// suggest fits the GP to the completed points and maximizes the
// acquisition; the running points join the model at its mean.
func (s *Sampler) suggest(done [][]float64, values []float64, running [][]float64, rng *rand.Rand) []float64 {
	y := standardize(values, s.opts.Maximize)
	cat := make([]bool, len(s.modeled))
	for j, d := range s.modeled {
		cat[j] = d.cat
	}
	m := fit(done, y, cat, s.opts.DeterministicObjective)
	bestI := 0
	for i, v := range y {
		if v > y[bestI] {
			bestI = i
		}
	}
	f0 := y[bestI]
	if len(running) > 0 {
		x := append(slices.Clone(done), running...)
		believed := slices.Clone(y)
		for _, r := range running {
			mean, _ := m.posterior(r, false, nil, nil)
			believed = append(believed, mean)
		}
		if b, ok := newModel(x, believed, cat, m.kernelParams); ok {
			m = b
		}
	}
	return newAcquisition(m, f0, s.modeled).optimize(rng, done[bestI])
}

// standardize signs values so that larger is better and scales them to
// mean 0 and standard deviation 1 (population; at least 10⁻¹⁰).
func standardize(values []float64, maximize bool) []float64 {
	sign := -1.0
	if maximize {
		sign = 1
	}
	var mean float64
	for _, v := range values {
		mean += sign * v
	}
	mean /= float64(len(values))
	var ss float64
	for _, v := range values {
		d := sign*v - mean
		ss += d * d
	}
	sd := max(math.Sqrt(ss/float64(len(values))), 1e-10)
	out := make([]float64, len(values))
	for i, v := range values {
		out[i] = (sign*v - mean) / sd
	}
	return out
}
