package state

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tunejet/tunejet/events"
)

// Ray's strict metric check (TuneController._validate_result_metrics, in
// ray-project/ray python/ray/tune/execution/tune_controller.py): every
// result must hold the experiment's metric and the scheduler's. The fold
// keeps the error of the first result that fails it (MetricError), and the
// controller ends the experiment with it, as Ray's driver raises it.

// uncheckedKeys are Ray's DEBUG_METRICS and done: a result with at most
// one key besides these is not checked (Ray: the trial returned without
// reporting anything).
var uncheckedKeys = map[string]bool{
	"trial_id": true, "experiment_id": true, "date": true, "timestamp": true,
	"pid": true, "hostname": true, "node_ip": true, "config": true, "done": true,
}

// schedulerClass is Ray's class of each scheduler, which the check's
// error names when the scheduler's own metric is missing.
var schedulerClass = map[string]string{
	"asha": "AsyncHyperBandScheduler", "async_hyperband": "AsyncHyperBandScheduler",
	"hyperband": "HyperBandScheduler", "median_stopping_rule": "MedianStoppingRule",
	"pbt": "PopulationBasedTraining",
}

// MissingMetric is Ray's error for a result r that lacks the experiment's
// metric (tune_config.metric, or one of several) or the metric the scheduler's own settings
// name, or "" when r passes or the spec turns the check off. A search
// algorithm takes tune_config's metric, so that check covers it. Nested
// keys are named with "/"; a key present with any value (a string, null)
// passes, as in Ray.
func MissingMetric(spec *events.ExperimentSpec, r map[string]any) string {
	tc := spec.TuneConfig
	if tc.DisableStrictMetricChecking || checkedLeaves(r, true) <= 1 {
		return ""
	}
	metric, location := "", ""
	for _, o := range tc.Objectives() {
		if o.Metric != "" && !has(r, o.Metric) {
			metric, location = o.Metric, "tune.TuneConfig()"
			break
		}
	}
	schedMetric, _ := tc.SchedulerConfig["metric"].(string)
	switch {
	case metric != "":
	case schedulerClass[tc.Scheduler] != "" && schedMetric != "" && !has(r, schedMetric):
		metric, location = schedMetric, schedulerClass[tc.Scheduler]
	default:
		return ""
	}
	shown, _ := json.Marshal(r) // keys sorted; a result decoded from JSON encodes
	return fmt.Sprintf("Trial returned a result which did not include the specified metric(s) `%s` that `%s` expects. "+
		"Make sure your calls to `tune.report()` include the metric, or set the TUNE_DISABLE_STRICT_METRIC_CHECKING "+
		"environment variable to 1. Result: %s", metric, location, shown)
}

// checkedLeaves counts r's keys, nested ones flattened as Ray does, that
// are not uncheckedKeys (top is r the result itself).
func checkedLeaves(r map[string]any, top bool) int {
	n := 0
	for k, v := range r {
		switch sub, nested := v.(map[string]any); {
		case top && uncheckedKeys[k]:
		case nested && len(sub) > 0:
			n += checkedLeaves(sub, false)
		default:
			n++
		}
	}
	return n
}

// has reports whether r holds key, a flat key or a nested one named with
// "/", whatever its value.
func has(r map[string]any, key string) bool {
	if _, ok := r[key]; ok {
		return true
	}
	parts := strings.Split(key, "/")
	cur := r
	for i, part := range parts {
		v, ok := cur[part]
		if !ok {
			return false
		}
		if i == len(parts)-1 {
			return true
		}
		if cur, ok = v.(map[string]any); !ok {
			return false
		}
	}
	return false
}

// checkMetrics keeps the strict metric check's error of result r, if it is
// the first result of the run to fail it.
func (e *Experiment) checkMetrics(r map[string]any) {
	if e.MetricError == "" && e.Spec != nil {
		e.MetricError = MissingMetric(e.Spec, r)
	}
}
