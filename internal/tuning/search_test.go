package tuning

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/gp"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/tpe"

	"github.com/tunejet/tunejet/internal/settings"
)

func int64p(v int64) *int64 { return &v }

func TestSearchOptions(t *testing.T) {
	tests := []struct {
		name   string
		alg    string
		config map[string]any
		seed   *int64
		metric string
		mode   string
		isTPE  bool
		want   func(*tpe.Options)
		errs   []string
	}{
		{name: "unset is random", isTPE: false},
		{name: "random", alg: "random"},
		{name: "grid", alg: "grid"},
		{name: "random takes no settings", alg: "random", config: map[string]any{"n_startup_trials": 5},
			errs: []string{`tune_config.search_alg.n_startup_trials: unknown key; "random" takes no settings`}},
		{name: "tpe defaults", alg: "tpe", metric: "loss", mode: "min", isTPE: true, want: func(*tpe.Options) {}},
		{name: "tpe max", alg: "tpe", metric: "acc", mode: "max", isTPE: true,
			want: func(o *tpe.Options) { o.Maximize = true }},
		{name: "tpe, every key", alg: "tpe", metric: "loss", mode: "min", isTPE: true, seed: int64p(7),
			config: map[string]any{"n_startup_trials": 5, "n_ei_candidates": 48.0, "gamma": "hyperopt",
				"prior_weight": 0.5, "consider_prior": true, "consider_magic_clip": false, "consider_endpoints": true,
				"multivariate": false, "constant_liar": false, "seed": 7},
			want: func(o *tpe.Options) {
				o.NStartupTrials, o.NEICandidates, o.Gamma, o.PriorWeight = 5, 48, tpe.HyperoptGamma, 0.5
				o.ConsiderMagicClip, o.ConsiderEndpoints, o.Multivariate, o.ConstantLiar = false, true, false, false
			}},
		{name: "gamma default", alg: "tpe", metric: "loss", mode: "min", isTPE: true,
			config: map[string]any{"gamma": "default"}, want: func(*tpe.Options) {}},
		{name: "tpe needs metric and mode", alg: "tpe", isTPE: true,
			errs: []string{
				`tune_config.metric: required by search_alg "tpe": set tune_config.metric`,
				`tune_config.mode: required by search_alg "tpe": set tune_config.mode to "min" or "max"`,
			}},
		{name: "tpe's knobs out of range", alg: "tpe", metric: "loss", mode: "min", isTPE: true,
			config: map[string]any{"n_startup_trials": -1, "n_ei_candidates": 0, "prior_weight": -1, "gamma": 0.25,
				"consider_prior": false},
			errs: []string{
				`tune_config.search_alg.gamma: must be "default" (min(ceil(0.1 n), 25)) or "hyperopt" (min(ceil(0.25 sqrt(n)), 25)), got number 0.25`,
				"tune_config.search_alg.n_startup_trials: must be >= 0, got -1",
				"tune_config.search_alg.n_ei_candidates: must be >= 1, got 0",
				"tune_config.search_alg.prior_weight: must be >= 0, got -1",
				"tune_config.search_alg.consider_prior: false is not supported (Optuna deprecated it); lower prior_weight instead",
			}},
		{name: "misspelled knob", alg: "tpe", metric: "loss", mode: "min", isTPE: true,
			config: map[string]any{"n_startup_trial": 3},
			errs:   []string{`tune_config.search_alg.n_startup_trial: unknown key, did you mean "n_startup_trials"?`}},
		{name: "seed without tune_config.seed", alg: "tpe", metric: "loss", mode: "min", isTPE: true,
			config: map[string]any{"seed": 3},
			errs:   []string{"tune_config.search_alg.seed: tpe draws from the experiment's seed: set tune_config.seed to 3 instead"}},
		{name: "seed unlike tune_config.seed", alg: "tpe", metric: "loss", mode: "min", isTPE: true, seed: int64p(4),
			config: map[string]any{"seed": 3},
			errs: []string{"tune_config.search_alg.seed: must equal tune_config.seed (4), which tpe draws from, got 3; " +
				"set only one of them"}},
		{name: "metric in search_alg", alg: "tpe", metric: "loss", mode: "min", isTPE: true,
			config: map[string]any{"metric": "loss"},
			errs:   []string{"tune_config.search_alg.metric: tpe takes tune_config's metric and mode: set tune_config.metric instead"}},
		{name: "unknown search_alg", alg: "tpee",
			errs: []string{`tune_config.search_alg: unknown search algorithm "tpee" (did you mean "tpe"?); valid: bayesopt, external, gp, grid, nsga2, random, tpe`}},
		{name: "external", alg: "external", metric: "loss", mode: "min",
			config: map[string]any{"subject": "optuna.suggest", "timeout_s": 2.5}},
		{name: "external needs a subject and an objective", alg: "external", config: map[string]any{"timeout_s": 0, "subjet": "x"},
			errs: []string{
				`tune_config.search_alg.subjet: unknown key, did you mean "subject"?`,
				`tune_config.search_alg.subject: required: the NATS subject the searcher answers, dot-separated tokens without spaces or wildcards, got ""`,
				"tune_config.search_alg.timeout_s: must be > 0, got 0",
				`tune_config.metric: required by search_alg "external": set tune_config.metric`,
				`tune_config.mode: required by search_alg "external": set tune_config.mode to "min" or "max"`,
			}},
		{name: "external subject with a wildcard", alg: "external", metric: "loss", mode: "max",
			config: map[string]any{"subject": "searchers.*"},
			errs:   []string{`tune_config.search_alg.subject: required: the NATS subject the searcher answers, dot-separated tokens without spaces or wildcards, got "searchers.*"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec(events.TuneConfig{Metric: tt.metric, Mode: tt.mode, Seed: tt.seed, SearchAlg: tt.alg, SearchAlgConfig: tt.config})
			p := &settings.Problems{}
			cfg, isTPE := readSearch(s, p).(*TPEConfig)
			if msgs := messages(p.List()); !slices.Equal(msgs, tt.errs) {
				t.Fatalf("problems:\n got %q\nwant %q", msgs, tt.errs)
			}
			if isTPE != tt.isTPE {
				t.Fatalf("tpe = %v, want %v", isTPE, tt.isTPE)
			}
			if tt.want == nil {
				return
			}
			got, want := cfg.Options, tpe.Defaults()
			tt.want(&want)
			for _, n := range []int{1, 10, 100, 1000} {
				if g, w := got.Gamma(n), want.Gamma(n); g != w {
					t.Errorf("gamma(%d) = %d, want %d", n, g, w)
				}
			}
			got.Gamma, want.Gamma, got.Weights, want.Weights = nil, nil, nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("options:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// external reads the spec's external searcher's settings, nil for
// another search algorithm.
func external(s *events.ExperimentSpec) (*ExternalConfig, error) {
	st, err := Parse(s)
	if err != nil {
		return nil, err
	}
	c, _ := st.Search.(*ExternalConfig)
	return c, nil
}

// sampler builds the spec's TPE sampler of space, nil for another search
// algorithm.
func sampler(s *events.ExperimentSpec, space *search.Space) (*tpe.Sampler, error) {
	st, err := Parse(s)
	if err != nil {
		return nil, err
	}
	if c, ok := st.Search.(*TPEConfig); ok {
		return c.New(space)
	}
	return nil, nil
}

func TestExternal(t *testing.T) {
	got, err := external(spec(events.TuneConfig{SearchAlg: "external", Metric: "loss", Mode: "min",
		SearchAlgConfig: map[string]any{"subject": "my.searcher"}}))
	if err != nil || *got != (ExternalConfig{Subject: "my.searcher", TimeoutS: 10, Timeout: DefaultExternalTimeout}) {
		t.Errorf("external: %+v, %v", got, err)
	}
	got, err = external(spec(events.TuneConfig{SearchAlg: "external", Metric: "loss", Mode: "min",
		SearchAlgConfig: map[string]any{"subject": "my.searcher", "timeout_s": 0.5}}))
	if err != nil || got.Timeout != 500*time.Millisecond {
		t.Errorf("timeout_s 0.5: %+v, %v", got, err)
	}
	if got, err := external(spec(events.TuneConfig{SearchAlg: "tpe", Metric: "loss", Mode: "min"})); got != nil || err != nil {
		t.Errorf("tpe: %v, %v; want nil, nil", got, err)
	}
	_, err = external(spec(events.TuneConfig{SearchAlg: "external", Metric: "loss", Mode: "min"}))
	var ke *settings.Error
	if !errors.As(err, &ke) || ke.Key != "tune_config.search_alg.subject" || !errors.Is(err, settings.ErrInvalid) {
		t.Errorf("external without subject: %v", err)
	}
}

func TestSearcher(t *testing.T) {
	space, err := search.ParseSpace(map[string]any{"lr": map[string]any{"uniform": []any{0, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := sampler(spec(events.TuneConfig{SearchAlg: "random"}), space); s != nil || err != nil {
		t.Errorf("random: %v, %v; want nil, nil", s, err)
	}
	s, err := sampler(spec(events.TuneConfig{SearchAlg: "tpe", Metric: "loss", Mode: "min"}), space)
	if s == nil || err != nil {
		t.Errorf("tpe: %v, %v", s, err)
	}
	_, err = sampler(spec(events.TuneConfig{SearchAlg: "tpe"}), space)
	var ke *settings.Error
	if !errors.As(err, &ke) || ke.Key != keyMetric || !errors.Is(err, settings.ErrInvalid) {
		t.Errorf("tpe without metric: %v", err)
	}
	grid, err := search.ParseSpace(map[string]any{"opt": map[string]any{"bs": map[string]any{"grid_search": []any{1, 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sampler(spec(events.TuneConfig{SearchAlg: "tpe", Metric: "loss", Mode: "min"}), grid)
	want := `param_space.opt.bs: grid_search is not supported by search_alg "tpe"; use a bounded domain (uniform, choice, ...) or search_alg random or grid`
	if err == nil || err.Error() != want {
		t.Errorf("tpe with grid_search: %v\nwant %s", err, want)
	}
}

func TestBayesOptSettings(t *testing.T) {
	tests := []struct {
		name   string
		alg    string
		config map[string]any
		seed   *int64
		metric string
		mode   string
		want   gp.Options
		errs   []string
	}{
		{name: "defaults", alg: "bayesopt", metric: "loss", mode: "min", want: gp.Options{NStartupTrials: 10}},
		{name: "gp is its short name", alg: "gp", metric: "acc", mode: "max", want: gp.Options{NStartupTrials: 10, Maximize: true}},
		{name: "every key", alg: "bayesopt", metric: "loss", mode: "min", seed: int64p(5),
			config: map[string]any{"n_startup_trials": 4, "deterministic_objective": true, "seed": 5},
			want:   gp.Options{NStartupTrials: 4, DeterministicObjective: true}},
		{name: "Ray's random_search_steps", alg: "bayesopt", metric: "loss", mode: "min",
			config: map[string]any{"random_search_steps": 6}, want: gp.Options{NStartupTrials: 6}},
		{name: "both names of the startup", alg: "bayesopt", metric: "loss", mode: "min",
			config: map[string]any{"random_search_steps": 6, "n_startup_trials": 3},
			errs:   []string{"tune_config.search_alg.random_search_steps: is Ray's name for n_startup_trials: set only one of them"}},
		{name: "out of range and unsupported", alg: "bayesopt", metric: "loss", mode: "min",
			config: map[string]any{"n_startup_trials": -2, "utility_kwargs": map[string]any{"kind": "ucb"}, "metric": "x"},
			errs: []string{
				"tune_config.search_alg.metric: bayesopt takes tune_config's metric and mode: set tune_config.metric instead",
				"tune_config.search_alg.utility_kwargs: bayesopt maximizes log expected improvement (Optuna's GPSampler); " +
					"BayesOptSearch's utility functions (ucb, ei, poi) and their kappa and xi are not supported",
				"tune_config.search_alg.n_startup_trials: must be >= 0, got -2",
			}},
		{name: "seed unlike tune_config.seed", alg: "bayesopt", metric: "loss", mode: "min", seed: int64p(4),
			config: map[string]any{"seed": 3},
			errs: []string{"tune_config.search_alg.seed: must equal tune_config.seed (4), which bayesopt draws from, got 3; " +
				"set only one of them"}},
		{name: "needs metric and mode", alg: "bayesopt",
			errs: []string{
				`tune_config.metric: required by search_alg "bayesopt": set tune_config.metric`,
				`tune_config.mode: required by search_alg "bayesopt": set tune_config.mode to "min" or "max"`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec(events.TuneConfig{Metric: tt.metric, Mode: tt.mode, Seed: tt.seed, SearchAlg: tt.alg, SearchAlgConfig: tt.config})
			p := &settings.Problems{}
			cfg, ok := readSearch(s, p).(*GPConfig)
			if msgs := messages(p.List()); !slices.Equal(msgs, tt.errs) {
				t.Fatalf("problems:\n got %q\nwant %q", msgs, tt.errs)
			}
			if !ok {
				t.Fatalf("search_alg %s read as %T, want *GPConfig", tt.alg, cfg)
			}
			if tt.errs == nil && cfg.Options != tt.want {
				t.Errorf("options %+v, want %+v", cfg.Options, tt.want)
			}
		})
	}
}

// A space the GP cannot model is refused before the experiment starts, at
// the domain's key.
func TestBayesOptRefusesSpacesItCannotModel(t *testing.T) {
	s := spec(events.TuneConfig{Metric: "loss", Mode: "min", SearchAlg: "bayesopt"})
	s.ParamSpace = map[string]any{"noise": map[string]any{"randn": []any{0.0, 1.0}}}
	got := messages(Check(s))
	want := []string{`param_space.noise: randn is not supported by search_alg "bayesopt"; use a bounded domain (uniform, choice, ...) or search_alg random or grid`}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
}

func TestReproducibleNeedsAWindowAndTunejetsSearcher(t *testing.T) {
	tests := []struct {
		name string
		tc   events.TuneConfig
		want []string
	}{
		{"tpe with a window", events.TuneConfig{Metric: "loss", Mode: "min", SearchAlg: "tpe", MaxConcurrentTrials: 4, Reproducible: true}, nil},
		{"random needs nothing", events.TuneConfig{Reproducible: true}, nil},
		{"bayesopt without a window", events.TuneConfig{Metric: "loss", Mode: "min", SearchAlg: "bayesopt", Reproducible: true},
			[]string{"tune_config.reproducible: needs tune_config.max_concurrent_trials: trial k's suggestion learns from the trials numbered up to k − max_concurrent_trials"}},
		{"external", events.TuneConfig{Metric: "loss", Mode: "min", SearchAlg: "external", MaxConcurrentTrials: 2, Reproducible: true,
			SearchAlgConfig: map[string]any{"subject": "s"}},
			[]string{"tune_config.reproducible: an external searcher answers as it likes: its configs cannot be made reproducible"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := messages(Check(spec(tt.tc))); !slices.Equal(got, tt.want) {
				t.Errorf("problems:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestWarmStartSeedsOnlyAModelBasedSearch(t *testing.T) {
	for _, tt := range []struct {
		tc   events.TuneConfig
		want []string
	}{
		{events.TuneConfig{Metric: "loss", Mode: "min", SearchAlg: "bayesopt", WarmStart: "/r/old"}, nil},
		{events.TuneConfig{WarmStart: "/r/old"},
			[]string{`tune_config.warm_start: seeds the search algorithm tpe, bayesopt or nsga2 with another experiment's trials; search_alg "random" learns nothing from them`}},
	} {
		if got := messages(Check(spec(tt.tc))); !slices.Equal(got, tt.want) {
			t.Errorf("%+v: problems\n got %q\nwant %q", tt.tc, got, tt.want)
		}
	}
}

// TestMultiObjectiveTPEDefaults: with several metrics tpe takes MOTPE's
// defaults (tpe.MultiObjectiveDefaults) where the file sets none.
func TestMultiObjectiveTPEDefaults(t *testing.T) {
	read := func(config map[string]any) *TPEConfig {
		t.Helper()
		s := spec(events.TuneConfig{Metrics: []string{"loss", "ms"}, Modes: []string{"min", "min"}, SearchAlg: SearchTPE, SearchAlgConfig: config})
		p := &settings.Problems{}
		cfg := readSearch(s, p).(*TPEConfig)
		if p.Len() > 0 {
			t.Fatalf("problems: %q", messages(p.List()))
		}
		return cfg
	}
	mo := read(nil)
	if mo.NEICandidates != 256 || mo.Gamma(1000) != 100 || mo.Maximize {
		t.Errorf("several metrics: %d candidates, gamma(1000) = %d, maximize %v; want 256, 100 (uncapped), false",
			mo.NEICandidates, mo.Gamma(1000), mo.Maximize)
	}
	given := read(map[string]any{"n_ei_candidates": 48, "gamma": "default"})
	if given.NEICandidates != 48 || given.Gamma(1000) != 25 {
		t.Errorf("several metrics, settings given: %d candidates, gamma(1000) = %d; want the file's 48 and 25", given.NEICandidates, given.Gamma(1000))
	}
}
