package state

import (
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
)

// TestMissingMetric follows Ray's _validate_result_metrics: which metrics
// a result must hold, which results are not checked, and the switch.
func TestMissingMetric(t *testing.T) {
	auto := func(m map[string]any) map[string]any {
		m["training_iteration"], m["time_this_iter_s"], m["trial_id"], m["done"] = 1.0, 0.1, "t", false
		return m
	}
	asha := events.TuneConfig{Scheduler: "asha", SchedulerConfig: map[string]any{"metric": "score", "mode": "max"}}
	tests := []struct {
		name   string
		tc     events.TuneConfig
		result map[string]any
		want   string // in the error; "" for none
	}{
		{"metric reported", events.TuneConfig{Metric: "loss"}, auto(map[string]any{"loss": 0.5}), ""},
		{"metric missing", events.TuneConfig{Metric: "loss"}, auto(map[string]any{"acc": 0.5}), "metric(s) `loss` that `tune.TuneConfig()` expects"},
		{"a string is reported", events.TuneConfig{Metric: "loss"}, auto(map[string]any{"loss": "Infinity"}), ""},
		{"null is reported", events.TuneConfig{Metric: "loss"}, auto(map[string]any{"loss": nil}), ""},
		{"nested metric", events.TuneConfig{Metric: "eval/loss"}, auto(map[string]any{"eval": map[string]any{"loss": 1.0}}), ""},
		{"nested metric missing", events.TuneConfig{Metric: "eval/loss"}, auto(map[string]any{"eval": map[string]any{"acc": 1.0}}), "`eval/loss`"},
		{"no metric", events.TuneConfig{}, auto(map[string]any{"acc": 0.5}), ""},
		{"only done and debug keys", events.TuneConfig{Metric: "loss"}, map[string]any{"done": true, "trial_id": "t", "pid": 1.0, "acc": 1.0}, ""},
		{"scheduler's metric missing", asha, auto(map[string]any{"acc": 0.5}), "metric(s) `score` that `AsyncHyperBandScheduler` expects"},
		{"scheduler's metric reported", asha, auto(map[string]any{"score": 0.5}), ""},
		{"several metrics reported", events.TuneConfig{Metrics: []string{"loss", "latency_ms"}, Modes: []string{"min", "min"}},
			auto(map[string]any{"loss": 0.5, "latency_ms": 3.0}), ""},
		{"one of several metrics missing", events.TuneConfig{Metrics: []string{"loss", "latency_ms"}, Modes: []string{"min", "min"}},
			auto(map[string]any{"loss": 0.5}), "metric(s) `latency_ms` that `tune.TuneConfig()` expects"},
		{"switched off", events.TuneConfig{Metric: "loss", DisableStrictMetricChecking: true}, auto(map[string]any{"acc": 0.5}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MissingMetric(&events.ExperimentSpec{TuneConfig: tt.tc}, tt.result)
			if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
				t.Errorf("MissingMetric = %q, want %q", got, tt.want)
			}
		})
	}
}
