package spec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/search"

	"github.com/tunejet/tunejet/internal/settings"
)

// head is the first two lines of most test files.
const head = "name: exp\ntrainable: fn\n"

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want string
	}{
		{"unknown top-level key", head + "param_spaec: {}\n",
			`exp.yaml:3: param_spaec: unknown key, did you mean "param_space"?`},
		{"unknown nested key", head + "tune_config:\n  metric: loss\n  num_sample: 3\n",
			`exp.yaml:5: tune_config.num_sample: unknown key, did you mean "num_samples"?`},
		{"unknown key in camel case", head + "tune_config:\n  numSamples: 3\n",
			`exp.yaml:4: tune_config.numSamples: unknown key, did you mean "num_samples"?`},
		{"unknown key without a close match", head + "tune_config:\n  foo: 1\n",
			"exp.yaml:4: tune_config.foo: unknown key; valid keys: max_concurrent_trials, metric, metrics, mode, modes, num_samples, points_to_evaluate, reproducible, scheduler, scheduler_config, search_alg, search_alg_config, seed, time_budget_s, wait_for_decisions, warm_start"},
		{"unknown key deep inside", head + "run_config:\n  failure_config:\n    max_failure: 1\n",
			`exp.yaml:5: run_config.failure_config.max_failure: unknown key, did you mean "max_failures"?`},
		{"unknown trainable key", "name: exp\ntrainable:\n  command: [a]\n  cwd: /tmp\n",
			"exp.yaml:4: trainable.cwd: unknown key; valid keys: command, fork_server, name, resources"},
		{"string for an int", head + "tune_config:\n  num_samples: ten\n",
			`exp.yaml:4: tune_config.num_samples: expected an integer, got string "ten"`},
		{"quoted number for an int", head + "tune_config:\n  num_samples: \"3\"\n",
			`exp.yaml:4: tune_config.num_samples: expected an integer, got string "3"`},
		{"float for an int", head + "tune_config:\n  seed: 1.5\n",
			"exp.yaml:4: tune_config.seed: expected an integer, got number 1.5"},
		{"int for a string", head + "tune_config:\n  mode: 5\n",
			"exp.yaml:4: tune_config.mode: expected \"min\" or \"max\" or a list of them (several objectives), got integer 5"},
		{"list for a mapping", head + "tune_config: [1, 2]\n",
			"exp.yaml:3: tune_config: expected a mapping, got a list"},
		{"string for a number", head + "tune_config:\n  time_budget_s: 1h\n",
			`exp.yaml:4: tune_config.time_budget_s: expected a finite number, got string "1h"`},
		{"infinite number", head + "run_config:\n  failure_config:\n    heartbeat_timeout_s: .inf\n",
			"exp.yaml:5: run_config.failure_config.heartbeat_timeout_s: expected a finite number, got number +Inf"},
		{"string for a bool", head + "run_config:\n  sync_config:\n    sync_artifacts: \"yes\"\n",
			`exp.yaml:5: run_config.sync_config.sync_artifacts: expected a boolean, got string "yes"`},
		{"command as a string", "name: exp\ntrainable:\n  command: python3 train.py\n",
			`exp.yaml:3: trainable.command: expected a list of strings, got string "python3 train.py"; write it as a list, e.g. ["python3", "train.py"]`},
		{"command element not a string", "name: exp\ntrainable:\n  command:\n    - python3\n    - [x]\n",
			"exp.yaml:5: trainable.command.1: expected a string, got a list"},
		{"command missing", "name: exp\ntrainable:\n  resources: {cpu: 1}\n",
			`exp.yaml:2: trainable.command: required in the mapping form, e.g. command: ["python3", "train.py"], unless name names a registered Go trainable`},
		{"trainable of the wrong type", "name: exp\ntrainable: 5\n",
			"exp.yaml:2: trainable: expected a registered trainable name or a mapping {command: [...]}, got integer 5"},
		{"trainable missing", "name: exp\n",
			"exp.yaml:1: trainable: required: the name of a registered Go trainable, or {command: [program, args...]}"},
		{"empty program", "name: exp\ntrainable:\n  command: [\"\", x]\n",
			"exp.yaml:3: trainable.command.0: the program must not be empty"},
		{"fork server without a command", "name: exp\ntrainable:\n  name: fn\n  fork_server: true\n",
			"exp.yaml:4: trainable.fork_server: only a command trainable can be a fork server; a Go trainable runs in the runner"},
		{"zero count", head + "tune_config:\n  num_samples: 0\n",
			"exp.yaml:4: tune_config.num_samples: must be a count >= 1, or -1 to sample until stopped; got 0"},
		{"negative count", head + "tune_config:\n  num_samples: -2\n",
			"exp.yaml:4: tune_config.num_samples: must be a count >= 1, or -1 to sample until stopped; got -2"},
		{"negative concurrency", head + "tune_config:\n  max_concurrent_trials: -1\n",
			"exp.yaml:4: tune_config.max_concurrent_trials: must be >= 0 (0 means no limit), got -1"},
		{"zero time budget", head + "tune_config:\n  time_budget_s: 0\n",
			"exp.yaml:4: tune_config.time_budget_s: must be > 0 seconds, got 0"},
		{"bad mode", head + "param_space: {}\ntune_config:\n  metric: loss\n  mode: avg\n",
			`exp.yaml:6: tune_config.mode: must be "min" or "max", got "avg"`},
		{"one mode for several metrics", head + "tune_config: {metric: [loss, latency_ms], mode: min}\n",
			"exp.yaml:3: tune_config.mode: metric lists 2 metrics: give mode as a list of as many modes, e.g. [min, min]"},
		{"too few modes", head + "tune_config: {metric: [loss, latency_ms], mode: [min]}\n",
			"exp.yaml:3: tune_config.mode: must give one mode for each of the 2 metrics, got 1"},
		{"bad mode in a list", head + "tune_config: {metric: [loss, latency_ms], mode: [min, avg]}\n",
			`exp.yaml:3: tune_config.mode: mode 2 (of "latency_ms") must be "min" or "max", got "avg"`},
		{"a metric twice", head + "tune_config: {metric: [loss, loss], mode: [min, min]}\n",
			`exp.yaml:3: tune_config.metric: names "loss" twice`},
		{"metric list not of names", head + "tune_config: {metric: [loss, 1]}\n",
			"exp.yaml:3: tune_config.metric: expected a metric name or a list of them, got integer 1 in the list"},
		{"mode list for one metric", head + "tune_config: {metric: loss, mode: [min, max]}\n",
			"exp.yaml:3: tune_config.mode: a list of 2 modes needs a list of as many metrics in tune_config.metric"},
		{"metrics in both forms", head + "tune_config: {metric: [a, b], metrics: [a, b], mode: [min, max]}\n",
			"exp.yaml:3: tune_config.metrics: give the metrics in one place: metric: [...] (Ray's form) or here"},
		{"bad search_alg", head + "tune_config:\n  search_alg: bayes\n",
			`exp.yaml:4: tune_config.search_alg: unknown search algorithm "bayes"; valid: bayesopt, external, gp, grid, nsga2, random, tpe`},
		{"bad scheduler", head + "tune_config:\n  scheduler: hyperbnd\n",
			`exp.yaml:4: tune_config.scheduler: unknown scheduler "hyperbnd" (did you mean "hyperband"?); valid: asha, async_hyperband, fifo, hyperband, median_stopping_rule, pbt`},
		{"pbt with nothing to mutate", head + "tune_config:\n  metric: loss\n  mode: min\n  scheduler: {type: pbt, perturbation_interval: 2}\n",
			"exp.yaml:6: tune_config.scheduler.hyperparam_mutations: must name at least one key"},
		{"uniform low > high", head + "param_space:\n  model:\n    depth: 3\n    lr:\n      uniform: [0.5, 0.1]\n",
			"exp.yaml:6: param_space.model.lr: uniform: low (0.5) must be <= high (0.1)"},
		{"domain in a list", head + "param_space:\n  layers:\n    - 64\n    - {randint: [8, 8]}\n",
			"exp.yaml:6: param_space.layers.1: randint: low (8) must be < high (8); high is exclusive"},
		{"grid search_alg with a random domain", head + "param_space:\n  a: {grid_search: [1, 2]}\n  lr: {loguniform: [1e-4, 1e-1]}\ntune_config:\n  search_alg: grid\n",
			`exp.yaml:5: param_space.lr: loguniform is a random domain; search_alg "grid" allows only grid_search and plain values`},
		{"misspelled distribution", head + "param_space:\n  bs: {lograndint: [16, 256]}\n  lr: {log_uniform: [0.001, 0.1]}\n",
			`exp.yaml:5: param_space.lr.log_uniform: unknown distribution, did you mean "loguniform"? (for a constant mapping, write {literal: {log_uniform: ...}})`},
		{"misspelled distribution in block style", head + "param_space:\n  model:\n    lr:\n      LogUniform:\n        lower: 0.001\n        upper: 0.1\n",
			`exp.yaml:6: param_space.model.lr.LogUniform: unknown distribution, did you mean "loguniform"? (for a constant mapping, write {literal: {LogUniform: ...}})`},
		{"sample_from", head + "param_space:\n  wd: {sample_from: \"lambda spec: 0.1\"}\n",
			"exp.yaml:4: param_space.wd: sample_from calls a function of the driver's, and the spec has no driver section (the Python SDK's Tuner.fit writes one)"},
		{"misspelled distribution in a choice", head + "param_space:\n  opt:\n    choice:\n      - sgd\n      - {grid-search: [1, 2]}\n",
			`exp.yaml:7: param_space.opt.choice.1.grid-search: unknown distribution, did you mean "grid_search"? (for a constant mapping, write {literal: {grid-search: ...}})`},
		{"NaN in param_space", head + "param_space:\n  a: [1, .nan]\n",
			"exp.yaml:4: param_space.a.1: expected a finite number, got NaN; JSON cannot hold it"},
		{"number out of range", head + "param_space:\n  a: -1.5e999\n",
			"exp.yaml:4: param_space.a: number -1.5e999 is out of range"},
		{"param_space not a mapping", head + "param_space: [1]\n",
			"exp.yaml:3: param_space: expected a mapping, got a list"},
		{"bad fail_fast", head + "run_config:\n  failure_config:\n    fail_fast: maybe\n",
			"exp.yaml:5: run_config.failure_config.fail_fast: fail_fast must be one of {bool, 'raise'}. Got maybe."},
		{"fail_fast as a quoted bool", head + "run_config:\n  failure_config:\n    fail_fast: \"true\"\n",
			"exp.yaml:5: run_config.failure_config.fail_fast: fail_fast must be one of {bool, 'raise'}. Got true."},
		{"fail_fast with max_failures", head + "run_config:\n  failure_config:\n    fail_fast: true\n    max_failures: 2\n",
			"exp.yaml:6: run_config.failure_config.max_failures: max_failures must be 0 if fail_fast=True."},
		{"fail_fast raise with max_failures", head + "run_config:\n  failure_config:\n    max_failures: -1\n    fail_fast: RAISE\n",
			"exp.yaml:5: run_config.failure_config.max_failures: max_failures must be 0 if fail_fast='raise'."},
		{"max_failures below -1", head + "run_config:\n  failure_config:\n    max_failures: -2\n",
			"exp.yaml:5: run_config.failure_config.max_failures: must be >= -1 (-1 retries forever), got -2"},
		{"zero heartbeat", head + "run_config:\n  failure_config:\n    heartbeat_timeout_s: 0\n",
			"exp.yaml:5: run_config.failure_config.heartbeat_timeout_s: must be > 0 seconds, got 0"},
		{"num_to_keep 0", head + "run_config:\n  checkpoint_config:\n    num_to_keep: 0\n",
			"exp.yaml:5: run_config.checkpoint_config.num_to_keep: Received invalid num_to_keep: 0. Must be None or an integer >= 1."},
		{"bad score order", head + "run_config:\n  checkpoint_config:\n    checkpoint_score_order: avg\n",
			`exp.yaml:5: run_config.checkpoint_config.checkpoint_score_order: checkpoint_score_order must be either "max" or "min".`},
		{"nested stop criterion", head + "run_config:\n  stop:\n    training_iteration: 10\n    nested:\n      loss: 0.1\n",
			"exp.yaml:6: run_config.stop.nested: Stopping criteria is now flattened by default. Use forward slashes to nest values `key1/key2/key3`."},
		{"sync_config not a mapping", head + "run_config:\n  sync_config: [1]\n",
			"exp.yaml:4: run_config.sync_config: expected a mapping, got a list"},
		{"syncer not a mapping", head + "run_config:\n  sync_config:\n    syncer: 3\n",
			"exp.yaml:5: run_config.sync_config.syncer: expected a mapping, got integer 3"},
		{"int for an optional bool", head + "run_config:\n  sync_config:\n    sync_artifacts_on_checkpoint: 1\n",
			"exp.yaml:5: run_config.sync_config.sync_artifacts_on_checkpoint: expected a boolean, got integer 1"},
		{"exclude pattern not a string", head + "run_config:\n  sync_config:\n    exclude:\n      - a\n      - 3\n",
			"exp.yaml:7: run_config.sync_config.exclude.1: expected a string, got integer 3"},
		{"seed out of range", head + "tune_config:\n  seed: 18446744073709551616\n",
			"exp.yaml:4: tune_config.seed: expected an integer, got number 1.8446744073709552e+19"},
		{"trainable null", "name: exp\ntrainable: null\n",
			"exp.yaml:2: trainable: required: the name of a registered Go trainable, or {command: [program, args...]}"},
		{"stop criterion not a number", head + "run_config:\n  stop:\n    loss: low\n",
			`exp.yaml:5: run_config.stop.loss: expected a finite number, got string "low"`},
		{"negative sync_period", head + "run_config:\n  sync_config:\n    sync_period: -1\n",
			"exp.yaml:5: run_config.sync_config.sync_period: must be >= 0 seconds, got -1"},
		{"zero sync_period", head + "run_config:\n  sync_config:\n    sync_period: 0\n",
			"exp.yaml:5: run_config.sync_config.sync_period: 0 cannot be stored: it means the default (300 seconds); use a small period such as 1 to sync often"},
		{"zero sync_timeout", head + "run_config:\n  sync_config:\n    sync_timeout: 0\n",
			"exp.yaml:5: run_config.sync_config.sync_timeout: must be > 0 seconds, got 0"},
		{"empty storage_path", head + "run_config:\n  storage_path: \"\"\n",
			"exp.yaml:4: run_config.storage_path: must not be empty"},
		{"invalid name", "name: my exp\ntrainable: fn\n",
			`exp.yaml:1: name: experiment name "my exp": must be 1-128 characters of letters, digits, '_' and '-', starting with a letter or digit`},
		{"invalid run_config.name", "trainable: fn\nrun_config:\n  name: a.b\n",
			`exp.yaml:3: name: experiment name "a.b": must be 1-128 characters of letters, digits, '_' and '-', starting with a letter or digit`},
		{"empty name with run_config.name", "name: \"\"\ntrainable: fn\nrun_config:\n  name: x\n",
			"exp.yaml:1: name: experiment name \"\": must be 1-128 characters of letters, digits, '_' and '-', starting with a letter or digit\n" +
				`exp.yaml:4: run_config.name: must equal name ("") when both are given, got "x"`},
		{"empty run_config.name", "trainable: fn\nrun_config:\n  name: \"\"\n",
			`exp.yaml:3: name: experiment name "": must be 1-128 characters of letters, digits, '_' and '-', starting with a letter or digit`},
		{"conflicting names", head + "run_config:\n  name: other\n",
			`exp.yaml:4: run_config.name: must equal name ("exp") when both are given, got "other"`},
		{"duplicate key", head + "tune_config:\n  metric: a\n  metric: b\n",
			"exp.yaml:5: tune_config.metric: duplicate key (first given on line 4)"},
		{"duplicate key in param_space", head + "param_space:\n  a: 1\n  a: 2\n",
			"exp.yaml:5: param_space.a: duplicate key (first given on line 4)"},
		{"not a mapping", "- a\n- b\n", "exp.yaml:1: expected a mapping, got a list"},
		{"syntax error", head + "tune_config:\n  metric: loss\n   mode: min\n",
			"exp.yaml:5: syntax error: mapping values are not allowed in this context"},
		{"tab indentation", head + "tune_config:\n\tmetric: loss\n",
			"exp.yaml:4: syntax error: found character that cannot start any token"},
		{"empty file", "", "exp.yaml:1: empty experiment file"},
		{"comments only", "# nothing\n", "exp.yaml:1: empty experiment file"},
		{"two documents", head + "---\nname: b\n", "exp.yaml:3: more than one YAML document; an experiment file holds one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("exp.yaml", []byte(tt.file))
			if err == nil {
				t.Fatal("Parse: no error")
			}
			if err.Error() != tt.want {
				t.Errorf("error:\n got %s\nwant %s", err, tt.want)
			}
			if !errors.Is(err, settings.ErrInvalid) {
				t.Errorf("errors.Is(%v, settings.ErrInvalid) = false", err)
			}
		})
	}
}

func TestParseJSONErrors(t *testing.T) {
	tests := []struct{ name, file, want string }{
		{"bad mode", `{
  "name": "exp",
  "trainable": "fn",
  "tune_config": {
    "mode": "avg"
  }
}`, `exp.json:5: tune_config.mode: must be "min" or "max", got "avg"`},
		{"uniform low > high", `{
  "trainable": "fn",
  "param_space": {
    "lr": {"uniform": [0.5, 0.1]}
  }
}`, "exp.json:4: param_space.lr: uniform: low (0.5) must be <= high (0.1)"},
		{"misspelled distribution", `{
  "trainable": "fn",
  "param_space": {
    "bs": {"lograndint": [16, 256]},
    "lr": {"log_uniform": [0.001, 0.1]}
  }
}`, `exp.json:5: param_space.lr.log_uniform: unknown distribution, did you mean "loguniform"? (for a constant mapping, write {literal: {log_uniform: ...}})`},
		{"sample_from", `{"trainable": "fn",
 "param_space": {"wd": {"sample_from": "f"}}}`,
			"exp.json:2: param_space.wd: sample_from calls a function of the driver's, and the spec has no driver section (the Python SDK's Tuner.fit writes one)"},
		{"number out of range", "{\"trainable\": \"fn\",\n \"param_space\": {\"big\": 1e400}}",
			"exp.json:2: param_space.big: number 1e400 is out of range"},
		{"number out of range, reported once", "{\"trainable\": \"fn\",\n \"run_config\": {\"stop\": {\"a\": 1e400}}}",
			"exp.json:2: run_config.stop.a: number 1e400 is out of range"},
		{"duplicate key", "{\"trainable\": \"fn\",\n \"name\": \"a\",\n \"name\": \"b\"}",
			"exp.json:3: name: duplicate key (first given on line 2)"},
		// Invalid JSON goes to the YAML parser, which reports the line where
		// the enclosing context starts.
		{"syntax error", "{\n  \"trainable\": \"fn\",\n  \"name\" \"x\"\n}\n",
			"exp.json:2: syntax error: did not find expected ',' or '}'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("exp.json", []byte(tt.file))
			if err == nil || err.Error() != tt.want {
				t.Errorf("error:\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}

// The YAML parser refuses some valid JSON; Parse reads JSON as
// encoding/json does (reproducers in testdata/fuzz/FuzzParseJSON).
func TestParseJSONTheYAMLParserRefuses(t *testing.T) {
	long := strings.Repeat("k", 1100)
	file := `{"name": "x", "trainable": "fn", "param_space": {
  "smile": "\ud83d\ude00", "lone": "\ud800x", "` + long + `": 1, "big": 11000000000000000000}}`
	s, err := Parse("exp.json", []byte(file))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := map[string]any{"smile": "\U0001F600", "lone": "\ufffdx", long: 1, "big": 1.1e19}
	if diff := cmp.Diff(want, s.ParamSpace); diff != "" {
		t.Errorf("param_space (-want +got):\n%s", diff)
	}
}

func TestParseReportsEveryProblemByLine(t *testing.T) {
	file := head + "tune_config:\n  mode: avg\n  num_samples: 0\nrun_config:\n  stop: {a: {b: 1}}\n  checkpoint_config: {num_to_keep: -1}\n"
	_, err := Parse("exp.yaml", []byte(file))
	want := strings.Join([]string{
		`exp.yaml:4: tune_config.mode: must be "min" or "max", got "avg"`,
		"exp.yaml:5: tune_config.num_samples: must be a count >= 1, or -1 to sample until stopped; got 0",
		"exp.yaml:7: run_config.stop.a: Stopping criteria is now flattened by default. Use forward slashes to nest values `key1/key2/key3`.",
		"exp.yaml:8: run_config.checkpoint_config.num_to_keep: Received invalid num_to_keep: -1. Must be None or an integer >= 1.",
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("error:\n got %v\nwant %s", err, want)
	}
	var e *settings.Error
	if !errors.As(err, &e) || e.Line != 4 || e.Key != "tune_config.mode" {
		t.Errorf("errors.As gave %+v", e)
	}
}

const fullYAML = `# A full experiment.
name: mnist-lr
trainable:
  command: ["python3", "-u", "train.py"]
param_space:
  lr: {loguniform: [0.0001, 0.1]}
  momentum: {grid_search: [0.8, 0.9]}
  batch: 32
  model:
    layers: [64, {choice: [32, 64]}]
    act: relu
    dropout: null
tune_config:
  num_samples: 4
  metric: loss
  mode: min
  max_concurrent_trials: 2
  time_budget_s: 3600.5
  seed: 42
  search_alg: random
  scheduler: fifo
run_config:
  storage_path: s3://bucket/results
  name: mnist-lr
  stop:
    training_iteration: 10
    eval/acc: 0.99
  failure_config:
    max_failures: 0
    fail_fast: raise
    heartbeat_timeout_s: 5
  checkpoint_config:
    num_to_keep: 2
    checkpoint_score_attribute: loss
    checkpoint_score_order: min
  sync_config:
    sync_period: 60
    sync_timeout: 600
    sync_artifacts: true
    sync_artifacts_on_checkpoint: false
`

const fullJSON = `{
  "name": "mnist-lr",
  "trainable": {"command": ["python3", "-u", "train.py"]},
  "param_space": {
    "lr": {"loguniform": [0.0001, 0.1]},
    "momentum": {"grid_search": [0.8, 0.9]},
    "batch": 32,
    "model": {"layers": [64, {"choice": [32, 64]}], "act": "relu", "dropout": null}
  },
  "tune_config": {
    "num_samples": 4, "metric": "loss", "mode": "min", "max_concurrent_trials": 2,
    "time_budget_s": 3600.5, "seed": 42, "search_alg": "random", "scheduler": "fifo"
  },
  "run_config": {
    "storage_path": "s3://bucket/results",
    "name": "mnist-lr",
    "stop": {"training_iteration": 10, "eval/acc": 0.99},
    "failure_config": {"max_failures": 0, "fail_fast": "raise", "heartbeat_timeout_s": 5},
    "checkpoint_config": {"num_to_keep": 2, "checkpoint_score_attribute": "loss", "checkpoint_score_order": "min"},
    "sync_config": {"sync_period": 60, "sync_timeout": 600, "sync_artifacts": true, "sync_artifacts_on_checkpoint": false}
  }
}`

func TestParseYAMLAndJSONAgree(t *testing.T) {
	fromYAML, err := Parse("exp.yaml", []byte(fullYAML))
	if err != nil {
		t.Fatalf("Parse YAML: %v", err)
	}
	fromJSON, err := Parse("exp.json", []byte(fullJSON))
	if err != nil {
		t.Fatalf("Parse JSON: %v", err)
	}
	if diff := cmp.Diff(fromYAML, fromJSON); diff != "" {
		t.Errorf("YAML and JSON differ (-yaml +json):\n%s", diff)
	}
	seed, off := int64(42), false
	want := &events.ExperimentSpec{
		Name:      "mnist-lr",
		Trainable: events.Trainable{Name: "train", Command: []string{"python3", "-u", "train.py"}},
		ParamSpace: map[string]any{
			"lr":       map[string]any{"loguniform": []any{0.0001, 0.1}},
			"momentum": map[string]any{"grid_search": []any{0.8, 0.9}},
			"batch":    32,
			"model":    map[string]any{"layers": []any{64, map[string]any{"choice": []any{32, 64}}}, "act": "relu", "dropout": nil},
		},
		TuneConfig: events.TuneConfig{
			NumSamples: 4, Metric: "loss", Mode: "min", MaxConcurrentTrials: 2,
			TimeBudgetS: 3600.5, Seed: &seed, SearchAlg: "random", Scheduler: "fifo",
		},
		RunConfig: events.RunConfig{
			StoragePath:      "s3://bucket/results",
			Stop:             map[string]float64{"training_iteration": 10, "eval/acc": 0.99},
			FailureConfig:    events.FailureConfig{FailFast: events.FailFastRaise, HeartbeatTimeoutS: 5},
			CheckpointConfig: events.CheckpointConfig{NumToKeep: 2, ScoreAttribute: "loss", ScoreOrder: "min"},
			SyncConfig:       events.SyncConfig{SyncPeriodS: 60, SyncTimeoutS: 600, SyncArtifacts: true, SyncArtifactsOnCheckpoint: &off},
		},
	}
	if diff := cmp.Diff(want, fromYAML); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestParseDefaults(t *testing.T) {
	now = func() time.Time { return time.Date(2024, 3, 5, 7, 8, 9, 0, time.Local) }
	t.Cleanup(func() { now = time.Now })
	got, err := Parse("exp.yaml", []byte("trainable: my_fn\nrun_config:\n  checkpoint_config:\n    num_to_keep: null\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	on := true
	want := &events.ExperimentSpec{
		Name:       "my_fn_2024-03-05_07-08-09",
		Trainable:  events.Trainable{Name: "my_fn"},
		TuneConfig: events.TuneConfig{NumSamples: 1, SearchAlg: "random", Scheduler: "fifo"},
		RunConfig: events.RunConfig{
			FailureConfig:    events.FailureConfig{HeartbeatTimeoutS: 3},
			CheckpointConfig: events.CheckpointConfig{ScoreOrder: "max"},
			SyncConfig:       events.SyncConfig{SyncPeriodS: 300, SyncTimeoutS: 1800, SyncArtifactsOnCheckpoint: &on},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct{ name, file string }{
		{"num_samples -1", head + "tune_config: {num_samples: -1}\n"},
		{"max_concurrent_trials 0", head + "tune_config: {max_concurrent_trials: 0}\n"},
		{"max_failures -1", head + "run_config: {failure_config: {max_failures: -1}}\n"},
		{"fail_fast false with retries", head + "run_config: {failure_config: {fail_fast: false, max_failures: 3}}\n"},
		{"fail_fast Raise", head + "run_config: {failure_config: {fail_fast: Raise}}\n"},
		{"grid search_alg with grid only", head + "param_space: {a: {grid_search: [1]}, b: 2}\ntune_config: {search_alg: grid}\n"},
		{"equal names", head + "run_config: {name: exp}\n"},
		{"aliases", head + "param_space:\n  a: &x {grid_search: [1, 2]}\n  b: *x\n"},
		{"null values", head + "tune_config: {metric: null, seed: null}\nparam_space: null\n"},
		{"several metrics", head + "tune_config: {metric: [loss, latency_ms], mode: [min, max]}\n"},
		{"several metrics, wire form", head + "tune_config: {metrics: [loss, latency_ms], modes: [min, max]}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse("exp.yaml", []byte(tt.file)); err != nil {
				t.Errorf("Parse: %v", err)
			}
		})
	}
}

func TestParseLiteral(t *testing.T) {
	files := map[string]string{
		"exp.yaml": head + "param_space:\n  lr: {literal: {log_uniform: [0.001, 0.1]}}\n  wd: {literal: {sample_from: f}}\n  opt: {choice: [{literal: {uniform: 1}}, sgd]}\n",
		"exp.json": `{"name": "exp", "trainable": "fn", "param_space": {
  "lr": {"literal": {"log_uniform": [0.001, 0.1]}},
  "wd": {"literal": {"sample_from": "f"}},
  "opt": {"choice": [{"literal": {"uniform": 1}}, "sgd"]}}}`,
	}
	want := map[string]any{
		"lr":  map[string]any{"log_uniform": []any{0.001, 0.1}},
		"wd":  map[string]any{"sample_from": "f"},
		"opt": map[string]any{"uniform": 1},
	}
	for name, file := range files {
		t.Run(name, func(t *testing.T) {
			s, err := Parse(name, []byte(file))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			space, err := search.ParseSpace(s.ParamSpace)
			if err != nil {
				t.Fatalf("ParseSpace: %v", err)
			}
			for i := range 20 { // choice picks "sgd" or the literal
				config, _ := space.Trial(i, 3)
				if config["opt"] == "sgd" {
					config["opt"] = want["opt"]
				}
				if diff := cmp.Diff(want, config); diff != "" {
					t.Fatalf("trial %d config (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestParseFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "exp.yaml")
	if err := os.WriteFile(path, []byte("name: exp\ntrainable:\n  command: [python3, train.py]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := ParseFile(path)
	if err != nil {
		t.Fatalf("ParseFile: %v", err)
	}
	if s.Trainable.Dir != dir {
		t.Errorf("Dir = %q, want %q", s.Trainable.Dir, dir)
	}
	if _, err := ParseFile(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ParseFile of a missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("trainable: fn\nfoo: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFile(bad); err == nil || !strings.HasPrefix(err.Error(), bad+":2: foo: ") {
		t.Errorf("ParseFile error = %v, want it to start with %s:2: foo:", err, bad)
	}
}

func TestParsedSpecSurvivesJSON(t *testing.T) {
	s, err := Parse("exp.yaml", []byte(fullYAML))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	var back events.ExperimentSpec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if err := Validate(&back); err != nil {
		t.Errorf("Validate after a JSON round trip: %v", err)
	}
}

func TestParseDateAsString(t *testing.T) {
	s, err := Parse("exp.yaml", []byte("name: 2024-01-01\ntrainable: fn\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if s.Name != "2024-01-01" {
		t.Errorf("Name = %q", s.Name)
	}
}

func TestParseAliasBombs(t *testing.T) {
	tests := []struct{ name, file, want string }{
		{"cycle", "trainable: fn\nparam_space:\n  a: &x [1, *x]\n",
			"exp.yaml:3: param_space.a.1: alias refers to a value that contains it"},
		{"expansion", "trainable: fn\nparam_space:\n" +
			"  a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" +
			"  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" +
			"  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
			"  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n" +
			"  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n" +
			"  f: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
			"too many values after expanding aliases (more than 100000)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("exp.yaml", []byte(tt.file))
			if err == nil || !strings.HasSuffix(err.Error(), tt.want) {
				t.Errorf("error:\n got %v\nwant ...%s", err, tt.want)
			}
		})
	}
}

func TestParseTuner(t *testing.T) {
	const space = "param_space:\n  lr: {loguniform: [1e-4, 1e-1]}\n  bs: {choice: [16, 32]}\n"
	tests := []struct {
		name     string
		file     string
		tune     events.TuneConfig
		stoppers any
	}{
		{"scheduler by name", head + "tune_config: {metric: loss, mode: min, scheduler: asha}\n",
			events.TuneConfig{Metric: "loss", Mode: "min", Scheduler: "asha"}, nil},
		{"scheduler mapping", head + "tune_config:\n  metric: loss\n  mode: min\n  scheduler: {type: asha, max_t: 81, grace_period: 1.5, stop_last_trials: false}\n",
			events.TuneConfig{Metric: "loss", Mode: "min", Scheduler: "asha",
				SchedulerConfig: map[string]any{"max_t": 81, "grace_period": 1.5, "stop_last_trials": false}}, nil},
		{"scheduler mapping with its own metric", head + "tune_config:\n  scheduler: {type: median_stopping_rule, metric: acc, mode: max}\n",
			events.TuneConfig{Scheduler: "median_stopping_rule", SchedulerConfig: map[string]any{"metric": "acc", "mode": "max"}}, nil},
		{"scheduler mapping of type only", head + "tune_config: {scheduler: {type: fifo}}\n",
			events.TuneConfig{Scheduler: "fifo"}, nil},
		{"median rule", head + space + "tune_config:\n  metric: loss\n  mode: min\n  scheduler:\n    type: median_stopping_rule\n    grace_period: 2\n" +
			"    time_attr: training_iteration\n    min_samples_required: 2\n",
			events.TuneConfig{Metric: "loss", Mode: "min", Scheduler: "median_stopping_rule", SchedulerConfig: map[string]any{
				"grace_period": 2, "time_attr": "training_iteration", "min_samples_required": 2,
			}}, nil},
		{"tpe mapping with points", head + space + "tune_config:\n  metric: loss\n  mode: min\n  search_alg:\n    type: tpe\n" +
			"    n_startup_trials: 5\n    gamma: hyperopt\n    points_to_evaluate:\n      - {lr: 0.01, bs: 32}\n      - {lr: 0.001}\n",
			events.TuneConfig{Metric: "loss", Mode: "min", SearchAlg: "tpe",
				SearchAlgConfig:  map[string]any{"n_startup_trials": 5, "gamma": "hyperopt"},
				PointsToEvaluate: []map[string]any{{"lr": 0.01, "bs": 32}, {"lr": 0.001}}}, nil},
		{"random with points", head + space + "tune_config:\n  search_alg: {type: random, points_to_evaluate: [{bs: 16}]}\n",
			events.TuneConfig{SearchAlg: "random", PointsToEvaluate: []map[string]any{{"bs": 16}}}, nil},
		{"tpe seed is the experiment's", head + "tune_config:\n  metric: loss\n  mode: min\n  search_alg: {type: tpe, seed: 7}\n",
			events.TuneConfig{Metric: "loss", Mode: "min", SearchAlg: "tpe", Seed: int64Ptr(7),
				SearchAlgConfig: map[string]any{"seed": 7}}, nil},
		{"wire form", head + space + "tune_config:\n  metric: loss\n  mode: min\n  scheduler: asha\n  scheduler_config: {max_t: 27}\n" +
			"  search_alg: tpe\n  search_alg_config: {multivariate: false}\n  points_to_evaluate: [{bs: 16}]\n",
			events.TuneConfig{Metric: "loss", Mode: "min", Scheduler: "asha", SchedulerConfig: map[string]any{"max_t": 27},
				SearchAlg: "tpe", SearchAlgConfig: map[string]any{"multivariate": false},
				PointsToEvaluate: []map[string]any{{"bs": 16}}}, nil},
		{"stoppers list", head + "run_config:\n  stoppers:\n    - {type: maximum_iteration, max_iter: 10}\n    - {type: timeout, timeout: 60}\n",
			events.TuneConfig{}, []any{
				map[string]any{"type": "maximum_iteration", "max_iter": 10},
				map[string]any{"type": "timeout", "timeout": 60},
			}},
		{"one stopper", head + "run_config:\n  stoppers: {type: trial_plateau, metric: loss, std: 0.01, mode: min}\n",
			events.TuneConfig{}, map[string]any{"type": "trial_plateau", "metric": "loss", "std": 0.01, "mode": "min"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("exp.yaml", []byte(tt.file))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := tt.tune
			setDefault(&want.NumSamples, DefaultNumSamples)
			setDefault(&want.SearchAlg, DefaultSearchAlg)
			setDefault(&want.Scheduler, DefaultScheduler)
			if diff := cmp.Diff(want, s.TuneConfig); diff != "" {
				t.Errorf("tune_config (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.stoppers, s.RunConfig.Stoppers); diff != "" {
				t.Errorf("stoppers (-want +got):\n%s", diff)
			}
			// The spec's JSON is an experiment file too, and reads back the same.
			wire, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			file := strings.Replace(string(wire), `"trainable":{"name":"fn"}`, `"trainable":"fn"`, 1)
			back, err := Parse("exp.json", []byte(file))
			if err != nil {
				t.Fatalf("Parse of the spec's JSON: %v\n%s", err, wire)
			}
			if again, _ := json.Marshal(back); string(again) != string(wire) {
				t.Errorf("the spec's JSON parses to another spec:\n%s\n%s", wire, again)
			}
		})
	}
}

func int64Ptr(v int64) *int64 { return &v }

func TestParseTuningErrors(t *testing.T) {
	const space = "param_space:\n  lr: {loguniform: [1e-4, 1e-1]}\n"
	tests := []struct{ name, file, want string }{
		{"misspelled scheduler setting",
			head + "tune_config:\n  metric: loss\n  mode: min\n  scheduler:\n    type: asha\n    grace_peroid: 2\n",
			`exp.yaml:8: tune_config.scheduler.grace_peroid: unknown key, did you mean "grace_period"?`},
		{"scheduler setting out of range",
			head + "tune_config:\n  metric: loss\n  mode: min\n  scheduler:\n    type: asha\n    max_t: 100\n    reduction_factor: 1\n",
			"exp.yaml:9: tune_config.scheduler.reduction_factor: must be > 1, got 1"},
		{"scheduler without a type", head + "tune_config:\n  scheduler:\n    max_t: 10\n",
			"exp.yaml:4: tune_config.scheduler: the mapping form needs a type, e.g. {type: asha, max_t: 100}"},
		{"scheduler type not a string", head + "tune_config:\n  scheduler:\n    type: [asha]\n",
			"exp.yaml:5: tune_config.scheduler.type: expected a string, got a list"},
		{"metric in both places",
			head + "tune_config:\n  metric: loss\n  mode: min\n  scheduler:\n    type: asha\n    metric: acc\n",
			"exp.yaml:8: tune_config.scheduler.metric: You passed a `metric` or `mode` argument to `Tuner()`, but the scheduler " +
				"you are using was already instantiated with their own `metric` and `mode` parameters. Either remove the arguments " +
				"from your scheduler or from `Tuner()`."},
		{"metric nowhere", head + "tune_config:\n  mode: min\n  scheduler: asha\n",
			`exp.yaml:3: tune_config.metric: required by scheduler "asha": set tune_config.metric (or metric in tune_config.scheduler)`},
		{"pbt mutation", head + "tune_config:\n  metric: loss\n  mode: min\n  scheduler:\n    type: pbt\n    hyperparam_mutations:\n      lr: {unifrom: [0, 1]}\n",
			`exp.yaml:9: tune_config.scheduler.hyperparam_mutations.lr.unifrom: unknown distribution, did you mean "uniform"? (for a constant mapping, write {literal: {unifrom: ...}})`},
		{"misspelled tpe setting", head + space + "tune_config:\n  metric: loss\n  mode: min\n  search_alg:\n    type: tpe\n    n_ei_candiates: 4\n",
			`exp.yaml:10: tune_config.search_alg.n_ei_candiates: unknown key, did you mean "n_ei_candidates"?`},
		{"a scheduler with several metrics", head + "tune_config: {metric: [loss, latency_ms], mode: [min, min], scheduler: asha}\n",
			`exp.yaml:3: tune_config.metric: scheduler "asha" judges trials by one metric, and tune_config.metric lists 2 (loss, latency_ms): ` +
				"use scheduler fifo (the default) with several metrics"},
		{"bayesopt with several metrics", head + space + "tune_config: {metric: [loss, latency_ms], mode: [min, min], search_alg: bayesopt}\n",
			`exp.yaml:5: tune_config.metric: search_alg "bayesopt" optimizes one metric, and tune_config.metric lists 2 (loss, latency_ms): ` +
				"use search_alg tpe, nsga2 or random with several metrics"},
		{"tpe with several metrics and no mode", head + space + "tune_config: {metric: [loss, latency_ms], search_alg: tpe}\n",
			`exp.yaml:5: tune_config.mode: required by search_alg "tpe": set tune_config.mode to a list of 2 modes, one for each metric`},
		{"tpe setting out of range, reported once", head + space + "tune_config: {metric: loss, mode: min, search_alg: {type: tpe, n_startup_trials: -1}}\n",
			"exp.yaml:5: tune_config.search_alg.n_startup_trials: must be >= 0, got -1"},
		{"nsga2 population of one", head + space + "tune_config: {metric: [loss, ms], mode: [min, min], search_alg: {type: nsga2, population_size: 1}}\n",
			"exp.yaml:5: tune_config.search_alg.population_size: must be >= 2, got 1"},
		{"nsga2 mutation_prob out of range", head + space + "tune_config: {metric: [loss, ms], mode: [min, min], search_alg: {type: nsga2, mutation_prob: 1.5}}\n",
			"exp.yaml:5: tune_config.search_alg.mutation_prob: must be a probability within [0, 1], or null for 1/number of parameters, got number 1.5"},
		{"nsga2 crossover object", head + space + "tune_config: {metric: [loss, ms], mode: [min, min], search_alg: {type: nsga2, crossover: sbx}}\n",
			"exp.yaml:5: tune_config.search_alg.crossover: takes a Python object in Optuna's NSGAIISampler and is not supported; nsga2 uses Optuna's defaults for it"},
		{"tpe without mode", head + space + "tune_config:\n  metric: loss\n  search_alg: tpe\n",
			`exp.yaml:5: tune_config.mode: required by search_alg "tpe": set tune_config.mode to "min" or "max"`},
		{"tpe with grid_search", head + "param_space:\n  bs: {grid_search: [1, 2]}\ntune_config: {metric: loss, mode: min, search_alg: tpe}\n",
			`exp.yaml:4: param_space.bs: grid_search is not supported by search_alg "tpe"; use a bounded domain (uniform, choice, ...) or search_alg random or grid`},
		{"point outside its domain", head + space + "tune_config:\n  search_alg:\n    type: random\n    points_to_evaluate:\n      - lr: 0.01\n      - lr: 2\n",
			"exp.yaml:10: tune_config.search_alg.points_to_evaluate.1.lr: must be within the loguniform domain's [0.0001, 0.1], got 2"},
		{"point with an unknown key", head + space + "tune_config:\n  search_alg:\n    type: random\n    points_to_evaluate:\n      - {lr: 0.01, LR: 2}\n",
			`exp.yaml:9: tune_config.search_alg.points_to_evaluate.0.LR: not a key of param_space, did you mean "lr"?`},
		{"points not mappings", head + "tune_config:\n  search_alg: {type: random, points_to_evaluate: [1]}\n",
			"exp.yaml:4: tune_config.search_alg.points_to_evaluate.0: expected a mapping (a config), got integer 1"},
		{"points with grid", head + "param_space: {a: {grid_search: [1, 2]}}\ntune_config:\n  search_alg: {type: grid, points_to_evaluate: [{a: 1}]}\n",
			`exp.yaml:5: tune_config.search_alg.points_to_evaluate: search_alg "grid" runs the grid and nothing else; use search_alg "random" or "tpe" to evaluate points first`},
		{"wire form settings at their keys", head + "tune_config:\n  metric: loss\n  mode: min\n  scheduler: asha\n  scheduler_config:\n    eta: 3\n",
			"exp.yaml:8: tune_config.scheduler_config.eta: unknown key; valid keys: brackets, grace_period, max_t, metric, mode, reduction_factor, stop_last_trials, time_attr"},
		{"wire form points at their keys", head + space + "tune_config:\n  points_to_evaluate:\n    - lr: 3\n",
			"exp.yaml:7: tune_config.points_to_evaluate.0.lr: must be within the loguniform domain's [0.0001, 0.1], got 3"},
		{"settings in two places", head + "tune_config:\n  scheduler: {type: fifo}\n  scheduler_config: {max_t: 1}\n",
			"exp.yaml:5: tune_config.scheduler_config: give scheduler's settings in one place: in the mapping scheduler: {type: ...} or here"},
		{"tpe seed unlike the experiment's", head + "tune_config:\n  metric: loss\n  mode: min\n  seed: 1\n  search_alg: {type: tpe, seed: 2}\n",
			"exp.yaml:7: tune_config.search_alg.seed: must equal tune_config.seed (1), which tpe draws from, got 2; set only one of them"},
		{"stopper", head + "run_config:\n  stoppers:\n    - type: maximum_iteration\n      max_iter: 0\n",
			"exp.yaml:6: run_config.stoppers.0.max_iter: must be >= 1, got 0"},
		{"NaN in a point", head + "param_space: {a: 1}\ntune_config:\n  search_alg: {type: random, points_to_evaluate: [{a: .nan}]}\n",
			"exp.yaml:5: tune_config.search_alg.points_to_evaluate.0.a: expected a finite number, got NaN; JSON cannot hold it"},
		{"stoppers not a list", head + "run_config:\n  stoppers: timeout\n",
			`exp.yaml:4: run_config.stoppers: expected a list of stoppers or a mapping {type: ...}, got string "timeout"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("exp.yaml", []byte(tt.file))
			if err == nil {
				t.Fatal("Parse: no error")
			}
			if err.Error() != tt.want {
				t.Errorf("error:\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

// TestParseStopBool: a boolean criterion is Ray's stop={"done": True},
// which Ray's Trial.should_stop compares as result[key] >= True
// (python/ray/tune/experiment/trial.py, ray-project/ray at
// f4dcee96a1a58b9c8f00329994e0ab74d79ecc60): true is the threshold 1 and
// false is 0, as Python's bools are.
func TestParseStopBool(t *testing.T) {
	for name, text := range map[string]string{
		"exp.yaml": head + "run_config:\n  stop: {done: true, converged: false, training_iteration: 10}\n",
		"exp.json": `{"name": "exp", "trainable": "fn", "run_config": {"stop": {"done": true, "converged": false, "training_iteration": 10}}}`,
	} {
		s, err := Parse(name, []byte(text))
		if err != nil {
			t.Fatalf("Parse %s: %v", name, err)
		}
		want := map[string]float64{"done": 1, "converged": 0, "training_iteration": 10}
		if diff := cmp.Diff(want, s.RunConfig.Stop); diff != "" {
			t.Errorf("%s: stop (-want +got):\n%s", name, diff)
		}
	}
}

// TestParseDriver: the driver section names the driver's stopper and
// searcher; the searcher replaces search_alg, so both is an error at the
// line of the searcher, and an unknown key is one too.
func TestParseDriver(t *testing.T) {
	s, err := Parse("exp.yaml", []byte(head+"driver:\n  stopper: MyStopper\n  searcher: MySearcher\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (&events.DriverSpec{Stopper: "MyStopper", Searcher: "MySearcher"}); !reflect.DeepEqual(s.Driver, want) {
		t.Errorf("driver %+v; want %+v", s.Driver, want)
	}
	for file, want := range map[string]string{
		head + "tune_config:\n  search_alg: grid\ndriver:\n  searcher: MySearcher\n": `exp.yaml:6: driver.searcher: the driver's searcher replaces tune_config.search_alg, which is "grid": give one of them`,
		head + "driver:\n  stoper: MyStopper\n":                                      `exp.yaml:4: driver.stoper: unknown key, did you mean "stopper"?`,
		head + "driver:\n  stopper: \"\"\n":                                          `exp.yaml:4: driver.stopper: must name the driver's stopper, got ""`,
	} {
		_, err := Parse("exp.yaml", []byte(file))
		if err == nil || err.Error() != want {
			t.Errorf("Parse(%q) = %v; want %s", file, err, want)
		}
	}
}

// TestParseObjectives: Ray's metric and mode lists are several objectives
// (the wire form's metrics and modes), and a list of one is one.
func TestParseObjectives(t *testing.T) {
	tests := []struct {
		name, tuneConfig string
		want             []events.Objective
		multi            bool
	}{
		{"one", "{metric: loss, mode: min}", []events.Objective{{Metric: "loss", Mode: "min"}}, false},
		{"a list of one", "{metric: [loss], mode: [max]}", []events.Objective{{Metric: "loss", Mode: "max"}}, false},
		{"several", "{metric: [loss, latency_ms], mode: [min, max]}",
			[]events.Objective{{Metric: "loss", Mode: "min"}, {Metric: "latency_ms", Mode: "max"}}, true},
		{"several, wire form", "{metrics: [loss, latency_ms], modes: [min, max]}",
			[]events.Objective{{Metric: "loss", Mode: "min"}, {Metric: "latency_ms", Mode: "max"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("exp.yaml", []byte(head+"tune_config: "+tt.tuneConfig+"\n"))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := s.TuneConfig.Objectives(); !reflect.DeepEqual(got, tt.want) || s.TuneConfig.MultiObjective() != tt.multi {
				t.Errorf("Objectives = %v (multi %v), want %v (multi %v)", got, s.TuneConfig.MultiObjective(), tt.want, tt.multi)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}
