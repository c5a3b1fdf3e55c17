package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/dashboard"
	"github.com/tunejet/tunejet/tune"
)

// BenchmarkDashboard10kTrials measures the page of a large experiment in
// headless Chromium: how long the page takes to show the trials table and
// the curves (from the navigation to the last line drawn; cold: the
// dashboard folds the log on the first request; warm: it follows the log
// already), and how long a
// report takes from its publication on the log to its point on the chart
// (polled from the benchmark through the DevTools protocol, so the figure
// includes a round trip of it); then the median time of a filter keystroke
// and of a sort, timed in the page.
//
// The experiment is published directly to the log: TUNEJET_BENCH_DASH_TRIALS
// (10,000) trials of TUNEJET_BENCH_DASH_REPORTS (5) reports each, with two
// config keys; the last 16 are still running, and each of
// TUNEJET_BENCH_DASH_UPDATES (30) updates is one more report of one of them;
// with -short (make test's smoke run) 100 trials of 2 reports and 3 updates.
//
//	go test -run '^$' -bench BenchmarkDashboard10kTrials -benchtime 1x ./internal/dashboard/
func BenchmarkDashboard10kTrials(b *testing.B) {
	n := benchEnv(b, "TUNEJET_BENCH_DASH_TRIALS", 10000, 100)
	reports := benchEnv(b, "TUNEJET_BENCH_DASH_REPORTS", 5, 2)
	updates := benchEnv(b, "TUNEJET_BENCH_DASH_UPDATES", 30, 3)
	for i := 0; i < b.N; i++ {
		benchDashboard(b, n, reports, updates)
	}
}

// benchEnv reads an integer from the environment; unset, it is def, or
// smallest under -short (make test's smoke run of every benchmark).
func benchEnv(b *testing.B, name string, def, smallest int) int {
	v := os.Getenv(name)
	if v == "" {
		if testing.Short() {
			return smallest
		}
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// synthetic writes what a controller and a runner would have written for
// n trials of the given reports each, the last running of them still
// running.
type synthetic struct {
	exp              string
	n, reports, runs int
	spec             events.ExperimentSpec
}

func (h *synthetic) trialID(i int) string { return fmt.Sprintf("abcde_%05d", i) }

func (h *synthetic) config(i int) map[string]any {
	return map[string]any{"lr": 1e-4 * float64(1+i%997), "momentum": 0.5 + float64(i%13)/26}
}

func (h *synthetic) loss(i, it int) float64 {
	return 0.2 + float64(i%997)/997 + 1/float64(it)
}

func (h *synthetic) report(i, it int) *events.Event {
	return events.New(h.exp, events.WriterRunner, "bench/runner", &events.TrialReported{TrialID: h.trialID(i), Attempt: 1, Result: map[string]any{
		"loss": h.loss(i, it), "training_iteration": it, "time_total_s": 0.1 * float64(it), "done": false,
	}})
}

func (h *synthetic) generate(emit func(*events.Event)) {
	ev := func(w events.Writer, p events.Payload) { emit(events.New(h.exp, w, "bench/"+string(w), p)) }
	ev(events.WriterClient, &events.ExperimentSubmitted{Spec: h.spec})
	ev(events.WriterController, &events.ExperimentStarted{Run: 1, Session: "2026-12-02_00-00-00", Seed: 1, TrialIDPrefix: "abcde", NumTrials: h.n, StoragePath: h.spec.RunConfig.StoragePath})
	for i := 0; i < h.n; i++ {
		id, dir := h.trialID(i), "trial_"+h.trialID(i)
		ev(events.WriterController, &events.TrialCreated{TrialID: id, Index: i, TrialName: "bench_" + id, ExperimentTag: strconv.Itoa(i), DirName: dir, Config: h.config(i)})
		ev(events.WriterController, &events.TrialScheduled{TrialID: id, TrialName: "bench_" + id, DirName: dir, Config: h.config(i), Trainable: h.spec.Trainable, HeartbeatTimeoutS: 30})
		ev(events.WriterRunner, &events.TrialStarted{TrialID: id, Attempt: 1, Runner: fmt.Sprintf("runner-%d", i%8), Hostname: "bench", PID: 4242})
		for it := 1; it <= h.reports; it++ {
			emit(h.report(i, it))
		}
		if i < h.n-h.runs {
			ev(events.WriterRunner, &events.TrialCompleted{TrialID: id, Attempt: 1, Status: events.StatusTerminated, Reason: "finished"})
		}
	}
}

func benchDashboard(b *testing.B, n, reports, updates int) {
	b.StopTimer()
	ctx := context.Background()
	tuner, err := tune.NewTuner("bench", tune.WithName("dash10k"),
		tune.WithParamSpace(tune.ParamSpace{"lr": tune.LogUniform(1e-4, 1e-1), "momentum": tune.Uniform(0.5, 1)}),
		tune.WithTuneConfig(tune.TuneConfig{Metric: "loss", Mode: "min", NumSamples: n}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: b.TempDir()}))
	if err != nil {
		b.Fatal(err)
	}
	spec, err := tuner.Spec()
	if err != nil {
		b.Fatal(err)
	}
	h := &synthetic{exp: "dash10k", n: n, reports: reports, runs: min(16, n), spec: spec}
	srv := bustest.Start(b)
	bs := srv.Bus("bench/publisher")
	js, err := jetstream.New(srv.Conn())
	if err != nil {
		b.Fatal(err)
	}
	published := time.Now()
	var pubErr error
	total := 0
	h.generate(func(ev *events.Event) {
		total++
		if pubErr == nil {
			pubErr = publishAsync(js, ev)
		}
	})
	if pubErr != nil {
		b.Fatal(pubErr)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		b.Fatal("the history's acks never came")
	}
	b.Logf("published %d events (%d trials × %d reports) in %v", total, n, reports, time.Since(published).Round(time.Millisecond))

	url := serveDashboard(b, dashboard.New(dashCtx(b), dashBus(b, srv.URL()), dashboard.Config{Log: testLog(b)})).URL
	bctx := browser(b)
	page := url + "/experiments/" + h.exp

	// Page load: the rows of the first page and every curve.
	b.StartTimer()
	start := time.Now()
	navigate(b, bctx, page)
	waitForLong(b, bctx, "the table and every curve", fmt.Sprintf(
		`document.getElementById("filter-count").textContent === "%d of %d trials" && document.querySelectorAll("#curves polyline").length === %d`, n, n, min(n, 500)))
	load := time.Since(start)
	b.StopTimer()
	rows := evaluate[int](b, bctx, `document.querySelectorAll("#trials-table tbody tr").length`)
	b.Logf("page load at %d trials, the dashboard folding the log first: %v (%d rows in the document)", n, load.Round(time.Millisecond), rows)
	// Again, the dashboard following the log already.
	navigate(b, bctx, "about:blank")
	b.StartTimer()
	start = time.Now()
	navigate(b, bctx, page)
	waitForLong(b, bctx, "the table and the curves again", fmt.Sprintf(
		`document.getElementById("filter-count").textContent === "%d of %d trials" && document.querySelectorAll("#curves polyline").length === %d`, n, n, min(n, 500)))
	warm := time.Since(start)
	b.StopTimer()
	b.Logf("page load at %d trials, the dashboard following the log: %v", n, warm.Round(time.Millisecond))
	// Where a redraw's time goes, in the page.
	b.Logf("in the page: %s", evaluate[string](b, bctx, `(() => {
		const time = (f) => { const t0 = performance.now(); for (let i = 0; i < 5; i++) f(); return ((performance.now() - t0) / 5).toFixed(1) + " ms"; };
		return "table " + time(drawTable) + ", curves " + time(() => { curves.key = ""; drawCurves(new Set()); }) +
			", parallel coordinates " + time(drawParcoords) + ", history " + time(drawHistory) + ", parameters vs metric " + time(drawScatter);
	})()`))

	// Update latency: a report of a running trial → its point drawn.
	var lat []time.Duration
	next := map[int]int{}
	for u := 0; u < updates; u++ {
		i := n - 1 - u%h.runs
		if next[i] == 0 {
			next[i] = reports + 1
		}
		it := next[i]
		next[i]++
		t0 := time.Now()
		if _, err := bs.Publish(ctx, h.report(i, it)); err != nil {
			b.Fatal(err)
		}
		waitForLong(b, bctx, "the new point", fmt.Sprintf(`document.querySelector('polyline[data-trial="%s"]')?.dataset.n === "%d"`, h.trialID(i), it))
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))].Round(time.Millisecond) }
	b.Logf("report → point drawn, %d updates at %d trials: p50 %v, p95 %v, max %v", len(lat), n, p(0.5), p(0.95), lat[len(lat)-1].Round(time.Millisecond))

	// A filter typed a keystroke at a time, and sorts by several columns:
	// each timed in the page from the event to the frame after it (what
	// the handler and the redraws it causes cost, layout and paint
	// included).
	keys := evaluate[[]float64](b, bctx, `(async () => {
		const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
		const f = document.getElementById("filter"), text = "lr<0.005", out = [];
		for (let i = 1; i <= text.length; i++) {
			const t0 = performance.now();
			f.value = text.slice(0, i);
			f.dispatchEvent(new Event("input"));
			await frame();
			out.push(performance.now() - t0);
		}
		f.value = "";
		f.dispatchEvent(new Event("input"));
		await frame();
		return out;
	})()`)
	sorts := evaluate[[]float64](b, bctx, `(async () => {
		const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
		const out = [];
		for (const col of ["trial", "last", "config.lr", "status", "runner", "iter"]) {
			for (let i = 0; i < 2; i++) {
				const t0 = performance.now();
				document.querySelector('#trials-table th[data-col="' + col + '"]').click();
				await frame();
				out.push(performance.now() - t0);
			}
		}
		return out;
	})()`)
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	b.Logf("filter keystroke at %d trials (%d keystrokes of \"lr<0.005\"): median %.0f ms, max %.0f ms", n, len(keys), median(slices.Clone(keys)), slices.Max(keys))
	b.Logf("sort at %d trials (%d header clicks): median %.0f ms, max %.0f ms", n, len(sorts), median(slices.Clone(sorts)), slices.Max(sorts))
	b.ReportMetric(median(keys), "filter-key-ms")
	b.ReportMetric(median(sorts), "sort-ms")
	b.ReportMetric(load.Seconds(), "cold-load-s")
	b.ReportMetric(warm.Seconds(), "load-s")
	b.ReportMetric(float64(p(0.5).Milliseconds()), "update-p50-ms")
	b.ReportMetric(float64(p(0.95).Milliseconds()), "update-p95-ms")
}

// waitForLong is waitFor with the patience of a benchmark.
func waitForLong(b *testing.B, ctx context.Context, what, expr string) {
	b.Helper()
	if err := pollPage(ctx, expr, 3*time.Minute); err != nil {
		b.Fatalf("the page never showed %s (%s): %v", what, expr, err)
	}
}

// publishAsync publishes an event without waiting for its ack, waiting
// for the acks in flight first when too many are.
func publishAsync(js jetstream.JetStream, ev *events.Event) error {
	msg, err := bus.ToNATS(ev)
	if err != nil {
		return err
	}
	if js.PublishAsyncPending() >= 2048 {
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(time.Minute):
			return fmt.Errorf("%d acks outstanding after a minute", js.PublishAsyncPending())
		}
	}
	if _, err := js.PublishMsgAsync(msg); err != nil {
		return fmt.Errorf("publish %s: %w", ev.Type(), err)
	}
	return nil
}
