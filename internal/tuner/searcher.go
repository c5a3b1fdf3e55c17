package tuner

import (
	"strings"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/tpe"
)

// The search algorithm names of tune_config.search_alg.
const (
	SearchRandom = "random"
	SearchGrid   = "grid"
	SearchTPE    = "tpe"
	// SearchExternal asks a NATS service for each new trial's config.
	SearchExternal = "external"
)

// SearchAlgNames lists the names tune_config.search_alg takes.
var SearchAlgNames = []string{SearchRandom, SearchGrid, SearchTPE, SearchExternal}

// The values of tpe's gamma setting.
const (
	gammaDefault  = "default"
	gammaHyperopt = "hyperopt"
)

// Searcher builds the model-based searcher spec names: nil for random and
// grid (the basic variant generator of internal/search), a TPE sampler for
// tpe. TPE's Options start from tpe.Defaults and take the settings of
// SearchAlgConfig by Optuna's names: n_startup_trials, n_ei_candidates,
// gamma ("default" or "hyperopt"), prior_weight, consider_prior,
// consider_magic_clip, consider_endpoints, multivariate, constant_liar and
// seed. The mode is tune_config's. Every problem is a *KeyError (joined).
func Searcher(spec *events.ExperimentSpec, space *search.Space) (*tpe.Sampler, error) {
	p := &problems{}
	opts, ok := searchOptions(spec, p)
	if !ok || p.err() != nil {
		return nil, p.err()
	}
	s, err := tpe.New(space, opts)
	p.addErr("param_space", err)
	if err := p.err(); err != nil {
		return nil, err
	}
	return s, nil
}

// searchOptions reads the search algorithm's settings into p; ok is true
// for tpe.
func searchOptions(spec *events.ExperimentSpec, p *problems) (opts tpe.Options, ok bool) {
	tc := spec.TuneConfig
	set := settings{prefix: keySearchAlg, name: tc.SearchAlg, p: p}
	switch tc.SearchAlg {
	case "", SearchRandom, SearchGrid:
		if set.name == "" {
			set.name = SearchRandom
		}
		set.read(tc.SearchAlgConfig, nil)
		return opts, false
	case SearchTPE:
	case SearchExternal:
		externalOptions(spec, p)
		return opts, false
	default:
		p.add(keySearchAlg, "unknown search algorithm %q%s; valid: %s", tc.SearchAlg,
			didYouMean(tc.SearchAlg, SearchAlgNames), strings.Join(SearchAlgNames, ", "))
		return opts, false
	}
	opts = tpe.Defaults()
	considerPrior := true
	set.read(tc.SearchAlgConfig, map[string]reader{
		"n_startup_trials":    set.integer(&opts.NStartupTrials),
		"n_ei_candidates":     set.integer(&opts.NEICandidates),
		"gamma":               gamma(set, &opts),
		"prior_weight":        set.number(&opts.PriorWeight),
		"consider_prior":      set.boolean(&considerPrior),
		"consider_magic_clip": set.boolean(&opts.ConsiderMagicClip),
		"consider_endpoints":  set.boolean(&opts.ConsiderEndpoints),
		"multivariate":        set.boolean(&opts.Multivariate),
		"constant_liar":       set.boolean(&opts.ConstantLiar),
		"seed":                seed(set, tc.Seed),
		"metric": func(key string, _ any) {
			p.add(key, "tpe takes tune_config's metric and mode: set tune_config.metric instead")
		},
		"mode": func(key string, _ any) {
			p.add(key, "tpe takes tune_config's metric and mode: set tune_config.mode instead")
		},
	})
	if opts.NStartupTrials < 0 {
		p.add(set.key("n_startup_trials"), "must be >= 0, got %d", opts.NStartupTrials)
	}
	if opts.NEICandidates < 1 {
		p.add(set.key("n_ei_candidates"), "must be >= 1, got %d", opts.NEICandidates)
	}
	if opts.PriorWeight < 0 {
		p.add(set.key("prior_weight"), "must be >= 0, got %v", opts.PriorWeight)
	}
	if !considerPrior {
		// Optuna 4 deprecated consider_prior=False and Optuna 5 removed it:
		// the prior kernel is always there; prior_weight sets its weight.
		p.add(set.key("consider_prior"), "false is not supported (Optuna deprecated it); lower prior_weight instead")
	}
	needObjective(tc, p)
	opts.Maximize = tc.Mode == "max"
	return opts, true
}

// needObjective adds a problem when tune_config's metric or mode, which
// the search algorithm learns from, is unset or invalid.
func needObjective(tc events.TuneConfig, p *problems) {
	if tc.Metric == "" {
		p.add(keyMetric, "required by search_alg %q: set tune_config.metric", tc.SearchAlg)
	}
	switch tc.Mode {
	case "":
		p.add(keyMode, "required by search_alg %q: set tune_config.mode to \"min\" or \"max\"", tc.SearchAlg)
	case "min", "max":
	default:
		p.add(keyMode, "must be \"min\" or \"max\", got %q", tc.Mode)
	}
}

// DefaultExternalTimeout is how long the controller waits for an external
// searcher's answer when timeout_s is unset.
const DefaultExternalTimeout = 10 * time.Second

// ExternalConfig is search_alg external: the NATS subject of the service
// that suggests each new trial's config, and how long to wait for it.
type ExternalConfig struct {
	Subject string
	Timeout time.Duration
}

// External reads search_alg external's settings: subject (required, a
// NATS subject without wildcards) and timeout_s (> 0, default 10). It
// returns nil when the search algorithm is another. Every problem is a
// *KeyError (joined).
func External(spec *events.ExperimentSpec) (*ExternalConfig, error) {
	if spec.TuneConfig.SearchAlg != SearchExternal {
		return nil, nil
	}
	p := &problems{}
	cfg := externalOptions(spec, p)
	if err := p.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func externalOptions(spec *events.ExperimentSpec, p *problems) *ExternalConfig {
	tc := spec.TuneConfig
	set := settings{prefix: keySearchAlg, name: SearchExternal, p: p}
	cfg := &ExternalConfig{Timeout: DefaultExternalTimeout}
	timeout := cfg.Timeout.Seconds()
	set.read(tc.SearchAlgConfig, map[string]reader{
		"subject":   set.str(&cfg.Subject),
		"timeout_s": set.number(&timeout),
	})
	if !validSubject(cfg.Subject) {
		p.add(set.key("subject"), "required: the NATS subject the searcher answers, dot-separated tokens without spaces or wildcards, got %q", cfg.Subject)
	}
	if timeout <= 0 {
		p.add(set.key("timeout_s"), "must be > 0, got %v", timeout)
	}
	cfg.Timeout = time.Duration(timeout * float64(time.Second))
	needObjective(tc, p)
	return cfg
}

// validSubject reports whether s is a NATS subject a request can be sent
// to: non-empty tokens separated by dots, without whitespace or wildcards.
func validSubject(s string) bool {
	if s == "" {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return false
		}
	}
	return true
}

// gamma reads "default" (Optuna's default_gamma) or "hyperopt"
// (hyperopt_default_gamma).
func gamma(set settings, opts *tpe.Options) reader {
	return func(key string, v any) {
		switch v {
		case gammaDefault:
			opts.Gamma = tpe.DefaultGamma
		case gammaHyperopt:
			opts.Gamma = tpe.HyperoptGamma
		default:
			set.p.add(key, "must be %q (min(ceil(0.1 n), 25)) or %q (min(ceil(0.25 sqrt(n)), 25)), got %s",
				gammaDefault, gammaHyperopt, describe(v))
		}
	}
}

// seed reads Optuna's seed. TPE draws from generators seeded from the
// experiment's seed, so a seed here must be that seed (the experiment file
// copies it to tune_config.seed when that is unset).
func seed(set settings, experiment *int64) reader {
	return func(key string, v any) {
		n, ok := toInt(v)
		switch {
		case !ok:
			set.p.add(key, "expected an integer, got %s", describe(v))
		case experiment == nil:
			set.p.add(key, "tpe draws from the experiment's seed: set tune_config.seed to %d instead", n)
		case int64(n) != *experiment:
			set.p.add(key, "must equal tune_config.seed (%d), which tpe draws from, got %d; set only one of them", *experiment, n)
		}
	}
}
