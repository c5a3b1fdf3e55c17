package state

import (
	"context"
	"fmt"
	"testing"

	"github.com/tunejet/tunejet/events"
)

// BenchmarkFoldTunedResult folds one result of a trial under ASHA: a
// result of 30 metrics, a few nested, as a training loop reports them.
func BenchmarkFoldTunedResult(b *testing.B) {
	l := newTunedLog(b)
	l.evs[0].Data.(*events.ExperimentSubmitted).Spec.TuneConfig.SchedulerConfig["max_t"] = 1e9
	l.create("a", 0)
	l.start("a", 1)
	e := fold(l.evs)
	result := map[string]any{"loss": 0.5, "nested": map[string]any{"x": 1.0, "y": 2.0}}
	for i := range 28 {
		result[fmt.Sprint("metric_", i)] = float64(i)
	}
	evs := make([]*events.Event, b.N)
	for i := range b.N {
		r := map[string]any{"training_iteration": i + 1}
		for k, v := range result {
			r[k] = v
		}
		evs[i] = l.add(events.WriterRunner, &events.TrialReported{TrialID: "a", Attempt: 1, Result: r})
	}
	b.ResetTimer()
	for _, ev := range evs {
		e, _, _ = Fold(context.Background(), e, ev, nil)
	}
}
