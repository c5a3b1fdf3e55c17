package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/tune"
)

// schedVariant is one tuner setting of BenchmarkSchedulerThroughput.
type schedVariant struct {
	name      string
	scheduler string
	config    map[string]any
	stoppers  any
}

// schedVariants are FIFO (the baseline), ASHA, and ASHA with Ray's
// TrialPlateauStopper on the same metric. ASHA's max_t is beyond the last
// report, so it stops no trial; with grace 1 and reduction factor 2 its
// rungs are the powers of 2 (15 below 25,000 reports), each a recorded
// decision on the log.
func schedVariants(per int) []schedVariant {
	asha := map[string]any{"max_t": 2 * per, "grace_period": 1, "reduction_factor": 2}
	return []schedVariant{
		{name: "fifo"},
		{name: "asha", scheduler: "asha", config: asha},
		{name: "asha_plateau", scheduler: "asha", config: asha,
			stoppers: map[string]any{"type": "trial_plateau", "metric": "loss"}},
	}
}

// rungCalls records when each trial called tune.Report for the iterations
// that are ASHA's rungs here (the powers of 2).
type rungCalls struct {
	mu sync.Mutex
	at map[string]map[int]time.Time // trial id → training_iteration → call
}

func (c *rungCalls) add(trial string, iteration int, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil {
		c.at = map[string]map[int]time.Time{}
	}
	if c.at[trial] == nil {
		c.at[trial] = map[int]time.Time{}
	}
	c.at[trial][iteration] = at
}

func (c *rungCalls) get(trial string, iteration int) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.at[trial][iteration]
	return at, ok
}

// flatReporter is the trainable of BenchmarkSchedulerThroughput: like
// reporter it calls Report n times in a tight loop, but every trial
// reports the same loss at the same iteration (1 and 1.5, alternately), so
// no trial is ever worse than another at a rung (ASHA stops none) and the
// loss never plateaus (its standard deviation stays 0.25). It notes when
// it reports each power-of-2 iteration.
func flatReporter(n int, rec *spans, calls *rungCalls) tune.Trainable {
	return func(ctx context.Context, _ map[string]any) error {
		info, err := tune.GetTrialInfo(ctx)
		if err != nil {
			return err
		}
		start := time.Now()
		for i := 1; i <= n; i++ {
			if i&(i-1) == 0 {
				calls.add(info.TrialID, i, time.Now())
			}
			if err := tune.Report(ctx, map[string]any{"loss": 1 + 0.5*float64(i%2), "step": i}); err != nil {
				return err
			}
		}
		rec.add(start, time.Now())
		return nil
	}
}

// schedRun is one experiment of BenchmarkSchedulerThroughput.
type schedRun struct {
	throughput
	decisions int
	// endLag is from the last trial.completed to experiment.completed, by
	// the server's timestamps: how far behind the log the controller's
	// fold was at the end, whatever the scheduler (FIFO included).
	endLag time.Duration
	// stored is each rung decision's lag from its trial.reported to its
	// trial.decided, both by the server's timestamps; called is from the
	// tune.Report call of the rung's result to the trial.decided.
	stored, called []time.Duration
	// byRung is stored's lags by the rung's milestone.
	byRung map[int][]time.Duration
}

// BenchmarkSchedulerThroughput checks "report throughput with ASHA on
// stays ≥ 0.8 × FIFO's in the same run; a scheduler never holds up a
// report". It runs BenchmarkReportThroughput's deployment load
// (TUNEJET_BENCH_REPORT_TRIALS trials × TUNEJET_BENCH_REPORTS reports, 8 ×
// 25,000) three times on fresh deployments: with scheduler fifo, with asha
// (grace 1, reduction factor 2, max_t beyond the last report: 15 rungs, no
// stops) and with asha plus a trial_plateau stopper, then again in reverse
// order for each further TUNEJET_BENCH_SCHED_ROUNDS (default 1). The
// trainable reports a loss that makes every trial tie at every rung and
// never plateau, so each variant carries the same 200,000 reports to
// result.json, and the benchmark fails if a trial was stopped or a line
// is missing. It reports each variant's reports/s (means over rounds), the
// ratios to FIFO, the CPU time per report, and how far the controller's
// decisions lag the reports: from a trial.reported holding a rung's result
// to its trial.decided (server timestamps), and from the tune.Report call
// of that result to the trial.decided. It logs one line per round and
// one per variant (go test keeps a benchmark's first 10 log lines).
//
//	go test -run='^$' -bench=BenchmarkSchedulerThroughput -benchtime=1x -timeout=30m ./bench/
func BenchmarkSchedulerThroughput(b *testing.B) {
	trials := envInt(b, "TUNEJET_BENCH_REPORT_TRIALS", 8, 2)
	per := envInt(b, "TUNEJET_BENCH_REPORTS", 25000, 200)
	rounds := envInt(b, "TUNEJET_BENCH_SCHED_ROUNDS", 1, 1)
	variants := schedVariants(per)
	runs := map[string][]schedRun{}
	for i := 0; i < b.N; i++ {
		for r := range rounds {
			order := slices.Clone(variants)
			if r%2 == 1 {
				slices.Reverse(order)
			}
			// One log line per round: go test keeps only a benchmark's
			// first 10 lines of log.
			var parts []string
			for _, v := range order {
				run := runScheduled(b, v, trials, per)
				runs[v.name] = append(runs[v.name], run)
				parts = append(parts, fmt.Sprintf("%s %.0f reports/s (Fit %.2fs, loops %.0f/s, %.1f µs CPU/report, %d decisions, last write +%.2fs, experiment.completed +%.2fs, load %s)",
					v.name, run.e2e, run.fit.Seconds(), run.emitted, cpuPerReport(run.throughput, trials*per), run.decisions,
					run.writeLag.Seconds(), run.endLag.Seconds(), loadAvg()))
			}
			b.Logf("round %d: %s", r+1, strings.Join(parts, "; "))
		}
	}
	mean := func(name string, f func(schedRun) float64) float64 {
		sum := 0.0
		for _, run := range runs[name] {
			sum += f(run)
		}
		return sum / float64(len(runs[name]))
	}
	e2e := func(r schedRun) float64 { return r.e2e }
	emitted := func(r schedRun) float64 { return r.emitted }
	cpu := func(r schedRun) float64 { return cpuPerReport(r.throughput, trials*per) }
	fifo, fifoEmitted := mean("fifo", e2e), mean("fifo", emitted)
	b.ReportMetric(fifo, "fifo_reports/s")
	b.ReportMetric(mean("fifo", cpu), "fifo_cpu_us/report")
	for _, v := range variants[1:] {
		rate := mean(v.name, e2e)
		b.ReportMetric(rate, v.name+"_reports/s")
		b.ReportMetric(rate/fifo, v.name+"/fifo")
		b.ReportMetric(mean(v.name, cpu), v.name+"_cpu_us/report")
		var stored, called []time.Duration
		byRung := map[int][]time.Duration{}
		for _, run := range runs[v.name] {
			stored = append(stored, run.stored...)
			called = append(called, run.called...)
			for m, lags := range run.byRung {
				byRung[m] = append(byRung[m], lags...)
			}
		}
		if len(stored) == 0 {
			b.Fatalf("%s: no rung decision on the log", v.name)
		}
		b.ReportMetric(ms(quantile(stored, 0.5)), v.name+"_lag_p50_ms")
		b.ReportMetric(ms(quantile(stored, 1)), v.name+"_lag_max_ms")
		var byMilestone []string
		for _, m := range slices.Sorted(maps.Keys(byRung)) {
			byMilestone = append(byMilestone, fmt.Sprintf("%d: %.0f", m, ms(quantile(byRung[m], 0.5))))
		}
		b.Logf("%s/fifo: %.3f end to end (target ≥ 0.8), %.3f of the tune.Report loops' rate; CPU per report %.1f µs against %.1f µs; "+
			"%d rung decisions, trial.reported → trial.decided p50 %.1f ms, p90 %.1f ms, max %.1f ms; tune.Report call → trial.decided p50 %.1f ms, p90 %.1f ms, max %.1f ms; "+
			"median lag in ms by rung (training_iteration: ms) %s",
			v.name, rate/fifo, mean(v.name, emitted)/fifoEmitted, mean(v.name, cpu), mean("fifo", cpu),
			len(stored), ms(quantile(stored, 0.5)), ms(quantile(stored, 0.9)), ms(quantile(stored, 1)),
			ms(quantile(called, 0.5)), ms(quantile(called, 0.9)), ms(quantile(called, 1)), strings.Join(byMilestone, ", "))
	}
}

// runScheduled runs one experiment of the load with a variant's scheduler
// and stoppers on a fresh deployment, checks that every report reached
// result.json, and measures its rates and its decisions' lags.
func runScheduled(b *testing.B, v schedVariant, trials, per int) schedRun {
	b.Helper()
	rec, calls := &spans{}, &rungCalls{}
	d := startDeployment(b, trials, map[string]tune.Trainable{"flat": flatReporter(per, rec, calls)})
	defer d.close()
	exp := "sched-" + v.name
	cpu0 := processCPU(b)
	g, took := d.fit(10*time.Minute, "flat",
		tune.WithName(exp),
		// A heartbeat timeout of 30 s instead of 3: on the loaded 2-core
		// machine a runner of 8 tight report loops once went 3 s without
		// its heartbeat reaching the server, and its healthy trial ended
		// ERROR (see "Open findings" in bench/README.md).
		tune.WithRunConfig(tune.RunConfig{StoragePath: b.TempDir(), Stoppers: v.stoppers,
			FailureConfig: tune.FailureConfig{HeartbeatTimeoutS: 30}}),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.Uniform(0, 1)}),
		tune.WithTuneConfig(tune.TuneConfig{NumSamples: trials, Metric: "loss", Mode: "min", Scheduler: v.scheduler, SchedulerConfig: v.config}),
	)
	var run schedRun
	run.fit = took
	run.cpu = processCPU(b) - cpu0
	lastWrite := checkReports(b, g, trials, per, nil)
	run.spans(rec, trials*per, lastWrite)
	d.decisionLags(b, exp, calls, &run)
	return run
}

// decisionLags reads the experiment's log for its trial.decided events and
// sets the run's decision count and each rung decision's lags.
func (d *deployment) decisionLags(b *testing.B, exp string, calls *rungCalls, run *schedRun) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	evs := d.events(ctx, exp)
	s := d.log(ctx, "lags")
	stored := func(seq uint64) time.Time {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			b.Fatalf("read the log at %d: %v", seq, err)
		}
		return m.Time
	}
	reported := map[uint64]bool{}
	var lastCompleted uint64
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.TrialCompleted:
			lastCompleted = ev.Seq
		case *events.ExperimentCompleted:
			if lastCompleted > 0 {
				run.endLag = stored(ev.Seq).Sub(stored(lastCompleted))
			}
		case *events.TrialReported:
			reported[ev.Seq] = true
		case *events.TrialDecided:
			run.decisions++
			if p.Action == "stop" {
				b.Fatalf("%s: trial %s was stopped (%s); the load must run every report", exp, p.TrialID, p.Reason)
			}
			rung, _ := p.Detail["rung"].(map[string]any)
			milestone, _ := rung["milestone"].(float64)
			if milestone == 0 || !reported[p.ResultSeq] {
				continue
			}
			decided := stored(ev.Seq)
			lag := decided.Sub(stored(p.ResultSeq))
			run.stored = append(run.stored, lag)
			if run.byRung == nil {
				run.byRung = map[int][]time.Duration{}
			}
			run.byRung[int(milestone)] = append(run.byRung[int(milestone)], lag)
			if at, ok := calls.get(p.TrialID, int(milestone)); ok {
				run.called = append(run.called, decided.Sub(at))
			}
		}
	}
}

// cpuPerReport is a run's process CPU time per report in microseconds.
func cpuPerReport(m throughput, reports int) float64 {
	return float64(m.cpu.Microseconds()) / float64(reports)
}

// quantile is the q-quantile of ds (nearest rank; 1 is the largest).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[i]
}

// ms is a duration in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
