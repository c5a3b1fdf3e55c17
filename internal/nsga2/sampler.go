package nsga2

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tunejet/tunejet/internal/moo"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/tpe"
)

// Options are NSGA-II's knobs, with Optuna's names. Start from Defaults.
type Options struct {
	// PopulationSize is the number of trials of a generation, and of the
	// parent population (>= 2).
	PopulationSize int `json:"population_size"`
	// MutationProb is the probability that a child's parameter is drawn
	// at random instead of inherited; negative for Optuna's default,
	// 1/max(1, number of parameters), counting the parameters that have
	// more than one value.
	MutationProb float64 `json:"mutation_prob"`
	// CrossoverProb is the probability that a child is bred from two
	// parents; otherwise it copies one parent, picked uniformly.
	CrossoverProb float64 `json:"crossover_prob"`
	// SwappingProb is the uniform crossover's probability that a
	// parameter comes from the first parent rather than the second
	// (Optuna's mask: a uniform draw >= swapping_prob takes the second).
	SwappingProb float64 `json:"swapping_prob"`
}

// Defaults are Optuna's NSGAIISampler defaults.
func Defaults() Options {
	return Options{PopulationSize: 50, MutationProb: -1, CrossoverProb: 0.9, SwappingProb: 0.5}
}

// Sampler suggests configs for one param space. It is immutable and safe
// for concurrent use.
type Sampler struct {
	opts    Options
	space   *search.Space
	dims    []*dim // one per domain, in the order of Space.Domains
	modeled []*dim // the dims with more than one value
}

// New returns a Sampler for space. It refuses options out of range, and a
// space with grid_search, randn or qrandn domains with a *settings.Error
// naming the key.
func New(space *search.Space, opts Options) (*Sampler, error) {
	prob := func(p float64) bool { return p >= 0 && p <= 1 }
	switch {
	case opts.PopulationSize < 2:
		return nil, fmt.Errorf("nsga2: population_size (%d) must be >= 2", opts.PopulationSize)
	case math.IsNaN(opts.MutationProb) || opts.MutationProb > 1:
		return nil, fmt.Errorf("nsga2: mutation_prob (%v) must be at most 1, or negative for the default", opts.MutationProb)
	case !prob(opts.CrossoverProb):
		return nil, fmt.Errorf("nsga2: crossover_prob (%v) must be within [0, 1]", opts.CrossoverProb)
	case !prob(opts.SwappingProb):
		return nil, fmt.Errorf("nsga2: swapping_prob (%v) must be within [0, 1]", opts.SwappingProb)
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

// member is a Complete trial with usable values.
type member struct {
	number int
	values []float64
	config map[string]any
}

// Suggest returns the config of the next trial given the history, every
// trial the controller knows of. The next trial is numbered one past the
// largest number in the history (0 without any), and belongs to
// generation number / PopulationSize. Generation 0 is drawn at random; a
// later one breeds children from its parent population, which Suggest
// rebuilds from the history each time (see the package doc). Every random
// number comes from rng, which Suggest advances and never keeps: the same
// history and an rng in the same state give the same config.
func (s *Sampler) Suggest(history []tpe.Trial, rng *rand.Rand) map[string]any {
	next := 0
	for _, t := range history {
		next = max(next, t.Number+1)
	}
	return s.SuggestFor(next, history, rng)
}

// SuggestFor is Suggest for the trial numbered number, whose generation is
// number / PopulationSize: the controller says which trial it asks for,
// as the history may end before it (tune_config.reproducible passes the
// trials numbered up to number − max_concurrent_trials alone).
func (s *Sampler) SuggestFor(number int, history []tpe.Trial, rng *rand.Rand) map[string]any {
	parents := s.parents(history, number/s.opts.PopulationSize)
	values := make([]any, len(s.dims))
	for _, d := range s.dims {
		if d.fixed {
			values[d.index] = d.random(rng) // its one value; draws nothing
		}
	}
	if len(parents) == 0 {
		for _, d := range s.modeled {
			values[d.index] = d.random(rng)
		}
	} else {
		s.child(parents, rng, values)
	}
	config, err := s.space.Config(values)
	if err != nil {
		panic(err) // one value per domain, by construction
	}
	return config
}

// members returns the Complete trials of the history with as many finite
// or infinite (not NaN) values as the first such trial has, in trial-number
// order, by generation: those numbered below 0 (warm starts, evaluated
// points) under −1.
func (s *Sampler) members(history []tpe.Trial) map[int][]member {
	trials := slices.Clone(history)
	slices.SortStableFunc(trials, func(a, b tpe.Trial) int { return cmp.Compare(a.Number, b.Number) })
	byGen := map[int][]member{}
	m := 0 // the number of objectives
	for _, t := range trials {
		if t.State != tpe.Complete || len(t.Values) == 0 || slices.ContainsFunc(t.Values, math.IsNaN) {
			continue
		}
		if m == 0 {
			m = len(t.Values)
		}
		if len(t.Values) != m {
			continue
		}
		g := -1
		if t.Number >= 0 {
			g = t.Number / s.opts.PopulationSize
		}
		byGen[g] = append(byGen[g], member{t.Number, t.Values, t.Config})
	}
	return byGen
}

// parents returns the parent population of generation g, in trial-number
// order: nothing for generation 0; for a later one, the elite of the
// Complete trials of generation g − 1 and of g − 1's parents, which for
// generation 1 are the warm starts (Optuna's BaseGASampler
// get_parent_population and NSGAIISampler.select_parent).
func (s *Sampler) parents(history []tpe.Trial, g int) []member {
	if g <= 0 {
		return nil
	}
	byGen := s.members(history)
	parents := byGen[-1]
	for gen := 1; gen <= g; gen++ {
		parents = s.elite(append(slices.Clone(byGen[gen-1]), parents...))
	}
	return parents
}

// elite is NSGA-II's elite selection (Optuna's
// NSGAIIElitePopulationSelectionStrategy, optuna/samplers/nsgaii/
// _elite_population_selection_strategy.py, commit 1d8ce7bb): whole
// non-domination ranks, best first, while they fit in PopulationSize, then
// the members of the next rank with the largest crowding distances. It
// returns them in trial-number order, as Optuna reads a cached parent
// population back.
func (s *Sampler) elite(pop []member) []member {
	points := make([][]float64, len(pop))
	for i, p := range pop {
		points[i] = p.values
	}
	ranks := moo.Ranks(points)
	byRank := map[int][]int{}
	for i, r := range ranks {
		byRank[r] = append(byRank[r], i)
	}
	var out []member
	for r := 0; len(out) < s.opts.PopulationSize && len(byRank[r]) > 0; r++ {
		group := byRank[r]
		if len(out)+len(group) < s.opts.PopulationSize {
			for _, i := range group {
				out = append(out, pop[i])
			}
			continue
		}
		sub := make([][]float64, len(group))
		for j, i := range group {
			sub[j] = points[i]
		}
		for _, j := range moo.CrowdingOrder(sub)[:s.opts.PopulationSize-len(out)] {
			out = append(out, pop[group[j]])
		}
	}
	slices.SortFunc(out, func(a, b member) int { return cmp.Compare(a.number, b.number) })
	return out
}

// child breeds a child of parents into values (Optuna's
// NSGAIIChildGenerationStrategy with UniformCrossover and no mutation
// operator, optuna/samplers/nsgaii/_child_generation_strategy.py and
// _crossover.py, commit 1d8ce7bb): with CrossoverProb, two parents picked
// by binary tournament and each parameter taken from the second with
// 1 − SwappingProb (the categorical parameters first, then the numeric
// ones, as Optuna draws them); otherwise a copy of one parent, picked uniformly.
// Then each parameter is drawn at random with MutationProb. A parameter
// the parent has no usable value of is drawn at random too.
func (s *Sampler) child(parents []member, rng *rand.Rand, values []any) {
	var from []*member // the parent each modeled dim inherits from
	ordered := s.modeled
	if rng.Float64() < s.opts.CrossoverProb {
		p0 := tournament(parents, -1, rng)
		p1 := tournament(parents, p0, rng)
		// Optuna crosses the categorical parameters, then the numeric ones.
		ordered = nil
		for _, cat := range []bool{true, false} {
			for _, d := range s.modeled {
				if d.cat == cat {
					ordered = append(ordered, d)
				}
			}
		}
		for range ordered {
			p := &parents[p0]
			if rng.Float64() >= s.opts.SwappingProb {
				p = &parents[p1]
			}
			from = append(from, p)
		}
	} else {
		p := &parents[rng.IntN(len(parents))]
		for range ordered {
			from = append(from, p)
		}
	}
	mutation := s.opts.MutationProb
	if mutation < 0 {
		mutation = 1 / float64(max(1, len(s.modeled)))
	}
	for j, d := range ordered {
		v, ok := d.value(from[j].config)
		if rng.Float64() < mutation || !ok {
			v = d.random(rng)
		}
		values[d.index] = v
	}
}

// tournament is Optuna's _select_parent: two members drawn uniformly (with
// replacement) from parents but skip, the first unless it dominates the
// second. skip is −1 for none; a population of one is its own second
// parent.
func tournament(parents []member, skip int, rng *rand.Rand) int {
	pool := make([]int, 0, len(parents))
	for i := range parents {
		if i != skip {
			pool = append(pool, i)
		}
	}
	if len(pool) == 0 {
		return skip
	}
	c0, c1 := pool[rng.IntN(len(pool))], pool[rng.IntN(len(pool))]
	if moo.Dominates(parents[c0].values, parents[c1].values) {
		return c0
	}
	return c1
}
