package tuning

import (
	"strconv"
	"strings"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/settings"
	"github.com/tunejet/tunejet/internal/tpe"
)

// SearchTPE is Optuna's TPE sampler, native (internal/tpe).
const SearchTPE = "tpe"

// The values of tpe's gamma setting.
const (
	gammaDefault  = "default"
	gammaHyperopt = "hyperopt"
)

// TPEConfig is search_alg tpe's settings: tpe.Options by Optuna's names
// (n_startup_trials, n_ei_candidates, gamma, prior_weight, consider_prior,
// consider_magic_clip, consider_endpoints, multivariate, constant_liar,
// seed) on top of tpe.Defaults, and Ray's evaluated_rewards. The mode is
// tune_config's.
type TPEConfig struct {
	tpe.Options
	// EvaluatedRewards are the metric values of points_to_evaluate, as
	// Ray's OptunaSearch takes them: those points are then known, not run,
	// and TPE learns from them as completed trials.
	EvaluatedRewards []float64 `json:"evaluated_rewards"`
	considerPrior    bool
	seed             *int64
}

func init() {
	registerSearch(SearchTPE, func() searchConfig { return &TPEConfig{Options: tpe.Defaults(), considerPrior: true} })
}

// Settings reads the settings tpe.Options' fields cannot: gamma,
// consider_prior and seed, and refuses metric and mode, which are
// tune_config's.
func (c *TPEConfig) Settings() settings.Fields {
	return settings.Fields{
		"gamma": func(p *settings.Problems, v any) {
			switch v {
			case gammaDefault:
				c.Gamma = tpe.DefaultGamma
			case gammaHyperopt:
				c.Gamma = tpe.HyperoptGamma
			default:
				p.Add("", "must be %q (min(ceil(0.1 n), 25)) or %q (min(ceil(0.25 sqrt(n)), 25)), got %s",
					gammaDefault, gammaHyperopt, settings.Describe(v))
			}
		},
		"consider_prior": func(p *settings.Problems, v any) {
			b, ok := v.(bool)
			if !ok {
				p.Add("", "expected a boolean, got %s", settings.Describe(v))
				return
			}
			c.considerPrior = b
		},
		"seed":   seedReader(&c.seed),
		"metric": notTuneConfigs(SearchTPE),
		"mode":   notTuneConfigs(SearchTPE),
	}
}

// New builds the TPE sampler of the space: every problem is a
// *settings.Error at its param_space key.
func (c *TPEConfig) New(space *search.Space) (*tpe.Sampler, error) {
	s, err := tpe.New(space, c.Options)
	if err != nil {
		return nil, settings.Prefix("param_space", err)
	}
	return s, nil
}

// check applies TPE's ranges and the rules that involve tune_config.
func (c *TPEConfig) check(p *settings.Problems, tc events.TuneConfig) {
	at := p.Under(keySearchAlg)
	at.AtLeast("n_startup_trials", c.NStartupTrials, 0)
	at.AtLeast("n_ei_candidates", c.NEICandidates, 1)
	at.Check(c.PriorWeight >= 0, "prior_weight", "must be >= 0, got %v", c.PriorWeight)
	// Optuna 4 deprecated consider_prior=False and Optuna 5 removed it: the
	// prior kernel is always there; prior_weight sets its weight.
	at.Check(c.considerPrior, "consider_prior", "false is not supported (Optuna deprecated it); lower prior_weight instead")
	checkSeed(at, SearchTPE, c.seed, tc)
	if n := len(c.EvaluatedRewards); n > 0 {
		at.Check(!tc.MultiObjective(), "evaluated_rewards", "not supported with several metrics: each point would need a value per metric")
		at.Check(n == len(tc.PointsToEvaluate), "evaluated_rewards",
			"must give a value for each of the %d points_to_evaluate, got %d", len(tc.PointsToEvaluate), n)
	}
	needObjective(tc, p)
	c.Maximize = tc.Mode == "max"
	if tc.MultiObjective() {
		// MOTPE's defaults where the file sets none (tpe.MultiObjectiveDefaults).
		mo := tpe.MultiObjectiveDefaults()
		if _, given := tc.SearchAlgConfig["n_ei_candidates"]; !given {
			c.NEICandidates = mo.NEICandidates
		}
		if _, given := tc.SearchAlgConfig["gamma"]; !given {
			c.Gamma = mo.Gamma
		}
	}
}

// Evaluated returns points_to_evaluate with their evaluated_rewards as
// completed trials, numbered before the experiment's first (-n to -1), for
// TPE's history; nil without evaluated_rewards. Each point must give every
// domain of the space a value.
func (c *TPEConfig) Evaluated(space *search.Space, paramSpace map[string]any, points []map[string]any) ([]tpe.Trial, error) {
	if len(c.EvaluatedRewards) == 0 {
		return nil, nil
	}
	out := make([]tpe.Trial, 0, len(points))
	for i, point := range points {
		config, err := SuggestedConfig(paramSpace, space, point)
		if err != nil {
			return nil, err // checkEvaluated refused it
		}
		out = append(out, tpe.Trial{Number: i - len(points), State: tpe.Complete, Config: config, Value: c.EvaluatedRewards[i]})
	}
	return out, nil
}

// checkEvaluated checks that, with evaluated_rewards, each point to
// evaluate gives every domain a value: Optuna adds it as a completed trial.
func (c *TPEConfig) checkEvaluated(space *search.Space, points []map[string]any, p *settings.Problems) {
	if len(c.EvaluatedRewards) == 0 {
		return
	}
	for i, point := range points {
		for _, d := range space.Domains() {
			if _, ok := d.Lookup(point); !ok {
				p.Add(keyPoints+"."+strconv.Itoa(i)+"."+strings.Join(d.Path, "."),
					"missing: with evaluated_rewards each point is a trial already run, and gives every domain of param_space a value")
			}
		}
	}
}
