package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/tune"
)

// The cluster benchmarks repeat BenchmarkBookkeeping's and
// BenchmarkReportThroughput's deployment workloads on a 3-node JetStream
// cluster (three nats-servers in this process, routed on loopback) whose
// streams and buckets the services provision with 3 replicas, as
// `--replicas 3` / TUNEJET_REPLICAS=3 does in deploy/. Every op runs the
// workload first on a single server, then on the cluster, so the
// cluster/single ratios come from one run. They are skipped unless
// TUNEJET_BENCH_CLUSTER=1: each runs its workload twice, and three servers
// on a 2-core machine are slow to measure.
const clusterNodes = 3

// natsURL is where the deployment's connections go: the cluster's nodes
// (clients spread over them), or the single server.
func (d *deployment) natsURL() string {
	if d.url != "" {
		return d.url
	}
	return d.emb.URL()
}

func needCluster(b *testing.B) {
	b.Helper()
	if os.Getenv("TUNEJET_BENCH_CLUSTER") != "1" && !smoke() {
		b.Skip("set TUNEJET_BENCH_CLUSTER=1 to run the cluster benchmarks")
	}
}

// loadAvg is /proc/loadavg's first three fields, for the log next to the
// numbers.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// servicesOn starts the controller, a runner of slots and the syncer on a
// running single server (emb), or the runner and the syncer on a cluster
// (c): clusterFit starts the cluster's controller (see replicaGuard). close
// leaves the servers running.
func servicesOn(b *testing.B, emb *bus.Embedded, c *bustest.Cluster, slots int, fns map[string]tune.Trainable) *deployment {
	b.Helper()
	d := &deployment{b: b, emb: emb}
	if c != nil {
		d.url, d.replicas = c.URL(), c.Replicas()
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	filters := serviceFilters()
	if c == nil {
		d.start("controller", slots, fns)
	} else {
		filters = filters[1:]
	}
	d.start("runner", slots, fns)
	d.start("syncer", slots, fns)
	// Fit starts once every service watches the log: their provisioning is
	// over, and none of them races Fit's (see replicaGuard).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := d.log(ctx, "watching")
	if !waitWatching(ctx, s, 2*time.Minute, filters...) {
		d.close()
		b.Fatal("the services do not watch the log after 2 minutes")
	}
	return d
}

// serviceFilters are the filters of the log consumers the controller, the
// syncer and the runner create once they have provisioned.
func serviceFilters() []string {
	return []string{
		events.TypeSubjects("*", events.WriterClient, events.TypeExperimentSubmitted),   // controller
		events.TypeSubjects("*", events.WriterController, events.TypeExperimentStarted), // syncer
		events.Prefix + ".*." + string(events.WriterController) + ".experiment.*",       // runner
	}
}

// replicaGuard guards against the client lowering the cluster's streams to
// 1 replica, as tune.Fit's provisioning did before ae593e2 (bug C1; now
// provisioning never lowers a stream's replicas, and the guard should never
// act). The guard polls the log's
// configuration from before Fit starts and, once it sees the change, puts
// the three streams back to want replicas. It stops after that, or when
// ctx ends, and reports when it restored them.
func replicaGuard(ctx context.Context, b *testing.B, js jetstream.JetStream, want int) <-chan time.Time {
	restored := make(chan time.Time, 1)
	go func() {
		defer close(restored)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s, err := js.Stream(ctx, bus.StreamName)
			if err != nil || s.CachedInfo().Config.Replicas == want {
				continue
			}
			for _, name := range []string{bus.StreamName, bus.DLQStreamName, bus.AdvisoryStreamName} {
				s, err := js.Stream(ctx, name)
				if err != nil {
					b.Errorf("replica guard: %s: %v", name, err)
					return
				}
				cfg := s.CachedInfo().Config
				cfg.Replicas = want
				if _, err := js.UpdateStream(ctx, cfg); err != nil {
					b.Errorf("replica guard: put %s back to %d replicas: %v", name, want, err)
					return
				}
			}
			restored <- time.Now()
			return
		}
	}()
	return restored
}

// checkReplicas fails the benchmark unless the log has want replicas, all
// of them current: the cluster numbers must come from a replicated log.
func checkReplicas(b *testing.B, s jetstream.Stream, want int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !waitUntil(ctx, time.Minute, func() bool { return replicasCurrent(ctx, s, want) }) {
		b.Fatalf("the event log does not have %d current replicas", want)
	}
}

// clusterFit runs fit on the cluster deployment with the replica guard,
// and starts the controller once Fit has submitted the experiment and the
// log has its replicas back, all current: nothing is decided, scheduled or
// read while the streams change their replica count. (A consumer created
// then may land on a replica still catching up and miss events: one run's
// syncer did not find the experiment's start and stopped syncing.) It
// returns Fit's wall time from the controller's start, which on the single
// server precedes Fit, and logs what came before.
func clusterFit(b *testing.B, d *deployment, exp string, fit func() time.Duration) time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	guardBus := d.bus(ctx, "replica-guard")
	guardJS, err := jetstream.New(d.conn("bench-replica-guard-raw"))
	if err != nil {
		b.Fatal(err)
	}
	guardLog, err := guardJS.Stream(ctx, bus.StreamName)
	if err != nil {
		b.Fatal(err)
	}
	restored := replicaGuard(ctx, b, guardJS, d.replicas)
	started := make(chan time.Time, 1)
	go func() {
		defer close(started)
		sub := events.TypeSubjects(exp, events.WriterClient, events.TypeExperimentSubmitted)
		ok := waitUntil(ctx, 5*time.Minute, func() bool {
			// Fit provisions before it submits: once the submission is in
			// the log, a lowered replica count is visible too.
			if last, err := guardBus.LastSeq(ctx, sub); err != nil || last == 0 {
				return false
			}
			return replicasCurrent(ctx, guardLog, d.replicas)
		})
		if ok {
			d.start("controller", 0, nil)
			started <- time.Now()
		}
	}()
	start := time.Now()
	took := fit()
	end := start.Add(took)
	cancel()
	at, ok := <-started
	if !ok {
		b.Fatal("cluster: the controller was never started: no submission, or the log's replicas never became current")
	}
	if r, ok := <-restored; ok {
		b.Logf("cluster: Fit's client lowered the streams to 1 replica; put back to %d replicas %v after Fit started; the controller started %v after Fit, with all replicas current",
			d.replicas, r.Sub(start).Round(time.Millisecond), at.Sub(start).Round(time.Millisecond))
	} else {
		b.Logf("cluster: the streams kept %d replicas through Fit; the controller started %v after Fit", d.replicas, at.Sub(start).Round(time.Millisecond))
	}
	checkReplicas(b, guardLog, d.replicas)
	return end.Sub(at)
}

// replicasCurrent reports whether the log has want replicas, all current.
func replicasCurrent(ctx context.Context, s jetstream.Stream, want int) bool {
	info, err := s.Info(ctx)
	if err != nil || info.Config.Replicas != want || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != want-1 {
		return false
	}
	for _, r := range info.Cluster.Replicas {
		if !r.Current {
			return false
		}
	}
	return true
}

// BenchmarkBookkeepingCluster is BenchmarkBookkeeping/deployment (1,000
// trials × 0.5 s on 16 slots, or TUNEJET_BENCH_TRIALS × TUNEJET_BENCH_WORK
// with a single count) on a single server and on a 3-node cluster with 3
// replicas, in one run.
func BenchmarkBookkeepingCluster(b *testing.B) {
	needCluster(b)
	counts, work := bookkeepingScale(b)
	if len(counts) != 1 {
		b.Fatalf("TUNEJET_BENCH_TRIALS: BenchmarkBookkeepingCluster takes one count, not %v", counts)
	}
	trials := counts[0]
	minimum := time.Duration(trials) * work / bookkeepingSlots
	limit := 2*minimum + 60*time.Second
	var single, cluster bookkeepingRow
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ss, cs := alternate(b, func(onCluster bool) bookkeepingRow {
			r := bookkeepingOn(b, onCluster, trials, work, limit)
			b.Logf("  %-20s wall %.2fs, observed/min %.3f, slot hand-off %v, Fit start → first trainable %v, last trainable → Fit return %v",
				sideName(onCluster), r.wall.Seconds(), r.wall.Seconds()/minimum.Seconds(), r.handOff.Round(10*time.Microsecond),
				r.startup.Round(time.Millisecond), r.tail.Round(time.Millisecond))
			return r
		})
		single, cluster = meanBookkeeping(ss), meanBookkeeping(cs)
	}
	b.ReportMetric(single.wall.Seconds()/minimum.Seconds(), "single_observed/min")
	b.ReportMetric(cluster.wall.Seconds()/minimum.Seconds(), "cluster_observed/min")
	b.ReportMetric(cluster.wall.Seconds()/single.wall.Seconds(), "cluster/single_wall")
	b.ReportMetric(single.handOff.Seconds()*1000, "single_handoff_ms")
	b.ReportMetric(cluster.handOff.Seconds()*1000, "cluster_handoff_ms")
	b.ReportMetric(cluster.handOff.Seconds()/single.handOff.Seconds(), "cluster/single_handoff")
	b.Logf("%d trials × %v on %d slots, minimum %.2fs (target ≤ 1.05 × the minimum)", trials, work, bookkeepingSlots, minimum.Seconds())
	b.Logf("means: single server wall %.2fs (%.3f), hand-off %v; cluster wall %.2fs (%.3f), hand-off %v",
		single.wall.Seconds(), single.wall.Seconds()/minimum.Seconds(), single.handOff.Round(10*time.Microsecond),
		cluster.wall.Seconds(), cluster.wall.Seconds()/minimum.Seconds(), cluster.handOff.Round(10*time.Microsecond))
	b.Logf("cluster/single: wall %.3f, hand-off %.2f", cluster.wall.Seconds()/single.wall.Seconds(), cluster.handOff.Seconds()/single.handOff.Seconds())
}

// alternate runs a workload on the single server and on the cluster,
// TUNEJET_BENCH_CLUSTER_PAIRS times (1): the first pair single server
// first, the next cluster first, and so on, so that a load that rises or
// falls during the run (other work on the machine) favours neither side.
func alternate[T any](b *testing.B, run func(onCluster bool) T) (single, cluster []T) {
	b.Helper()
	pairs := envInt(b, "TUNEJET_BENCH_CLUSTER_PAIRS", 1, 1)
	for p := 0; p < pairs; p++ {
		for _, onCluster := range []bool{p%2 == 1, p%2 == 0} {
			b.Logf("pair %d, %s: load average %s before", p+1, sideName(onCluster), loadAvg())
			r := run(onCluster)
			if onCluster {
				cluster = append(cluster, r)
			} else {
				single = append(single, r)
			}
		}
	}
	b.Logf("load average after: %s", loadAvg())
	return single, cluster
}

func sideName(onCluster bool) string {
	if onCluster {
		return fmt.Sprintf("%d-node cluster, R%d", clusterNodes, clusterNodes)
	}
	return "single server"
}

func meanBookkeeping(rs []bookkeepingRow) bookkeepingRow {
	var m bookkeepingRow
	for _, r := range rs {
		m.wall += r.wall / time.Duration(len(rs))
		m.handOff += r.handOff / time.Duration(len(rs))
		m.startup += r.startup / time.Duration(len(rs))
		m.tail += r.tail / time.Duration(len(rs))
	}
	return m
}

// side is one half of a cluster benchmark: a fresh single server or a
// fresh cluster, with the services running on it.
type side struct {
	d         *deployment
	onCluster bool
	url       string
	replicas  int
	shutdown  func()
}

// startSide starts the servers and the services (slots runner slots).
func startSide(b *testing.B, onCluster bool, slots int, fns map[string]tune.Trainable) *side {
	b.Helper()
	if onCluster {
		c := bustest.StartCluster(b, clusterNodes)
		return &side{d: servicesOn(b, nil, c, slots, fns), onCluster: true, url: c.URL(), replicas: c.Replicas(), shutdown: c.Shutdown}
	}
	emb := startServer(b)
	return &side{d: servicesOn(b, emb, nil, slots, fns), url: emb.URL(), replicas: 1, shutdown: emb.Shutdown}
}

// stop stops the services, then the servers.
func (sd *side) stop() {
	sd.d.close()
	sd.shutdown()
}

// fit runs the experiment with the trainable, timed as the benchmark's
// measured part: Fit's wall time, or on the cluster the time from the
// controller's start (see clusterFit).
func (sd *side) fit(b *testing.B, limit time.Duration, exp, trainable string, opts ...tune.Option) (*tune.ResultGrid, time.Duration) {
	b.Helper()
	var g *tune.ResultGrid
	fit := func() time.Duration {
		var took time.Duration
		g, took = sd.d.fit(limit, trainable, opts...)
		return took
	}
	b.StartTimer()
	defer b.StopTimer()
	var took time.Duration
	if sd.onCluster {
		took = clusterFit(b, sd.d, exp, fit)
	} else {
		took = fit()
	}
	return g, took
}

// bookkeepingOn runs the bookkeeping experiment once on a fresh single
// server or a fresh cluster and checks that every trial ended TERMINATED.
func bookkeepingOn(b *testing.B, onCluster bool, trials int, work, limit time.Duration) bookkeepingRow {
	b.Helper()
	rec := &spans{}
	fns := map[string]tune.Trainable{"sleeper": sleeper(work, rec)}
	opts := []tune.Option{
		tune.WithName("bookkeeping"),
		tune.WithRunConfig(tune.RunConfig{StoragePath: b.TempDir()}),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.Uniform(0, 1)}),
		tune.WithTuneConfig(tune.TuneConfig{NumSamples: trials}),
	}
	sd := startSide(b, onCluster, bookkeepingSlots, fns)
	defer sd.stop()
	g, wall := sd.fit(b, limit, "bookkeeping", "sleeper", opts...)
	fitEnd := time.Now()
	if g.Len() != trials || g.NumTerminated() != trials {
		b.Fatalf("%d trials, %d TERMINATED; want %d, %d", g.Len(), g.NumTerminated(), trials, trials)
	}
	if _, _, n := rec.bounds(); n != trials {
		b.Fatalf("the trainable ran %d times, want %d", n, trials)
	}
	return bookkeepingRow{trials: trials, wall: wall, slotTimes: rec.slotTimes(bookkeepingSlots, fitEnd.Add(-wall), fitEnd)}
}

// BenchmarkReportThroughputCluster is BenchmarkReportThroughput/deployment
// (8 trials × 25,000 reports) on a single server and on a 3-node cluster
// with 3 replicas, in one run. Each side's raw baseline publishes as many
// copies of the same event with PublishAsync into a fresh event log (the
// experiment's deleted, the log provisioned again: 1 replica on the single
// server, 3 on the cluster) on the same servers, with the services stopped.
func BenchmarkReportThroughputCluster(b *testing.B) {
	needCluster(b)
	trials := envInt(b, "TUNEJET_BENCH_REPORT_TRIALS", 8, 2)
	per := envInt(b, "TUNEJET_BENCH_REPORTS", 25000, 200)
	total := trials * per
	var single, cluster throughput
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ss, cs := alternate(b, func(onCluster bool) throughput {
			r := throughputOn(b, onCluster, trials, per)
			b.Logf("  %-20s end to end %.0f reports/s (Fit %.2fs); raw PublishAsync %.0f msgs/s (%.2fs); %.1f %% of raw; emitted %.0f/s, written %.0f/s, write lag %.2fs",
				sideName(onCluster), r.e2e, r.fit.Seconds(), r.raw, r.rawTook.Seconds(), 100*r.e2e/r.raw, r.emitted, r.written, r.writeLag.Seconds())
			return r
		})
		single, cluster = meanThroughput(ss), meanThroughput(cs)
		b.StartTimer()
	}
	b.ReportMetric(single.e2e, "single_reports/s")
	b.ReportMetric(cluster.e2e, "cluster_reports/s")
	b.ReportMetric(cluster.e2e/single.e2e, "cluster/single_reports")
	b.ReportMetric(single.raw, "single_raw_msgs/s")
	b.ReportMetric(cluster.raw, "cluster_raw_msgs/s")
	b.ReportMetric(cluster.raw/single.raw, "cluster/single_raw")
	b.ReportMetric(100*single.e2e/single.raw, "single_%_of_raw")
	b.ReportMetric(100*cluster.e2e/cluster.raw, "cluster_%_of_raw")
	b.Logf("%d trials × %d reports = %d reports; a trial.reported event is %d B", trials, per, total, cluster.msgBytes+cluster.hdrBytes)
	b.Logf("means: single server %.0f reports/s, raw %.0f msgs/s (%.1f %%); cluster %.0f reports/s, raw %.0f msgs/s (%.1f %%)",
		single.e2e, single.raw, 100*single.e2e/single.raw, cluster.e2e, cluster.raw, 100*cluster.e2e/cluster.raw)
	b.Logf("cluster/single: reports/s %.3f, raw msgs/s %.3f", cluster.e2e/single.e2e, cluster.raw/single.raw)
}

// meanThroughput averages the rates of several runs.
func meanThroughput(rs []throughput) throughput {
	m := rs[0]
	m.e2e, m.raw = 0, 0
	for _, r := range rs {
		m.e2e += r.e2e / float64(len(rs))
		m.raw += r.raw / float64(len(rs))
	}
	return m
}

// throughputOn runs the throughput experiment once on a fresh single
// server or cluster, checks every report reached result.json, then stops
// the services and measures the raw baseline on the same servers.
func throughputOn(b *testing.B, onCluster bool, trials, per int) throughput {
	b.Helper()
	total := trials * per
	var m throughput
	rec := &spans{}
	fns := map[string]tune.Trainable{"reporter": reporter(per, rec)}
	opts := []tune.Option{
		tune.WithName("throughput"),
		tune.WithRunConfig(tune.RunConfig{StoragePath: b.TempDir()}),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.Uniform(0, 1)}),
		tune.WithTuneConfig(tune.TuneConfig{NumSamples: trials}),
	}
	const limit = 10 * time.Minute
	sd := startSide(b, onCluster, trials, fns)
	defer sd.stop()
	d := sd.d
	var g *tune.ResultGrid
	g, m.fit = sd.fit(b, limit, "throughput", "reporter", opts...)

	lastWrite := checkReports(b, g, trials, per, func() { d.diagnose("throughput") })
	m.spans(rec, total, lastWrite)

	var subjects []string
	for _, r := range g.Results() {
		subjects = append(subjects, events.Subject("throughput", events.WriterRunner, events.TypeTrialReported, r.TrialID))
	}
	hdr, data := rebuildReport(b, g.Get(0)) // one report, as in BenchmarkReportThroughput
	m.events = d.countStored(context.Background(), events.TypeSubjects("throughput", events.WriterRunner, events.TypeTrialReported))
	m.msgBytes, m.hdrBytes = len(data), headerBytes(hdr)
	d.close() // the baseline runs alone, on the same servers

	m.rawTook = rawPublishFresh(b, sd.url, sd.replicas, subjects, hdr, data, total)
	m.raw = perSecond(total, m.rawTook)
	return m
}

// rawPublishFresh deletes the event log on the servers at url, provisions
// it again with replicas, and times n PublishAsync calls of the message
// (each with its own Nats-Msg-Id, round robin over subjects) until every
// one is acknowledged; the log must then hold all n.
func rawPublishFresh(b *testing.B, url string, replicas int, subjects []string, hdr nats.Header, data []byte, n int) time.Duration {
	b.Helper()
	ctx := context.Background()
	nc, err := nats.Connect(url, nats.Name("bench-raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	bs, err := bus.New(nc, "bench/raw", zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	bs.Replicas = replicas
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	if err := js.DeleteStream(ctx, bus.StreamName); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		b.Fatalf("delete the log before the raw baseline: %v", err)
	}
	if err := bs.Provision(ctx); err != nil {
		b.Fatal(err)
	}
	return publishAll(b, js, replicas, subjects, hdr, data, n)
}
