package spec

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"

	"github.com/tunejet/tunejet/internal/settings"
)

func TestValidateGoSpec(t *testing.T) {
	good := &events.ExperimentSpec{
		Trainable:  events.Trainable{Name: "fn"},
		ParamSpace: map[string]any{"lr": map[string]any{"uniform": []float64{0, 1}}},
	}
	if err := Validate(good); err != nil {
		t.Errorf("Validate before defaults: %v", err)
	}
	ApplyDefaults(good)
	if err := Validate(good); err != nil {
		t.Errorf("Validate after defaults: %v", err)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	s := &events.ExperimentSpec{
		Name:       "a b",
		ParamSpace: map[string]any{"lr": map[string]any{"uniform": []any{1, 0}}},
		TuneConfig: events.TuneConfig{NumSamples: -3, Metric: "loss", Mode: "avg", SearchAlg: "bayes",
			Scheduler: "asha", SchedulerConfig: map[string]any{"grace_peroid": 2}},
		RunConfig: events.RunConfig{
			Stoppers:         []any{map[string]any{"type": "maximum_iteration", "max_iter": 0}},
			FailureConfig:    events.FailureConfig{MaxFailures: 1, FailFast: events.FailFastOn, HeartbeatTimeoutS: -1},
			CheckpointConfig: events.CheckpointConfig{NumToKeep: -1, ScoreOrder: "best"},
			SyncConfig:       events.SyncConfig{SyncPeriodS: -1, SyncTimeoutS: -2},
		},
	}
	err := Validate(s)
	want := []string{
		`name: experiment name "a b": must be 1-128 characters of letters, digits, '_' and '-', starting with a letter or digit`,
		"trainable: required: the name of a registered Go trainable, or {command: [program, args...]}",
		"param_space.lr: uniform: low (1) must be <= high (0)",
		"tune_config.num_samples: must be a count >= 1, or -1 to sample until stopped; got -3",
		`tune_config.mode: must be "min" or "max", got "avg"`,
		"run_config.failure_config.max_failures: max_failures must be 0 if fail_fast=True.",
		"run_config.failure_config.heartbeat_timeout_s: must be > 0 seconds, got -1",
		"run_config.checkpoint_config.num_to_keep: Received invalid num_to_keep: -1. Must be None or an integer >= 1.",
		`run_config.checkpoint_config.checkpoint_score_order: checkpoint_score_order must be either "max" or "min".`,
		"run_config.sync_config.sync_period: must be >= 0 seconds, got -1",
		"run_config.sync_config.sync_timeout: must be > 0 seconds, got -2",
		`tune_config.scheduler.grace_peroid: unknown key, did you mean "grace_period"?`,
		`tune_config.search_alg: unknown search algorithm "bayes"; valid: bayesopt, external, gp, grid, nsga2, random, tpe`,
		"run_config.stoppers.0.max_iter: must be >= 1, got 0",
	}
	if err == nil {
		t.Fatal("Validate: no error")
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("Validate (-want +got):\n%s", diff)
	}
	if !errors.Is(err, settings.ErrInvalid) {
		t.Error("errors.Is(err, settings.ErrInvalid) = false")
	}
}

func TestValidateFailFast(t *testing.T) {
	s := &events.ExperimentSpec{Trainable: events.Trainable{Name: "fn"}}
	s.RunConfig.FailureConfig.FailFast = "sometimes"
	want := "run_config.failure_config.fail_fast: fail_fast must be one of {bool, 'raise'}. Got sometimes."
	if err := Validate(s); err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want %s", err, want)
	}
}

func TestApplyDefaultsKeepsValues(t *testing.T) {
	off := false
	s := &events.ExperimentSpec{
		Name:       "exp",
		Trainable:  events.Trainable{Command: []string{"./run.sh"}, Name: "custom"},
		TuneConfig: events.TuneConfig{NumSamples: -1, SearchAlg: "grid", Scheduler: "fifo"},
		RunConfig: events.RunConfig{
			FailureConfig:    events.FailureConfig{HeartbeatTimeoutS: 10},
			CheckpointConfig: events.CheckpointConfig{ScoreOrder: "min"},
			SyncConfig:       events.SyncConfig{SyncPeriodS: 1, SyncTimeoutS: 2, SyncArtifactsOnCheckpoint: &off},
		},
	}
	want := *s
	ApplyDefaults(s)
	if diff := cmp.Diff(&want, s); diff != "" {
		t.Errorf("ApplyDefaults changed set fields (-want +got):\n%s", diff)
	}
}

func TestCommandName(t *testing.T) {
	tests := []struct {
		command []string
		want    string
	}{
		{[]string{"python3", "train.py"}, "train"},
		{[]string{"python3", "-u", "scripts/train.py", "--fast"}, "train"},
		{[]string{"./bin/trainer"}, "trainer"},
		{[]string{"python3", "train.py", "--epochs", "3"}, "train"},
		{[]string{"sh", "-c"}, "sh"},
		{[]string{"sh", "-c", "tunejet report loss=1"}, "sh"},
		{[]string{"bash", "-c", "python3 train.py"}, "bash"},
		{[]string{"bash", "run.sh", "--lr", "0.1"}, "run"},
		{[]string{"node", "train.js"}, "train"},
		{[]string{"python3", "-m", "mypkg.train_mnist", "--x"}, "train_mnist"},
		{[]string{"/usr/bin/python3.11", "-u", "my train.py"}, "python3_11"},
		{[]string{"--only-flags"}, ""},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := commandName(tt.command); got != tt.want {
			t.Errorf("commandName(%q) = %q, want %q", tt.command, got, tt.want)
		}
	}
}

func TestDefaultName(t *testing.T) {
	ts := time.Date(2024, 3, 5, 7, 8, 9, 0, time.UTC)
	tests := []struct{ trainable, want string }{
		{"train", "train_2024-03-05_07-08-09"},
		{"my.model v2", "my_model_v2_2024-03-05_07-08-09"},
		{"_x", "x_2024-03-05_07-08-09"},
		{"", "experiment_2024-03-05_07-08-09"},
		{strings.Repeat("a", 200), strings.Repeat("a", 108) + "_2024-03-05_07-08-09"},
	}
	for _, tt := range tests {
		got := defaultName(tt.trainable, ts)
		if got != tt.want {
			t.Errorf("defaultName(%q) = %q, want %q", tt.trainable, got, tt.want)
		}
		if err := events.ValidateID("experiment name", got); err != nil {
			t.Errorf("defaultName(%q): %v", tt.trainable, err)
		}
	}
}
