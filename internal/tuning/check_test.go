package tuning

import (
	"slices"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/stopper"
)

func TestCheckPoints(t *testing.T) {
	space := map[string]any{
		"lr":     map[string]any{"loguniform": []any{1e-4, 1e-1}},
		"layers": map[string]any{"randint": []any{1, 5}},
		"wd":     map[string]any{"quniform": []any{0, 1, 0.25}},
		"noise":  map[string]any{"randn": []any{0, 1}},
		"opt":    map[string]any{"name": map[string]any{"choice": []any{"sgd", "adam"}}, "nesterov": true},
		"bs":     map[string]any{"grid_search": []any{16, 32}},
		"dims":   []any{map[string]any{"randint": []any{1, 4}}, 8},
		"c":      map[string]any{"literal": map[string]any{"uniform": 1}},
	}
	tests := []struct {
		name   string
		alg    string
		points []map[string]any
		errs   []string
	}{
		{name: "good points", points: []map[string]any{
			{"lr": 0.01, "layers": 4, "wd": 0.75, "noise": -3.5, "opt": map[string]any{"name": "adam", "nesterov": false},
				"bs": 32.0, "dims": []any{2, 8}, "c": "anything"},
			{"layers": 1.0},
			{},
		}},
		{name: "random takes points", alg: "random", points: []map[string]any{{"lr": 0.1}}},
		{name: "grid refuses points", alg: "grid", points: []map[string]any{{"bs": 16}},
			errs: []string{`tune_config.search_alg.points_to_evaluate: search_alg "grid" runs the grid and nothing else; ` +
				`use search_alg "random" or "tpe" to evaluate points first`}},
		{name: "values the domains cannot produce", points: []map[string]any{
			{"lr": 0.5, "layers": 5, "wd": 0.3, "noise": "x"},
			{"layers": 2.5, "opt": map[string]any{"name": "rmsprop"}, "bs": 64, "dims": []any{0, 8}},
		}, errs: []string{
			"tune_config.search_alg.points_to_evaluate.0.layers: must be within the randint domain's [1, 4], got 5",
			"tune_config.search_alg.points_to_evaluate.0.lr: must be within the loguniform domain's [0.0001, 0.1], got 0.5",
			`tune_config.search_alg.points_to_evaluate.0.noise: expected a number for the randn domain, got string "x"`,
			"tune_config.search_alg.points_to_evaluate.0.wd: must be a multiple of the quniform domain's step 0.25, got 0.3",
			"tune_config.search_alg.points_to_evaluate.1.bs: not one of the grid_search values of param_space, got integer 64",
			"tune_config.search_alg.points_to_evaluate.1.dims.0: must be within the randint domain's [1, 3], got 0",
			"tune_config.search_alg.points_to_evaluate.1.layers: expected an integer for the randint domain, got number 2.5",
			`tune_config.search_alg.points_to_evaluate.1.opt.name: not one of the choice values of param_space, got string "rmsprop"`,
		}},
		{name: "keys not in the space", points: []map[string]any{
			{"learning_rate": 0.1, "lr_": 0.1, "opt": map[string]any{"nesterow": true}, "dims": 3},
		}, errs: []string{
			"tune_config.search_alg.points_to_evaluate.0.dims: expected a list of 2 values, as in param_space, got integer 3",
			"tune_config.search_alg.points_to_evaluate.0.learning_rate: not a key of param_space",
			`tune_config.search_alg.points_to_evaluate.0.lr_: not a key of param_space, did you mean "lr"?`,
			`tune_config.search_alg.points_to_evaluate.0.opt.nesterow: not a key of param_space, did you mean "nesterov"?`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec(events.TuneConfig{SearchAlg: tt.alg, PointsToEvaluate: tt.points})
			s.ParamSpace = space
			if got := messages(Check(s)); !slices.Equal(got, tt.errs) {
				t.Errorf("Check:\n got %q\nwant %q", got, tt.errs)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	s := spec(events.TuneConfig{
		Scheduler: "asha", SchedulerConfig: map[string]any{"max_t": -1},
		SearchAlg: "tpe", SearchAlgConfig: map[string]any{"n_ei_candidate": 4},
		PointsToEvaluate: []map[string]any{{"lr": 1}},
	})
	s.RunConfig.Stoppers = []any{map[string]any{"type": "maximum_iteration", "max_iter": 0}}
	want := []string{
		`tune_config.metric: required by scheduler "asha": set tune_config.metric (or metric in tune_config.scheduler)`,
		`tune_config.mode: required by scheduler "asha": set tune_config.mode (or mode in tune_config.scheduler) to "min" or "max"`,
		"tune_config.scheduler.max_t: must be > 0, got -1",
		"tune_config.scheduler.grace_period: must be <= max_t (-1), got 1",
		`tune_config.search_alg.n_ei_candidate: unknown key, did you mean "n_ei_candidates"?`,
		"tune_config.search_alg.points_to_evaluate.0.lr: must be within the loguniform domain's [0.0001, 0.1], got 1",
		"run_config.stoppers.0.max_iter: must be >= 1, got 0",
	}
	if got := messages(Check(s)); !slices.Equal(got, want) {
		t.Errorf("Check:\n got %q\nwant %q", got, want)
	}

	ok := spec(events.TuneConfig{Metric: "loss", Mode: "min", Scheduler: "asha", SearchAlg: "tpe"})
	ok.RunConfig.Stoppers = map[string]any{"type": "timeout", "timeout": 60}
	if errs := Check(ok); errs != nil {
		t.Errorf("Check of a good spec: %q", messages(errs))
	}
	// A broken param_space is its parser's to report.
	ok.ParamSpace = map[string]any{"lr": map[string]any{"uniform": []any{1, 0}}}
	ok.TuneConfig.PointsToEvaluate = []map[string]any{{"x": 1}}
	if errs := Check(ok); errs != nil {
		t.Errorf("Check with a broken space: %q", messages(errs))
	}
}

// newStopper builds the spec's stoppers as the fold does.
func newStopper(s *events.ExperimentSpec) (stopper.Stopper, error) {
	st, err := Parse(s)
	if err != nil {
		return nil, err
	}
	return st.NewStopper()
}

func TestStopper(t *testing.T) {
	s := spec(events.TuneConfig{})
	if st, err := newStopper(s); st != nil || err != nil {
		t.Errorf("no stoppers: %v, %v", st, err)
	}
	s.RunConfig.Stoppers = []any{map[string]any{"type": "maximum_iteration", "max_iter": 10}, map[string]any{"type": "timeout", "timeout": 5}}
	st, err := newStopper(s)
	if _, ok := st.(*stopper.CombinedStopper); !ok || err != nil {
		t.Errorf("list: %T, %v", st, err)
	}
	s.RunConfig.Stoppers = map[string]any{"type": "trial_plateau", "metric": "loss", "std": -1}
	if _, err := newStopper(s); err == nil || err.Error() != "run_config.stoppers.std: must be > 0, got -1" {
		t.Errorf("bad std: %v", err)
	}
}

// TestDriverFunctionsNeedADriver: sample_from and PBT's functions are the
// driver's; a spec without a driver section is refused at their keys, and
// sample_from is refused with a searcher that models the space.
func TestDriverFunctionsNeedADriver(t *testing.T) {
	spec := &events.ExperimentSpec{
		Name: "e", Trainable: events.Trainable{Name: "fn"},
		ParamSpace: map[string]any{"wd": map[string]any{"sample_from": "f"}},
		TuneConfig: events.TuneConfig{Metric: "loss", Mode: "min", Scheduler: "pbt", SchedulerConfig: map[string]any{
			"custom_explore_fn": "clamp", "hyperparam_mutations": map[string]any{"lr": map[string]any{"sample_from": "g"}},
		}},
	}
	var got []string
	for _, e := range Check(spec) {
		got = append(got, e.Error())
	}
	want := []string{
		"tune_config.scheduler.custom_explore_fn: calls a function of the driver's, and the spec has no driver section (the Python SDK's Tuner.fit writes one)",
		"tune_config.scheduler.hyperparam_mutations.lr: calls a function of the driver's, and the spec has no driver section (the Python SDK's Tuner.fit writes one)",
		"param_space.wd: sample_from calls a function of the driver's, and the spec has no driver section (the Python SDK's Tuner.fit writes one)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Check:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	spec.Driver = &events.DriverSpec{}
	spec.TuneConfig.Scheduler, spec.TuneConfig.SchedulerConfig, spec.TuneConfig.SearchAlg = "", nil, SearchTPE
	if errs := Check(spec); len(errs) != 1 || !strings.Contains(errs[0].Error(), `"tpe" cannot model it`) {
		t.Errorf("Check with tpe: %v", errs)
	}
}

// TestEvaluatedRewardsCheck: evaluated_rewards gives one value per point,
// and each point is then a whole trial.
func TestEvaluatedRewardsCheck(t *testing.T) {
	spec := &events.ExperimentSpec{
		Name: "e", Trainable: events.Trainable{Name: "fn"},
		ParamSpace: map[string]any{"x": map[string]any{"uniform": []any{0.0, 1.0}}, "y": map[string]any{"choice": []any{1.0, 2.0}}},
		TuneConfig: events.TuneConfig{Metric: "loss", Mode: "min", SearchAlg: SearchTPE,
			SearchAlgConfig:  map[string]any{"evaluated_rewards": []any{0.5}},
			PointsToEvaluate: []map[string]any{{"x": 0.5}, {"x": 0.2, "y": 1.0}}},
	}
	var got []string
	for _, e := range Check(spec) {
		got = append(got, e.Error())
	}
	want := []string{
		"tune_config.search_alg.evaluated_rewards: must give a value for each of the 2 points_to_evaluate, got 1",
		"tune_config.search_alg.points_to_evaluate.0.y: missing: with evaluated_rewards each point is a trial already run, and gives every domain of param_space a value",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Check:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
