package tune_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tunejet/tunejet/tune"
)

// BenchmarkWaitForDecisions measures what TuneConfig.WaitForDecisions
// costs, side by side in one run: the report throughput of the same ASHA
// experiment (two trials reporting as fast as they can; max_t beyond the
// last report, so it stops none) without and with each report waiting
// for its judgement. It prints both rates and their ratio.
func BenchmarkWaitForDecisions(b *testing.B) {
	n := 2000
	if testing.Short() {
		n = 50
	}
	flat := func(ctx context.Context, _ map[string]any) error {
		for i := 1; i <= n; i++ {
			if err := tune.Report(ctx, map[string]any{"loss": 1.0}); err != nil {
				return err
			}
		}
		return nil
	}
	d := startDeployment(b, 2, map[string]tune.Trainable{"flat": flat})
	rates := map[bool][]float64{}
	for i := range b.N {
		for _, wait := range []bool{false, true} {
			tc := tune.TuneConfig{NumSamples: 2, Metric: "loss", Mode: "min", Scheduler: "asha",
				SchedulerConfig: map[string]any{"max_t": 2 * n, "grace_period": 1}, WaitForDecisions: wait}
			start := time.Now()
			d.fit(b, "flat", tune.WithName(fmt.Sprintf("wait-%v-%d", wait, i)), tune.WithRunConfig(storage(b)), tune.WithTuneConfig(tc))
			rates[wait] = append(rates[wait], float64(2*n)/time.Since(start).Seconds())
		}
	}
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	free, waiting := mean(rates[false]), mean(rates[true])
	b.ReportMetric(free, "free_reports/s")
	b.ReportMetric(waiting, "waiting_reports/s")
	b.ReportMetric(waiting/free, "waiting/free")
	b.Logf("%d reports by each of 2 trials under ASHA: %.0f reports/s free, %.0f waiting for each judgement (%.3f of free)", n, free, waiting, waiting/free)
}
