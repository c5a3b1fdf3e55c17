package bench

import (
	"context"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/tune"
)

// Ray Tune's bookkeeping-overhead benchmark (release test
// "bookkeeping_overhead": 10,000 trials of 1 s on 16 CPUs, 715 s observed
// against 625 s of work, 1.14), scaled to a 2-core machine: 1,000 trials of
// 0.5 s on 16 runner slots, whose minimum is 1000 × 0.5 s / 16 = 31.25 s.
const (
	bookkeepingSlots = 16
	bookkeepingWork  = 500 * time.Millisecond
)

// sleeper is the trainable of the bookkeeping benchmark: like Ray's, it
// sleeps (the simulated training work) and then reports once. It records
// the span it ran for.
func sleeper(work time.Duration, rec *spans) tune.Trainable {
	return func(ctx context.Context, config map[string]any) error {
		start := time.Now()
		t := time.NewTimer(work)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		err := tune.Report(ctx, map[string]any{"score": config["x"]})
		rec.add(start, time.Now())
		return err
	}
}

// BenchmarkBookkeeping measures how much longer than its trials' work an
// experiment takes: wall time of Fit over trials × work / slots. It runs
// on a deployment (services on their own connections to a nats-server on
// a loopback port, as tune/harness_test.go does) and on the embedded stack
// tune.Fit starts by default.
func BenchmarkBookkeeping(b *testing.B) {
	b.Run("deployment", func(b *testing.B) { bookkeeping(b, false) })
	b.Run("embedded", func(b *testing.B) { bookkeeping(b, true) })
}

func bookkeeping(b *testing.B, embedded bool) {
	trials := envInt(b, "TUNEJET_BENCH_TRIALS", 1000)
	minimum := time.Duration(trials) * bookkeepingWork / bookkeepingSlots
	waves := (trials + bookkeepingSlots - 1) / bookkeepingSlots
	packed := time.Duration(waves) * bookkeepingWork // whole waves of 16
	limit := 2*minimum + 30*time.Second
	var wall time.Duration
	for i := 0; i < b.N; i++ {
		wall = bookkeepingRun(b, embedded, trials, limit)
	}
	b.ReportMetric(wall.Seconds(), "wall_s")
	b.ReportMetric(minimum.Seconds(), "min_s")
	b.ReportMetric(wall.Seconds()/minimum.Seconds(), "observed/min")
	b.Logf("%d trials × %v on %d slots: wall %.2fs, minimum %.2fs, observed/minimum %.3f (target ≤ 1.05; Ray 1.14); whole waves of %d need %.2fs (%.3f)",
		trials, bookkeepingWork, bookkeepingSlots, wall.Seconds(), minimum.Seconds(), wall.Seconds()/minimum.Seconds(),
		bookkeepingSlots, packed.Seconds(), wall.Seconds()/packed.Seconds())
}

// bookkeepingRun runs the experiment once and returns Fit's wall time.
func bookkeepingRun(b *testing.B, embedded bool, trials int, limit time.Duration) (wall time.Duration) {
	b.Helper()
	b.StopTimer()
	rec := &spans{}
	fn := sleeper(bookkeepingWork, rec)
	opts := []tune.Option{
		tune.WithName("bookkeeping"),
		tune.WithRunConfig(tune.RunConfig{StoragePath: b.TempDir()}),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.Uniform(0, 1)}),
		tune.WithTuneConfig(tune.TuneConfig{NumSamples: trials}),
	}
	var d *deployment
	if !embedded {
		d = startDeployment(b, bookkeepingSlots, map[string]tune.Trainable{"sleeper": fn})
		defer d.close()
	}
	b.StartTimer()
	var g *tune.ResultGrid
	if embedded {
		g, wall = fitEmbedded(b, limit, bookkeepingSlots, fn, opts...)
	} else {
		g, wall = d.fit(limit, "sleeper", opts...)
	}
	fitEnd := time.Now()
	b.StopTimer()
	if g.Len() != trials || g.NumTerminated() != trials {
		b.Fatalf("%d trials, %d TERMINATED; want %d, %d", g.Len(), g.NumTerminated(), trials, trials)
	}
	if _, _, n := rec.bounds(); n != trials {
		b.Fatalf("the trainable ran %d times, want %d", n, trials)
	}
	handOffs(b, rec, fitEnd.Add(-wall), fitEnd)
	if d != nil {
		evs := d.events(context.Background(), "bookkeeping")
		attemptOverhead(b, evs, rec)
		tailSplit(b, evs, rec, fitEnd)
		consumersLeft(b, d)
	}
	return wall
}

// tailSplit says where the time between the last trainable returning and
// Fit returning went, with the log's timestamps: the runner ending the
// last trial, the controller completing the experiment, the syncer's
// final sync.
func tailSplit(b *testing.B, evs []*events.Event, rec *spans, fitEnd time.Time) {
	b.Helper()
	_, lastReturn, _ := rec.bounds()
	var lastTrial, completed, synced time.Time
	for _, ev := range evs {
		switch ev.Data.(type) {
		case *events.TrialCompleted:
			lastTrial = ev.Time
		case *events.ExperimentCompleted:
			completed = ev.Time
		case *events.SyncCompleted:
			synced = ev.Time
		}
	}
	if lastTrial.IsZero() || completed.IsZero() || synced.Before(completed) {
		b.Logf("tail: the log lacks a trial.completed, experiment.completed or a final sync.completed")
		return
	}
	b.ReportMetric(synced.Sub(completed).Seconds(), "final_sync_s")
	b.Logf("tail: last trainable return → last trial.completed %v → experiment.completed %v → final sync.completed %v → Fit return %v",
		lastTrial.Sub(lastReturn).Round(time.Millisecond), completed.Sub(lastTrial).Round(time.Millisecond),
		synced.Sub(completed).Round(time.Millisecond), fitEnd.Sub(synced).Round(time.Millisecond))
}

// consumersLeft checks that the experiment left no consumers behind on the
// event log: before c3ee3d5 every attempt leaked one for 5 minutes, and
// 1,000 attempts hit the server's limit of 1,000 consumers per stream and
// hung the experiment.
func consumersLeft(b *testing.B, d *deployment) {
	b.Helper()
	ctx := context.Background()
	s, err := d.bus("consumers").Stream(ctx)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for range s.ConsumerNames(ctx).Name() {
		n++
	}
	b.Logf("consumers on the event log after Fit: %d", n)
	if n >= 500 {
		b.Errorf("%d consumers left on the event log after Fit: watches leak consumers again (the server allows 1,000 per stream)", n)
	}
}

// handOffs says where the time beyond the trials' work went, from the
// trainable's own spans: before the first trial ran, between one trial's
// trainable returning and the next one starting on the freed slot, and
// after the last one returned.
func handOffs(b *testing.B, rec *spans, fitStart, fitEnd time.Time) {
	b.Helper()
	rec.mu.Lock()
	starts := append([]time.Time(nil), rec.start...)
	ends := append([]time.Time(nil), rec.end...)
	rec.mu.Unlock()
	sortTimes(starts)
	sortTimes(ends)
	n := len(starts)
	// The k-th trainable run after the first wave uses the slot the
	// (k-slots)-th one freed.
	var gap time.Duration
	for k := bookkeepingSlots; k < n; k++ {
		gap += starts[k].Sub(ends[k-bookkeepingSlots])
	}
	b.ReportMetric(starts[0].Sub(fitStart).Seconds(), "startup_s")
	b.ReportMetric(fitEnd.Sub(ends[n-1]).Seconds(), "tail_s")
	b.Logf("Fit start → first trainable call %v; last trainable return → Fit return %v",
		starts[0].Sub(fitStart).Round(time.Millisecond), fitEnd.Sub(ends[n-1]).Round(time.Millisecond))
	if n > bookkeepingSlots {
		mean := gap / time.Duration(n-bookkeepingSlots)
		b.ReportMetric(float64(mean.Microseconds())/1000, "handoff_ms")
		b.Logf("slot hand-off (a trainable returns → the next trainable starts on the freed slot): mean %v over %d hand-offs",
			mean.Round(10*time.Microsecond), n-bookkeepingSlots)
	}
}

// attemptOverhead splits the hand-off with the log's timestamps: the part
// inside an attempt (trial.started → trainable, trainable →
// trial.completed) and the part between attempts (trial.completed → the
// next trial.started: acking the work, fetching the next, preparing it).
func attemptOverhead(b *testing.B, evs []*events.Event, rec *spans) {
	b.Helper()
	started := map[string]time.Time{}
	var starts, ends []time.Time
	var attempts time.Duration
	for _, ev := range evs {
		switch ev.Data.(type) {
		case *events.TrialStarted:
			started[ev.Trial()] = ev.Time
			starts = append(starts, ev.Time)
		case *events.TrialCompleted:
			ends = append(ends, ev.Time)
			attempts += ev.Time.Sub(started[ev.Trial()])
		}
	}
	n := len(starts)
	if n <= bookkeepingSlots || len(ends) != n {
		b.Errorf("the log holds %d trial.started and %d trial.completed events", n, len(ends))
		return
	}
	sortTimes(starts)
	sortTimes(ends)
	var between time.Duration
	for k := bookkeepingSlots; k < n; k++ {
		between += starts[k].Sub(ends[k-bookkeepingSlots])
	}
	inside := (attempts - rec.total()) / time.Duration(n)
	between /= time.Duration(n - bookkeepingSlots)
	b.ReportMetric(float64(inside.Microseconds())/1000, "in_attempt_ms")
	b.ReportMetric(float64(between.Microseconds())/1000, "between_attempts_ms")
	b.Logf("of which inside an attempt (trial.started → trial.completed, minus the trainable) %v, between attempts (trial.completed → next trial.started) %v",
		inside.Round(10*time.Microsecond), between.Round(10*time.Microsecond))
}
