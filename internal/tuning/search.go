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
// trials so far in the controller (tpe, bayesopt): its suggestions are
// functions of the log.
func ModelBased(name string) bool {
	switch name {
	case SearchTPE, SearchBayesOpt, SearchGP:
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
	if tc.Metric == "" {
		p.Add(keyMetric, "required by search_alg %q: set tune_config.metric", tc.SearchAlg)
	}
	if tc.Mode == "" {
		p.Add(keyMode, "required by search_alg %q: set tune_config.mode to \"min\" or \"max\"", tc.SearchAlg)
		return
	}
	p.OneOf(keyMode, tc.Mode, "min", "max")
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
