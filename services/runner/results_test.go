package runner

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
)

func TestResultBuilder(t *testing.T) {
	start := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	type report struct {
		at      time.Duration // after start
		metrics map[string]any
	}
	// auto is the automatic fields of a result, with the ones every result
	// here shares.
	auto := func(at time.Duration, fields map[string]any) map[string]any {
		now := start.Add(at)
		r := map[string]any{
			"done": false, "timestamp": now.Unix(), "date": now.Format("2006-01-02_15-04-05"),
			"trial_id": "t1", "hostname": "host", "pid": 42,
		}
		for k, v := range fields {
			r[k] = v
		}
		return r
	}
	tests := []struct {
		name    string
		resume  *events.CheckpointRef
		reports []report
		want    []map[string]any
	}{
		{
			name:    "a fresh attempt counts from its start",
			reports: []report{{time.Second, map[string]any{"loss": 0.5}}, {3 * time.Second, map[string]any{"loss": 0.25}}},
			want: []map[string]any{
				auto(time.Second, map[string]any{"loss": 0.5, "training_iteration": 1, "iterations_since_restore": 1,
					"time_this_iter_s": 1.0, "time_total_s": 1.0, "time_since_restore": 1.0}),
				auto(3*time.Second, map[string]any{"loss": 0.25, "training_iteration": 2, "iterations_since_restore": 2,
					"time_this_iter_s": 2.0, "time_total_s": 3.0, "time_since_restore": 3.0}),
			},
		},
		{
			name:    "a resumed attempt goes on from the checkpoint's iteration and time_total_s",
			resume:  &events.CheckpointRef{Iteration: 5, Metrics: map[string]any{"time_total_s": 10.0}},
			reports: []report{{2 * time.Second, nil}, {3 * time.Second, nil}},
			want: []map[string]any{
				auto(2*time.Second, map[string]any{"training_iteration": 6, "iterations_since_restore": 1,
					"time_this_iter_s": 2.0, "time_total_s": 12.0, "time_since_restore": 2.0}),
				auto(3*time.Second, map[string]any{"training_iteration": 7, "iterations_since_restore": 2,
					"time_this_iter_s": 1.0, "time_total_s": 13.0, "time_since_restore": 3.0}),
			},
		},
		{
			name:    "a checkpoint without time_total_s resumes the iterations only",
			resume:  &events.CheckpointRef{Iteration: 2, Metrics: map[string]any{"loss": 1.0}},
			reports: []report{{time.Second, nil}},
			want: []map[string]any{auto(time.Second, map[string]any{"training_iteration": 3, "iterations_since_restore": 1,
				"time_this_iter_s": 1.0, "time_total_s": 1.0, "time_since_restore": 1.0})},
		},
		{
			name: "automatic fields win over the trainable's; its done counts when it is a bool",
			reports: []report{
				{time.Second, map[string]any{"training_iteration": 99, "pid": "mine", "done": true}},
				{2 * time.Second, map[string]any{"done": "yes"}},
			},
			want: []map[string]any{
				auto(time.Second, map[string]any{"done": true, "training_iteration": 1, "iterations_since_restore": 1,
					"time_this_iter_s": 1.0, "time_total_s": 1.0, "time_since_restore": 1.0}),
				auto(2*time.Second, map[string]any{"training_iteration": 2, "iterations_since_restore": 2,
					"time_this_iter_s": 1.0, "time_total_s": 2.0, "time_since_restore": 2.0}),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := resultBuilder{TrialID: "t1", Hostname: "host", PID: 42, Start: start}
			if tc.resume != nil {
				b.resumeFrom(tc.resume)
			}
			var got []map[string]any
			for _, r := range tc.reports {
				got = append(got, b.next(r.metrics, start.Add(r.at)))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStopCriteria(t *testing.T) {
	tests := []struct {
		name     string
		criteria stopCriteria
		result   map[string]any
		hit      bool
		missing  []string
	}{
		{"none", nil, map[string]any{"acc": 1.0}, false, nil},
		{"reached", stopCriteria{"acc": 0.9}, map[string]any{"acc": 0.95}, true, nil},
		{"equal counts, as Ray's >=", stopCriteria{"training_iteration": 3}, map[string]any{"training_iteration": 3}, true, nil},
		{"below", stopCriteria{"acc": 0.9}, map[string]any{"acc": 0.5}, false, nil},
		{"time_total_s", stopCriteria{"time_total_s": 60}, map[string]any{"time_total_s": 60.2}, true, nil},
		{"any criterion is enough", stopCriteria{"acc": 0.9, "training_iteration": 10}, map[string]any{"acc": 0.1, "training_iteration": 10}, true, nil},
		{"nested as a/b", stopCriteria{"info/acc": 0.9}, map[string]any{"info": map[string]any{"acc": 0.99}}, true, nil},
		{"a bool is 0 or 1", stopCriteria{"converged": 1}, map[string]any{"converged": true}, true, nil},
		{"not a number", stopCriteria{"acc": 0.9}, map[string]any{"acc": "high"}, false, nil},
		{"missing keys are named", stopCriteria{"acc": 0.9, "loss": 0}, map[string]any{"training_iteration": 1}, false, []string{"acc", "loss"}},
		// Ray's Trial.should_stop (python/ray/tune/experiment/trial.py,
		// ray-project/ray at f4dcee96a1a58b9c8f00329994e0ab74d79ecc60)
		// first stops on a truthy result["done"], criteria or not.
		{"done, without criteria", nil, map[string]any{"done": true}, true, nil},
		{"done, with criteria unmet", stopCriteria{"acc": 0.9}, map[string]any{"done": true, "acc": 0.1}, true, nil},
		{"not done", nil, map[string]any{"done": false}, false, nil},
		{"stop={done: True}", stopCriteria{"done": 1}, map[string]any{"done": true}, true, nil},
		{"stop={done: True}, not done", stopCriteria{"done": 1}, map[string]any{"done": false}, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hit, missing := tc.criteria.met(tc.result)
			slices.Sort(missing)
			if hit != tc.hit || !slices.Equal(missing, tc.missing) {
				t.Errorf("met(%v) = %t, %v; want %t, %v", tc.result, hit, missing, tc.hit, tc.missing)
			}
		})
	}
}
