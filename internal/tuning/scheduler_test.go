package tuning

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/sched"

	"github.com/tunejet/tunejet/internal/settings"
)

// spec is an experiment with tc as its tune_config.
func spec(tc events.TuneConfig) *events.ExperimentSpec {
	return &events.ExperimentSpec{
		Name:       "exp",
		Trainable:  events.Trainable{Name: "train"},
		ParamSpace: map[string]any{"lr": map[string]any{"loguniform": []any{1e-4, 1e-1}}},
		TuneConfig: tc,
	}
}

// messages returns the problems' texts.
func messages(errs []*settings.Error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

var lossMin = sched.Objective{Metric: "loss", Mode: sched.Min}

// newScheduler builds the spec's scheduler as the fold does.
func newScheduler(s *events.ExperimentSpec) (sched.Scheduler, error) {
	st, err := Parse(s)
	if err != nil {
		return nil, err
	}
	return st.Scheduler.New()
}

// configValue is the config readScheduler returned, as a value; nil for
// FIFO's.
func configValue(cfg sched.Config) any {
	if s, _ := cfg.New(); reflect.TypeOf(s) == reflect.TypeOf(&sched.FIFO{}) {
		return nil
	}
	return reflect.ValueOf(cfg).Elem().Interface()
}

func TestSchedulerConfig(t *testing.T) {
	asha := func(edit func(*sched.ASHAConfig)) sched.ASHAConfig {
		c := sched.DefaultASHAConfig()
		c.Objective = lossMin
		edit(&c)
		return c
	}
	tests := []struct {
		name      string
		scheduler string
		config    map[string]any
		metric    string
		mode      string
		want      any
		errs      []string
	}{
		{name: "unset is fifo", want: nil},
		{name: "fifo", scheduler: "fifo", metric: "loss", want: nil},
		{name: "fifo takes no settings", scheduler: "fifo", config: map[string]any{"max_t": 10},
			errs: []string{`tune_config.scheduler.max_t: unknown key; "fifo" takes no settings`}},
		{name: "asha defaults", scheduler: "asha", metric: "loss", mode: "min",
			want: asha(func(*sched.ASHAConfig) {})},
		{name: "async_hyperband, every key", scheduler: "async_hyperband", metric: "loss", mode: "min",
			config: map[string]any{"time_attr": "epoch", "max_t": 81, "grace_period": 3.0, "reduction_factor": 3,
				"brackets": 2.0, "stop_last_trials": false},
			want: asha(func(c *sched.ASHAConfig) {
				c.TimeAttr, c.MaxT, c.GracePeriod, c.ReductionFactor, c.Brackets, c.StopLastTrials = "epoch", 81, 3, 3, 2, false
			})},
		{name: "null keeps the default", scheduler: "asha", metric: "loss", mode: "min",
			config: map[string]any{"max_t": nil}, want: asha(func(*sched.ASHAConfig) {})},
		{name: "json.Number", scheduler: "asha", metric: "loss", mode: "min",
			config: map[string]any{"max_t": json.Number("27"), "brackets": json.Number("3")},
			want:   asha(func(c *sched.ASHAConfig) { c.MaxT, c.Brackets = 27, 3 })},
		{name: "metric and mode from the scheduler", scheduler: "asha",
			config: map[string]any{"metric": "loss", "mode": "min"}, want: asha(func(*sched.ASHAConfig) {})},
		{name: "metric from the scheduler, mode from tune_config", scheduler: "asha", mode: "min",
			config: map[string]any{"metric": "loss"}, want: asha(func(*sched.ASHAConfig) {})},
		{name: "metric in both", scheduler: "asha", metric: "loss", mode: "min",
			config: map[string]any{"metric": "acc"},
			errs:   []string{"tune_config.scheduler.metric: " + rayMetricModeMsg}},
		{name: "mode in both", scheduler: "median_stopping_rule", metric: "loss", mode: "min",
			config: map[string]any{"mode": "max"},
			errs:   []string{"tune_config.scheduler.mode: " + rayMetricModeMsg}},
		{name: "neither", scheduler: "asha",
			errs: []string{
				`tune_config.metric: required by scheduler "asha": set tune_config.metric (or metric in tune_config.scheduler)`,
				`tune_config.mode: required by scheduler "asha": set tune_config.mode (or mode in tune_config.scheduler) to "min" or "max"`,
			}},
		{name: "bad mode in the scheduler", scheduler: "hyperband", metric: "loss", config: map[string]any{"mode": "avg"},
			errs: []string{`tune_config.scheduler.mode: must be "min" or "max", got "avg"`}},
		{name: "bad mode in tune_config", scheduler: "hyperband", metric: "loss", mode: "avg",
			errs: []string{`tune_config.mode: must be "min" or "max", got "avg"`}},
		{name: "misspelled key", scheduler: "asha", metric: "loss", mode: "min", config: map[string]any{"grace_peroid": 2},
			errs: []string{`tune_config.scheduler.grace_peroid: unknown key, did you mean "grace_period"?`}},
		{name: "unknown key", scheduler: "asha", metric: "loss", mode: "min", config: map[string]any{"eta": 2},
			errs: []string{"tune_config.scheduler.eta: unknown key; valid keys: brackets, grace_period, max_t, metric, " +
				"mode, reduction_factor, stop_last_trials, time_attr"}},
		{name: "wrong types", scheduler: "asha", metric: "loss", mode: "min",
			config: map[string]any{"brackets": 1.5, "max_t": "ten", "stop_last_trials": "yes", "time_attr": 1},
			errs: []string{
				"tune_config.scheduler.brackets: expected an integer, got number 1.5",
				`tune_config.scheduler.max_t: expected a finite number, got string "ten"`,
				`tune_config.scheduler.stop_last_trials: expected a boolean, got string "yes"`,
				"tune_config.scheduler.time_attr: expected a string, got integer 1",
			}},
		{name: "asha's rules", scheduler: "asha", metric: "loss", mode: "min",
			config: map[string]any{"reduction_factor": 1, "grace_period": 0},
			errs: []string{
				"tune_config.scheduler.grace_period: must be > 0, got 0",
				"tune_config.scheduler.reduction_factor: must be > 1, got 1",
			}},
		{name: "hyperband, every key", scheduler: "hyperband", metric: "loss", mode: "min",
			config: map[string]any{"time_attr": "epoch", "max_t": 27, "reduction_factor": 4, "stop_last_trials": false},
			want:   sched.HyperBandConfig{Objective: lossMin, TimeAttr: "epoch", MaxT: 27, ReductionFactor: 4}},
		{name: "hyperband's rules", scheduler: "hyperband", metric: "loss", mode: "min", config: map[string]any{"max_t": 0.5},
			errs: []string{"tune_config.scheduler.max_t: must be >= 1, got 0.5"}},
		{name: "median_stopping_rule, every key", scheduler: "median_stopping_rule", metric: "loss", mode: "min",
			config: map[string]any{"time_attr": "training_iteration", "grace_period": 5, "min_samples_required": 4,
				"min_time_slice": 2.5, "hard_stop": false},
			want: sched.MedianConfig{Objective: lossMin, TimeAttr: "training_iteration", GracePeriod: 5,
				MinSamplesRequired: 4, MinTimeSlice: 2.5}},
		{name: "median_stopping_rule defaults", scheduler: "median_stopping_rule", metric: "loss", mode: "min",
			want: sched.MedianConfig{Objective: lossMin, TimeAttr: "time_total_s", GracePeriod: 60, MinSamplesRequired: 3, HardStop: true}},
		{name: "median_stopping_rule's rules", scheduler: "median_stopping_rule", metric: "loss", mode: "min",
			config: map[string]any{"min_samples_required": -1},
			errs:   []string{"tune_config.scheduler.min_samples_required: must be >= 0, got -1"}},
		{name: "pbt needs mutations", scheduler: "pbt", metric: "loss", mode: "min",
			errs: []string{"tune_config.scheduler.hyperparam_mutations: must name at least one key"}},
		{name: "pbt's rules", scheduler: "pbt", metric: "loss", mode: "min",
			config: map[string]any{"hyperparam_mutations": map[string]any{"bs": []any{1, 2}}, "quantile_fraction": 0.75,
				"perturbation_factors": []any{}},
			errs: []string{
				"tune_config.scheduler.quantile_fraction: must be in [0, 0.5], got 0.75",
				"tune_config.scheduler.perturbation_factors: must not be empty",
			}},
		{name: "pbt mutations that are not", scheduler: "pbt", metric: "loss", mode: "min",
			config: map[string]any{"hyperparam_mutations": map[string]any{
				"a": 1.0,
				"b": map[string]any{"grid_search": []any{1, 2}},
				"c": []any{},
				"d": map[string]any{"e": "x"},
				"f": []any{map[string]any{"uniform": []any{0, 1}}},
			}},
			errs: []string{
				"tune_config.scheduler.hyperparam_mutations.a: must be a list, a distribution or a mapping, got number 1",
				"tune_config.scheduler.hyperparam_mutations.b: grid_search cannot be explored; use a list of values instead",
				"tune_config.scheduler.hyperparam_mutations.c: must not be an empty list",
				`tune_config.scheduler.hyperparam_mutations.d.e: must be a list, a distribution or a mapping, got string "x"`,
				"tune_config.scheduler.hyperparam_mutations.f: a list of mutations holds plain values; use a distribution for sampled values",
			}},
		{name: "pbt mutation with a broken domain", scheduler: "pbt", metric: "loss", mode: "min",
			config: map[string]any{"hyperparam_mutations": map[string]any{"lr": map[string]any{"uniform": []any{1, 0}}}},
			errs:   []string{"tune_config.scheduler.hyperparam_mutations.lr: uniform: low (1) must be <= high (0)"}},
		{name: "pbt mutations not a mapping", scheduler: "pbt", metric: "loss", mode: "min",
			config: map[string]any{"hyperparam_mutations": []any{"lr"}},
			errs: []string{"tune_config.scheduler.hyperparam_mutations: expected a mapping of config keys to lists, " +
				"distributions or mappings, got a list"}},
		{name: "unknown scheduler", scheduler: "ashaa",
			errs: []string{`tune_config.scheduler: unknown scheduler "ashaa" (did you mean "asha"?); valid: ` +
				"asha, async_hyperband, fifo, hyperband, median_stopping_rule, pbt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec(events.TuneConfig{Metric: tt.metric, Mode: tt.mode, Scheduler: tt.scheduler, SchedulerConfig: tt.config})
			p := &settings.Problems{}
			cfg := readScheduler(s, p)
			if msgs := messages(p.List()); !slices.Equal(msgs, tt.errs) {
				t.Fatalf("problems:\n got %q\nwant %q", msgs, tt.errs)
			}
			if tt.errs != nil {
				if _, err := newScheduler(s); err == nil || !strings.Contains(err.Error(), tt.errs[0]) {
					t.Errorf("Scheduler() error = %v, want %q", err, tt.errs[0])
				}
				return
			}
			if got := configValue(cfg); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("config:\n got %#v\nwant %#v", got, tt.want)
			}
			if _, err := newScheduler(s); err != nil {
				t.Errorf("Scheduler() error = %v", err)
			}
		})
	}
}

func TestSchedulerTypes(t *testing.T) {
	mutations := map[string]any{"lr": []any{0.1, 0.01}}
	for name, want := range map[string]sched.Scheduler{
		"":                     &sched.FIFO{},
		"fifo":                 &sched.FIFO{},
		"asha":                 &sched.ASHA{},
		"async_hyperband":      &sched.ASHA{},
		"hyperband":            &sched.HyperBand{},
		"median_stopping_rule": &sched.Median{},
		"pbt":                  &sched.PBT{},
	} {
		tc := events.TuneConfig{Metric: "loss", Mode: "max", Scheduler: name}
		if name == "pbt" {
			tc.SchedulerConfig = map[string]any{"hyperparam_mutations": mutations}
		}
		got, err := newScheduler(spec(tc))
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if reflect.TypeOf(got) != reflect.TypeOf(want) {
			t.Errorf("%q: got %T, want %T", name, got, want)
		}
	}
}

func TestPBTMutations(t *testing.T) {
	tc := events.TuneConfig{Metric: "acc", Mode: "max", Scheduler: "pbt", SchedulerConfig: map[string]any{
		"perturbation_interval": 5,
		"perturbation_factors":  []any{1.5, 0.5},
		"hyperparam_mutations": map[string]any{
			"lr":     map[string]any{"loguniform": []any{1e-4, 1e-1}},
			"bs":     []any{16, 32, json.Number("64")},
			"layers": map[string]any{"randint": []any{1, 5}},
			"opt":    map[string]any{"name": []any{"sgd", "adam"}, "beta": map[string]any{"uniform": []any{0.8, 0.99}}},
			"act":    map[string]any{"choice": []any{"relu", "tanh"}},
		},
	}}
	p := &settings.Problems{}
	cfg, ok := readScheduler(spec(tc), p).(*sched.PBTConfig)
	if !ok || p.Len() > 0 {
		t.Fatalf("config %T, problems %q", cfg, messages(p.List()))
	}
	if cfg.PerturbationInterval != 5 || !slices.Equal(cfg.PerturbationFactors, []float64{1.5, 0.5}) {
		t.Errorf("interval %v, factors %v", cfg.PerturbationInterval, cfg.PerturbationFactors)
	}
	ms := cfg.HyperparamMutations
	if got, want := ms["bs"].Choices, []any{16, 32, 64}; !reflect.DeepEqual(got, want) {
		t.Errorf("bs choices = %#v, want ints %#v", got, want)
	}
	if got, want := ms["opt"].Nested["name"].Choices, []any{"sgd", "adam"}; !reflect.DeepEqual(got, want) {
		t.Errorf("opt.name choices = %#v, want %#v", got, want)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		if lr, ok := ms["lr"].Sample(r).(float64); !ok || lr < 1e-4 || lr > 1e-1 {
			t.Fatalf("lr sample %v is not in [1e-4, 1e-1]", lr)
		}
		if n, ok := ms["layers"].Sample(r).(int); !ok || n < 1 || n > 4 {
			t.Fatalf("layers sample %#v is not an int in [1, 4]", n)
		}
		if b, ok := ms["opt"].Nested["beta"].Sample(r).(float64); !ok || b < 0.8 || b > 0.99 {
			t.Fatalf("opt.beta sample %v", b)
		}
		if a := ms["act"].Sample(r); a != "relu" && a != "tanh" {
			t.Fatalf("act sample %v", a)
		}
	}
	// A sample is a function of the generator alone.
	a, b := rand.New(rand.NewPCG(7, 7)), rand.New(rand.NewPCG(7, 7))
	if x, y := ms["lr"].Sample(a), ms["lr"].Sample(b); x != y {
		t.Errorf("same generator, different samples %v and %v", x, y)
	}
}

// TestSchedulerAfterJSON builds the same config from a spec that went
// through JSON, where every number is a float64.
func TestSchedulerAfterJSON(t *testing.T) {
	s := spec(events.TuneConfig{Metric: "loss", Mode: "min", Scheduler: "asha",
		SchedulerConfig: map[string]any{"max_t": 27, "grace_period": 1, "reduction_factor": 3, "brackets": 2}})
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back events.ExperimentSpec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	p, q := &settings.Problems{}, &settings.Problems{}
	if x, y := readScheduler(s, p), readScheduler(&back, q); !reflect.DeepEqual(x, y) || p.Len() > 0 || q.Len() > 0 {
		t.Errorf("before JSON %#v (%q), after %#v (%q)", x, messages(p.List()), y, messages(q.List()))
	}
}
