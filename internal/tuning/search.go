package tuning

import (
	"maps"
	"slices"
	"strings"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/settings"
)

// searchConfig is a search algorithm's settings, holding its defaults
// until settings.Decode reads the experiment file's into it; check applies
// the rules that need tune_config.
type searchConfig interface {
	check(p *settings.Problems, tc events.TuneConfig)
}

// searchKinds maps each name tune_config.search_alg takes to its config
// with defaults. Each search algorithm's file registers itself.
var searchKinds = map[string]func() searchConfig{}

// registerSearch makes the search algorithm of newConfig known by name.
func registerSearch(name string, newConfig func() searchConfig) {
	if _, dup := searchKinds[name]; dup {
		panic("tuner: search algorithm " + name + " registered twice")
	}
	searchKinds[name] = newConfig
}

// ModelBased reports whether the search algorithm name learns from the
// trials so far in the controller (tpe, bayesopt, nsga2): its suggestions
// are functions of the log.
func ModelBased(name string) bool {
	switch name {
	case SearchTPE, SearchBayesOpt, SearchGP, SearchNSGA2:
		return true
	}
	return false
}

// SearchAlgNames lists the names tune_config.search_alg takes, sorted.
func SearchAlgNames() []string { return slices.Sorted(maps.Keys(searchKinds)) }

// readSearch reads the settings of the search algorithm
// tune_config.search_alg names (random when unset) and records every
// problem in p. It returns nil for the basic variant generator (random and
// grid), which takes no settings.
func readSearch(spec *events.ExperimentSpec, p *settings.Problems) any {
	tc := spec.TuneConfig
	name := tc.SearchAlg
	if name == "" {
		name = SearchRandom
	}
	newConfig, ok := searchKinds[name]
	if !ok {
		p.Add(keySearchAlg, "unknown search algorithm %q%s; valid: %s", name,
			didYouMean(name, SearchAlgNames()), strings.Join(SearchAlgNames(), ", "))
		return nil
	}
	cfg := newConfig()
	settings.Decode(p.Under(keySearchAlg), name, tc.SearchAlgConfig, cfg)
	cfg.check(p, tc)
	if _, basic := cfg.(*basicConfig); basic {
		return nil
	}
	return cfg
}

// needObjective records a problem when tune_config's metric or mode, which
// the search algorithm learns from, is unset or invalid.
func needObjective(tc events.TuneConfig, p *settings.Problems) {
	if tc.MultiObjective() {
		if len(tc.Modes) == 0 {
			p.Add(keyMode, "required by search_alg %q: set tune_config.mode to a list of %d modes, one for each metric", tc.SearchAlg, len(tc.Metrics))
		}
		return
	}
	if tc.Metric == "" {
		p.Add(keyMetric, "required by search_alg %q: set tune_config.metric", tc.SearchAlg)
	}
	if tc.Mode == "" {
		p.Add(keyMode, "required by search_alg %q: set tune_config.mode to \"min\" or \"max\"", tc.SearchAlg)
		return
	}
	p.OneOf(keyMode, tc.Mode, "min", "max")
}

// oneObjective records a problem when tune_config names several metrics
// and search algorithm alg optimizes one.
func oneObjective(alg string, tc events.TuneConfig, p *settings.Problems) {
	if tc.MultiObjective() {
		p.Add(keyMetric, "search_alg %q optimizes one metric, and tune_config.metric lists %d (%s): "+
			"use search_alg tpe, nsga2 or random with several metrics", alg, len(tc.Metrics), strings.Join(tc.Metrics, ", "))
	}
}

// seedReader reads a model-based searcher's seed setting into *dst.
func seedReader(dst **int64) settings.Reader {
	return func(p *settings.Problems, v any) {
		n, ok := settings.Int(v)
		if !ok {
			p.Add("", "expected an integer, got %s", settings.Describe(v))
			return
		}
		*dst = new(int64(n))
	}
}

// notTuneConfigs refuses a metric or mode among search algorithm alg's
// settings: they are tune_config's.
func notTuneConfigs(alg string) settings.Reader {
	return func(p *settings.Problems, _ any) {
		p.Add("", "%s takes tune_config's metric and mode: set tune_config.%s instead", alg, p.Key("")[len(keySearchAlg)+1:])
	}
}

// checkSeed checks search algorithm alg's seed setting against
// tune_config.seed: the model-based searchers draw from generators seeded
// from the experiment's seed, so a seed of theirs must be that seed (the
// experiment file copies it to tune_config.seed when that is unset).
func checkSeed(at *settings.Problems, alg string, seed *int64, tc events.TuneConfig) {
	switch {
	case seed == nil:
	case tc.Seed == nil:
		at.Add("seed", "%s draws from the experiment's seed: set tune_config.seed to %d instead", alg, *seed)
	case *seed != *tc.Seed:
		at.Add("seed", "must equal tune_config.seed (%d), which %s draws from, got %d; set only one of them", *tc.Seed, alg, *seed)
	}
}

// The basic variant generator's names.
const (
	SearchRandom = "random"
	SearchGrid   = "grid"
)

// basicConfig is random's and grid's settings: there are none.
type basicConfig struct{}

func (*basicConfig) check(*settings.Problems, events.TuneConfig) {}

func init() {
	registerSearch(SearchRandom, func() searchConfig { return &basicConfig{} })
	registerSearch(SearchGrid, func() searchConfig { return &basicConfig{} })
}
