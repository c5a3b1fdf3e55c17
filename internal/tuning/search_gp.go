package tuning

import (
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/gp"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/settings"
)

// The names of Gaussian-process search (internal/gp): Ray's BayesOptSearch,
// and the short name.
const (
	SearchBayesOpt = "bayesopt"
	SearchGP       = "gp"
)

// GPConfig is search_alg bayesopt's settings: gp.Options by Optuna's
// GPSampler names (n_startup_trials, deterministic_objective) on top of
// gp.Defaults, Ray's BayesOptSearch name random_search_steps for
// n_startup_trials, and seed. The mode is tune_config's.
type GPConfig struct {
	gp.Options
	seed         *int64
	randomSteps  *int
	startupGiven bool
}

func init() {
	for _, name := range []string{SearchBayesOpt, SearchGP} {
		registerSearch(name, func() searchConfig { return &GPConfig{Options: gp.Defaults()} })
	}
}

// Settings reads seed and Ray's random_search_steps, and refuses metric
// and mode, which are tune_config's, and Ray's BayesOptSearch settings
// that have no meaning here.
func (c *GPConfig) Settings() settings.Fields {
	notHere := func(why string) settings.Reader {
		return func(p *settings.Problems, _ any) { p.Add("", "%s", why) }
	}
	return settings.Fields{
		"n_startup_trials": func(p *settings.Problems, v any) {
			n, ok := settings.Int(v)
			if !ok {
				p.Add("", "expected an integer, got %s", settings.Describe(v))
				return
			}
			c.NStartupTrials, c.startupGiven = n, true
		},
		"random_search_steps": func(p *settings.Problems, v any) {
			n, ok := settings.Int(v)
			if !ok {
				p.Add("", "expected an integer, got %s", settings.Describe(v))
				return
			}
			c.randomSteps = &n
		},
		"seed":   seedReader(&c.seed),
		"metric": notTuneConfigs(SearchBayesOpt),
		"mode":   notTuneConfigs(SearchBayesOpt),
		"utility_kwargs": notHere("bayesopt maximizes log expected improvement (Optuna's GPSampler); " +
			"BayesOptSearch's utility functions (ucb, ei, poi) and their kappa and xi are not supported"),
		"patience": notHere("not supported: bayesopt suggests until num_samples, as search_alg tpe does"),
		"skip_duplicate": notHere("not supported: bayesopt's suggestions are maximizers of the acquisition, " +
			"and a repeat of a finished config has no expected improvement"),
	}
}

// New builds the GP sampler of the space: every problem is a
// *settings.Error at its param_space key.
func (c *GPConfig) New(space *search.Space) (*gp.Sampler, error) {
	s, err := gp.New(space, c.Options)
	if err != nil {
		return nil, settings.Prefix("param_space", err)
	}
	return s, nil
}

// check applies the ranges and the rules that involve tune_config.
func (c *GPConfig) check(p *settings.Problems, tc events.TuneConfig) {
	at := p.Under(keySearchAlg)
	if c.randomSteps != nil {
		if c.startupGiven {
			at.Add("random_search_steps", "is Ray's name for n_startup_trials: set only one of them")
		}
		c.NStartupTrials = *c.randomSteps
	}
	at.AtLeast("n_startup_trials", c.NStartupTrials, 0)
	checkSeed(at, SearchBayesOpt, c.seed, tc)
	oneObjective(SearchBayesOpt, tc, p)
	needObjective(tc, p)
	c.Maximize = tc.Mode == "max"
}
