package tuning

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/sched"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/settings"
	"github.com/tunejet/tunejet/internal/stopper"
	"github.com/tunejet/tunejet/internal/tpe"
)

// Keys for the settings, as the experiment file spells them.
const (
	keySearchAlg = "tune_config.search_alg"
	keyScheduler = "tune_config.scheduler"
	keyPoints    = keySearchAlg + ".points_to_evaluate"
	keyStoppers  = "run_config.stoppers"
	keyMetric    = "tune_config.metric"
	keyMode      = "tune_config.mode"
)

// Settings are an experiment's scheduler, search algorithm and stoppers,
// read from its spec and checked once.
type Settings struct {
	// Scheduler is the scheduler's config: FIFO's when the spec names none.
	Scheduler sched.Config
	// Search is the search algorithm's config: a *TPEConfig, a *GPConfig
	// or an *ExternalConfig, or nil for random and grid (the basic variant
	// generator of internal/search).
	Search any
	// SampleFrom is set when the param space has sample_from domains,
	// which the driver resolves for each new trial.
	SampleFrom bool
	// stopper is the stoppers as parsed, before any result; nil without.
	stopper stopper.Stopper
}

// NewStopper returns a fresh copy of the spec's stoppers, with no state:
// nil when the spec has none.
func (s *Settings) NewStopper() (stopper.Stopper, error) {
	if s.stopper == nil {
		return nil, nil
	}
	b, err := stopper.Marshal(s.stopper)
	if err != nil {
		return nil, fmt.Errorf("stoppers: %w", err)
	}
	return stopper.Unmarshal(b)
}

// TPE returns search_alg tpe's settings, if the search is tpe; nil-safe.
func (s *Settings) TPE() (*TPEConfig, bool) {
	if s == nil {
		return nil, false
	}
	t, ok := s.Search.(*TPEConfig)
	return t, ok
}

// Suggester is a model-based search algorithm in the controller: TPE
// (internal/tpe) or the GP (internal/gp). A suggestion is a function of the
// history (finished trials and those in flight, as TPE's Trial records
// them) and of rng alone, so that a restored experiment suggests what it
// would have.
type Suggester interface {
	Suggest(history []tpe.Trial, rng *rand.Rand) map[string]any
}

// Sampler builds the model-based searcher of space for search_alg tpe,
// bayesopt and nsga2; it is nil for other search algorithms.
func (s *Settings) Sampler(space *search.Space) (Suggester, error) {
	if s == nil {
		return nil, nil
	}
	switch c := s.Search.(type) {
	case *TPEConfig:
		return c.New(space)
	case *GPConfig:
		return c.New(space)
	case *NSGA2Config:
		return c.New(space)
	}
	return nil, nil
}

// Parse reads and checks the spec's scheduler, search algorithm,
// points_to_evaluate and stoppers. Every problem is a *settings.Error
// (joined) at the dotted key the experiment file spells, e.g.
// "tune_config.scheduler.grace_peroid: unknown key, did you mean
// "grace_period"?"; with a problem the Settings are nil.
func Parse(spec *events.ExperimentSpec) (*Settings, error) {
	s, p := read(spec)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Check returns every problem Parse finds, each at its dotted key as the
// experiment file spells it: tune_config.scheduler.<key>,
// tune_config.search_alg.<key>,
// tune_config.search_alg.points_to_evaluate.<i>.<key> and
// run_config.stoppers.<i>.<key>, or tune_config.metric and
// tune_config.mode when a scheduler or a searcher needs them. The
// param_space's own problems are left to its parser: with a broken space,
// the checks that need it are skipped.
func Check(spec *events.ExperimentSpec) []*settings.Error {
	_, p := read(spec)
	return p.List()
}

func read(spec *events.ExperimentSpec) (*Settings, *settings.Problems) {
	p := &settings.Problems{}
	s := &Settings{Scheduler: readScheduler(spec, p)}
	before := p.Len()
	s.Search = readSearch(spec, p)
	// With a setting of the search algorithm refused, building its sampler
	// would report that setting again, as a problem of param_space.
	searchOK := !slices.ContainsFunc(p.List()[before:], func(e *settings.Error) bool {
		return e.Key == keySearchAlg || strings.HasPrefix(e.Key, keySearchAlg+".")
	})
	checkPBTFunctions(spec, s.Scheduler, p)
	checkReproducible(spec, p)
	if tc := spec.TuneConfig; (tc.WarmStart != "" || len(tc.WarmStartTrials) > 0) && !ModelBased(tc.SearchAlg) {
		p.Add("tune_config.warm_start", "seeds the search algorithm tpe, bayesopt or nsga2 with another experiment's trials; search_alg %q learns nothing from them", cmp.Or(tc.SearchAlg, SearchRandom))
	}
	if space, err := search.ParseSpace(spec.ParamSpace); err == nil {
		checkSampleFrom(spec, space, p)
		s.SampleFrom = len(space.SampledByDriver()) > 0
		if len(space.SampledByDriver()) == 0 && searchOK {
			_, err := s.Sampler(space)
			p.AddErr("", err)
		}
		if t, ok := s.Search.(*TPEConfig); ok && len(space.SampledByDriver()) == 0 {
			t.checkEvaluated(space, spec.TuneConfig.PointsToEvaluate, p)
		}
		checkPoints(spec, space, p)
	}
	if spec.RunConfig.Stoppers != nil {
		st, err := stopper.Parse(keyStoppers, spec.RunConfig.Stoppers)
		p.AddErr("", err)
		s.stopper = st
	}
	return s, p
}

// didYouMean is ` (did you mean "x"?)` for a close known name, or "".
func didYouMean(name string, known []string) string {
	if s := settings.Suggest(name, known); s != "" {
		return ` (did you mean "` + s + `"?)`
	}
	return ""
}

// checkSampleFrom checks the sample_from domains: the driver resolves
// them (a spec without a driver section has none to ask), after random or
// grid search drew the rest, as Ray's BasicVariantGenerator does; a
// searcher that models the space cannot take them.
func checkSampleFrom(spec *events.ExperimentSpec, space *search.Space, p *settings.Problems) {
	for _, path := range space.SampledByDriver() {
		key := "param_space." + strings.Join(path, ".")
		switch sa := spec.TuneConfig.SearchAlg; {
		case spec.Driver == nil:
			p.Add(key, "sample_from calls a function of the driver's, and the spec has no driver section (the Python SDK's Tuner.fit writes one)")
		case spec.Driver.Searches():
			p.Add(key, "sample_from is resolved with random or grid search, not with the driver's searcher %s", spec.Driver.Searcher)
		case sa != "" && sa != SearchRandom && sa != SearchGrid:
			p.Add(key, "sample_from is resolved with search_alg %q or %q; %q cannot model it", SearchRandom, SearchGrid, sa)
		}
	}
}

// checkReproducible checks tune_config.reproducible: it fixes the trials
// each suggestion of tpe, bayesopt or nsga2 learns from by max_concurrent_trials,
// which must then be set; an external or a driver's searcher answers as it
// likes, so its configs cannot be made reproducible. Random and grid
// search are reproducible anyway (a config is a function of the seed and
// the trial's index).
func checkReproducible(spec *events.ExperimentSpec, p *settings.Problems) {
	tc := spec.TuneConfig
	if !tc.Reproducible {
		return
	}
	const key = "tune_config.reproducible"
	switch {
	case spec.Driver.Searches():
		p.Add(key, "the driver's searcher %s answers as it likes: its configs cannot be made reproducible", spec.Driver.Searcher)
	case tc.SearchAlg == SearchExternal:
		p.Add(key, "an external searcher answers as it likes: its configs cannot be made reproducible")
	case ModelBased(tc.SearchAlg) && tc.MaxConcurrentTrials < 1:
		p.Add(key, "needs tune_config.max_concurrent_trials: trial k's suggestion learns from the trials numbered up to k − max_concurrent_trials")
	}
}

// checkPBTFunctions checks that PBT's functions of the driver's (function
// mutations, custom_explore_fn) have a driver to call them.
func checkPBTFunctions(spec *events.ExperimentSpec, cfg sched.Config, p *settings.Problems) {
	pbt, ok := cfg.(*sched.PBTConfig)
	if !ok || spec.Driver != nil {
		return
	}
	const why = "calls a function of the driver's, and the spec has no driver section (the Python SDK's Tuner.fit writes one)"
	if pbt.CustomExploreFn != "" {
		p.Add(keyScheduler+".custom_explore_fn", "%s", why)
	}
	for _, k := range sched.DriverMutations(pbt.HyperparamMutations) {
		p.Add(keyScheduler+".hyperparam_mutations."+k, "%s", why)
	}
}
