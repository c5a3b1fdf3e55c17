package tuning

import (
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/nsga2"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/settings"
)

// SearchNSGA2 is Optuna's NSGA-II sampler, native (internal/nsga2):
// Optuna's default for several metrics.
const SearchNSGA2 = "nsga2"

// NSGA2Config is search_alg nsga2's settings: nsga2.Options by Optuna's
// names (population_size, mutation_prob, crossover_prob, swapping_prob) on
// top of nsga2.Defaults, and seed. The metrics and modes are tune_config's.
type NSGA2Config struct {
	nsga2.Options
	seed *int64
}

func init() {
	registerSearch(SearchNSGA2, func() searchConfig { return &NSGA2Config{Options: nsga2.Defaults()} })
}

// Settings reads mutation_prob (null is Optuna's default, 1/number of
// parameters) and seed, refuses metric and mode, which are tune_config's,
// and Optuna's settings that take Python objects.
func (c *NSGA2Config) Settings() settings.Fields {
	pythonOnly := func(p *settings.Problems, _ any) {
		p.Add("", "takes a Python object in Optuna's NSGAIISampler and is not supported; nsga2 uses Optuna's defaults for it")
	}
	return settings.Fields{
		"mutation_prob": func(p *settings.Problems, v any) {
			f, ok := settings.Finite(v)
			if !ok || f < 0 || f > 1 {
				p.Add("", "must be a probability within [0, 1], or null for 1/number of parameters, got %s", settings.Describe(v))
				return
			}
			c.MutationProb = f
		},
		"seed":                                seedReader(&c.seed),
		"metric":                              notTuneConfigs(SearchNSGA2),
		"mode":                                notTuneConfigs(SearchNSGA2),
		"crossover":                           pythonOnly,
		"constraints_func":                    pythonOnly,
		"elite_population_selection_strategy": pythonOnly,
		"child_generation_strategy":           pythonOnly,
		"after_trial_strategy":                pythonOnly,
	}
}

// New builds the NSGA-II sampler of the space: every problem is a
// *settings.Error at its param_space key.
func (c *NSGA2Config) New(space *search.Space) (*nsga2.Sampler, error) {
	s, err := nsga2.New(space, c.Options)
	if err != nil {
		return nil, settings.Prefix("param_space", err)
	}
	return s, nil
}

// check applies Optuna's ranges and the rules that involve tune_config.
func (c *NSGA2Config) check(p *settings.Problems, tc events.TuneConfig) {
	at := p.Under(keySearchAlg)
	at.AtLeast("population_size", c.PopulationSize, 2)
	for _, f := range []struct {
		key string
		v   float64
	}{{"crossover_prob", c.CrossoverProb}, {"swapping_prob", c.SwappingProb}} {
		at.Check(f.v >= 0 && f.v <= 1, f.key, "must be a probability within [0, 1], got %v", f.v)
	}
	checkSeed(at, SearchNSGA2, c.seed, tc)
	needObjective(tc, p)
}
