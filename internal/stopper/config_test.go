package stopper

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/tunejet/tunejet/internal/settings"
)

// yamlValue decodes YAML as the experiment file's parser does.
func yamlValue(t *testing.T, src string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(src), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParse(t *testing.T) {
	half := 0.5
	tests := []struct {
		name string
		src  string
		want Stopper
	}{
		{"one of each", `
- {type: maximum_iteration, max_iter: 10}
- {type: trial_plateau, metric: loss, std: 0.02, num_results: 5, grace_period: 0, metric_threshold: 0.5, mode: min}
- {type: experiment_plateau, metric: acc, std: 0.01, top: 3, mode: max, patience: 2}
- {type: timeout, timeout: 3600}
- {type: combined, stoppers: [{type: timeout, timeout: 1.5}]}
`, Combined(
			MaximumIteration(10),
			&TrialPlateauStopper{Metric: "loss", Std: 0.02, NumResults: 5, GracePeriod: 0, MetricThreshold: &half, Mode: ModeMin},
			&ExperimentPlateauStopper{Metric: "acc", Std: 0.01, Top: 3, Mode: ModeMax, Patience: 2},
			Timeout(3600),
			Combined(Timeout(1.5)),
		)},
		{"Ray's defaults", `
- {type: trial_plateau, metric: loss}
- {type: experiment_plateau, metric: loss}
`, Combined(TrialPlateau("loss"), ExperimentPlateau("loss"))},
		{"null takes the default", `{type: trial_plateau, metric: loss, std: null, mode: null, metric_threshold: null}`,
			TrialPlateau("loss")},
		{"one mapping is one stopper", `{type: timeout, timeout: 60}`, Timeout(60)},
		{"integral floats are integers", `{type: maximum_iteration, max_iter: 3.0}`, MaximumIteration(3)},
		{"an empty list never stops", `[]`, Combined()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("run_config.stoppers", yamlValue(t, tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseJSON(t *testing.T) {
	src := `[{"type": "trial_plateau", "metric": "loss", "num_results": 3}, {"type": "timeout", "timeout": 60}]`
	want := TrialPlateau("loss")
	want.NumResults = 3
	for _, useNumber := range []bool{false, true} {
		dec := json.NewDecoder(strings.NewReader(src))
		if useNumber {
			dec.UseNumber()
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		got, err := Parse("stoppers", v)
		if err != nil {
			t.Fatalf("UseNumber %v: %v", useNumber, err)
		}
		if diff := cmp.Diff(Combined(want, Timeout(60)), got); diff != "" {
			t.Errorf("UseNumber %v: Parse (-want +got):\n%s", useNumber, diff)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"std must be positive", `[{type: trial_plateau, metric: loss, std: -1}]`,
			[]string{"stoppers.0.std: must be > 0, got -1"}},
		{"type is required", `[{metric: loss}]`,
			[]string{"stoppers.0.type: required"}},
		{"type must be a string", `{type: [trial_plateau]}`,
			[]string{"stoppers.type: expected a string, got a list"}},
		{"unknown type", `[{type: timeout, timeout: 1}, {type: trial_platau, metric: loss}]`,
			[]string{`stoppers.1.type: unknown stopper type "trial_platau", did you mean "trial_plateau"?`}},
		{"misspelt key", `{type: trial_plateau, metric: loss, num_result: 3}`,
			[]string{`stoppers.num_result: unknown key, did you mean "num_results"?`}},
		{"unknown key", `{type: trial_plateau, metric: loss, stdev: 0.1, max_t: 1}`,
			[]string{
				"stoppers.max_t: unknown key; valid keys: grace_period, metric, metric_threshold, mode, num_results, std, type",
				"stoppers.stdev: unknown key; valid keys: grace_period, metric, metric_threshold, mode, num_results, std, type",
			}},
		{"required arguments", `[{type: maximum_iteration}, {type: timeout}, {type: trial_plateau}, {type: experiment_plateau}, {type: combined}]`,
			[]string{
				"stoppers.0.max_iter: required", "stoppers.1.timeout: required", "stoppers.2.metric: required",
				"stoppers.3.metric: required", "stoppers.4.stoppers: required",
			}},
		{"integers", `{type: experiment_plateau, metric: loss, top: 2.5, patience: "1"}`,
			[]string{`stoppers.patience: expected an integer, got string "1"`, "stoppers.top: expected an integer, got number 2.5"}},
		{"numbers", `{type: timeout, timeout: 1h}`,
			[]string{`stoppers.timeout: expected a finite number, got string "1h"`}},
		{"experiment plateau ranges", `{type: experiment_plateau, metric: loss, std: 0, top: 1, mode: mn, patience: -1}`,
			[]string{
				"stoppers.std: must be > 0, got 0", "stoppers.top: must be >= 2, got 1",
				`stoppers.mode: must be "min" or "max", got "mn"`, "stoppers.patience: must be >= 0, got -1",
			}},
		{"trial plateau ranges", `{type: trial_plateau, metric: "", num_results: 0, grace_period: -1, mode: up}`,
			[]string{
				"stoppers.metric: required", "stoppers.num_results: must be >= 1, got 0",
				"stoppers.grace_period: must be >= 0, got -1", `stoppers.mode: must be "min" or "max", got "up"`,
			}},
		{"metric_threshold needs a mode", `{type: trial_plateau, metric: loss, metric_threshold: 0}`,
			[]string{"stoppers.mode: must be min or max when metric_threshold is given"}},
		{"max_iter and timeout ranges", `[{type: maximum_iteration, max_iter: 0}, {type: timeout, timeout: -5}]`,
			[]string{"stoppers.0.max_iter: must be >= 1, got 0", "stoppers.1.timeout: must be > 0, got -5"}},
		{"neither a list nor a mapping", `trial_plateau`,
			[]string{`stoppers: must be a list of stoppers or a mapping {type: ...}, got string "trial_plateau"`}},
		{"combined wants a list", `{type: combined, stoppers: {type: timeout, timeout: 1}, extra: 1}`,
			[]string{"stoppers.extra: unknown key; valid keys: stoppers, type", "stoppers.stoppers: must be a list of stoppers, got a mapping"}},
		{"nested keys", `{type: combined, stoppers: [{type: timeout, timeout: 0}]}`,
			[]string{"stoppers.stoppers.0.timeout: must be > 0, got 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("stoppers", yamlValue(t, tt.src))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, settings.ErrInvalid) {
				t.Errorf("%v is not ErrInvalid", err)
			}
			var ke *settings.Error
			if !errors.As(err, &ke) || ke.Error() != tt.want[0] {
				t.Errorf("first *settings.Error = %v, want %q", ke, tt.want[0])
			}
			if diff := cmp.Diff(tt.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		s    Stopper
		want string
	}{
		{"defaults are valid", Combined(TrialPlateau("loss"), ExperimentPlateau("loss"), MaximumIteration(1), Timeout(1)), ""},
		{"keys are relative to the stopper", Combined(TrialPlateau(""), Combined(Timeout(0)), nil),
			"0.metric: required\n1.0.timeout: must be > 0, got 0\n2: must not be nil"},
		{"a stopper built without Ray's defaults", &ExperimentPlateauStopper{Metric: "loss"},
			"std: must be > 0, got 0\ntop: must be >= 2, got 0\nmode: must be \"min\" or \"max\", got \"\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := Validate(tt.s); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Validate = %q, want %q", got, tt.want)
			}
		})
	}
}
