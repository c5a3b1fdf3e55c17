package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/tune"
)

// reporter is the trainable of the throughput benchmark: it calls Report n
// times in a tight loop and records the span of the loop.
func reporter(n int, rec *spans) tune.Trainable {
	return func(ctx context.Context, config map[string]any) error {
		x, _ := config["x"].(float64)
		start := time.Now()
		for i := 1; i <= n; i++ {
			if err := tune.Report(ctx, map[string]any{"loss": x / float64(i), "step": i}); err != nil {
				return err
			}
		}
		rec.add(start, time.Now())
		return nil
	}
}

// BenchmarkReportThroughput measures reports per second end to end —
// tune.Report in the runner, the event log, the controller, the syncer and
// Fit's watcher each folding it, a line in result.json, Fit returning —
// against a plain JetStream PublishAsync of as many messages of the same
// size, on a fresh server of the same kind, in the same run: a warm-up of
// each, then TUNEJET_BENCH_REPORT_ROUNDS (5) rounds of each in alternating
// order (see interleave); %_of_raw is of the medians, %_of_raw_min and
// _max the range of the rounds', and the other figures are the median
// round's. It runs on a
// deployment (services on their own TCP connections, as
// tune/harness_test.go does) and on the embedded stack tune.Fit starts by
// default (one in-process connection). Scale: TUNEJET_BENCH_REPORT_TRIALS
// trials (8, one runner slot each) × TUNEJET_BENCH_REPORTS reports (25000).
// Targets: ≥ 20,000 reports/s and ≥ 50 % of raw.
func BenchmarkReportThroughput(b *testing.B) {
	b.Run("deployment", func(b *testing.B) { reportThroughput(b, false) })
	b.Run("embedded", func(b *testing.B) { reportThroughput(b, true) })
}

func reportThroughput(b *testing.B, embedded bool) {
	trials := envInt(b, "TUNEJET_BENCH_REPORT_TRIALS", 8, 2)
	per := envInt(b, "TUNEJET_BENCH_REPORTS", 25000, 200)
	rounds := envInt(b, "TUNEJET_BENCH_REPORT_ROUNDS", 5, 1)
	total := trials * per
	var m throughput
	var fits, raws, rawCPUs []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var runs []throughput
		var msg reportMessage
		fits, raws, rawCPUs = nil, nil, nil
		system := func(r int, keep bool) {
			run, rm := runThroughput(b, embedded, trials, per)
			if r == 0 {
				msg = rm // the warm-up's report, the baseline's message from then on
			}
			if keep {
				runs, fits = append(runs, run), append(fits, run.fit)
			}
		}
		baseline := func(r int, keep bool) {
			cpu0 := processCPU(b)
			took := rawPublish(b, embedded, msg.subjects, msg.hdr, msg.data, total)
			if keep {
				raws, rawCPUs = append(raws, took), append(rawCPUs, processCPU(b)-cpu0)
			}
		}
		interleave(rounds, system, baseline)
		// The other figures are the median round's (by Fit's time).
		slices.SortFunc(runs, func(x, y throughput) int { return cmp.Compare(x.fit, y.fit) })
		m = runs[(len(runs)-1)/2]
		m.msgBytes, m.hdrBytes = len(msg.data), headerBytes(msg.hdr)
		m.rawTook, m.rawCPU = median(raws), median(rawCPUs)
		m.raw = perSecond(total, m.rawTook)
		b.StartTimer()
	}
	lo, hi := ratioRange(raws, fits)
	b.ReportMetric(m.e2e, "reports/s")
	b.ReportMetric(m.raw, "raw_msgs/s")
	b.ReportMetric(100*m.e2e/m.raw, "%_of_raw")
	b.ReportMetric(100*lo, "%_of_raw_min")
	b.ReportMetric(100*hi, "%_of_raw_max")
	b.Logf("medians of %d rounds after a warm-up of each, in alternating order: Fit %v (range %s), raw %v (range %s); %% of raw %.1f, rounds %.1f–%.1f",
		len(fits), short(median(fits)), spread(fits), short(m.rawTook), spread(raws), 100*m.e2e/m.raw, 100*lo, 100*hi)
	b.ReportMetric(m.emitted, "emitted/s")
	b.ReportMetric(m.written, "written/s")
	b.ReportMetric(m.writeLag.Seconds(), "write_lag_s")
	b.ReportMetric(float64(m.cpu.Microseconds())/float64(total), "cpu_us/report")
	b.ReportMetric(float64(m.rawCPU.Microseconds())/float64(total), "raw_cpu_us/msg")
	b.Logf("%d trials × %d reports = %d reports; a trial.reported event is %d B (%d B data + %d B headers)", trials, per, total, m.msgBytes+m.hdrBytes, m.msgBytes, m.hdrBytes)
	b.Logf("end to end (Fit start → Fit return, every report a line in result.json): %.0f reports/s in %.2fs", m.e2e, m.fit.Seconds())
	b.Logf("plain JetStream PublishAsync of %d such messages, all acked: %.0f msgs/s in %.2fs", total, m.raw, m.rawTook.Seconds())
	b.Logf("CPU time of the whole process: %.1f µs per report end to end, %.1f µs per raw message (%.1f %%: the share of raw a CPU-bound run would reach)",
		float64(m.cpu.Microseconds())/float64(total), float64(m.rawCPU.Microseconds())/float64(total), 100*m.rawCPU.Seconds()/m.cpu.Seconds())
	b.Logf("tunejet/raw: %.1f %% (targets: ≥ 50 %% of raw and ≥ 20000 reports/s; Ray's guidance ~500 results/s)", 100*m.e2e/m.raw)
	b.Logf("published: the tune.Report loops ran at %.0f reports/s (first call → last return %.2fs)", m.emitted, m.emitSpan.Seconds())
	if m.stored > 0 {
		b.ReportMetric(m.stored, "stored/s")
		b.ReportMetric(float64(total)/float64(m.events), "reports/event")
		b.Logf("stored: %.0f reports/s by the server's timestamps (first → last trial.reported %.2fs), in %d trial.reported events (%.1f reports per event)",
			m.stored, m.storeSpan.Seconds(), m.events, float64(total)/float64(m.events))
	}
	b.Logf("written: %.0f reports/s into result.json (first Report call → last write %.2fs); the last write came %.2fs after the last Report returned, Fit returned %.2fs after that",
		m.written, m.writeSpan.Seconds(), m.writeLag.Seconds(), m.fitLag.Seconds())
}

type throughput struct {
	fit, rawTook                   time.Duration
	e2e, raw                       float64
	emitted, stored, written       float64
	emitSpan, storeSpan, writeSpan time.Duration
	writeLag, fitLag               time.Duration
	msgBytes, hdrBytes             int
	events                         uint64 // trial.reported events stored (deployment)
	// cpu and rawCPU are the CPU time this process (every service, the
	// server, the trainables) spent during Fit and during the baseline.
	cpu, rawCPU time.Duration
}

// processCPU is the user and system CPU time of this process so far. The
// machine is shared, so wall-clock rates swing with the load; CPU time per
// report says what the work costs whatever the load.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportMessage is the baseline's message: a trial.reported event of one
// report as the runner encodes it, and the trials' subjects.
type reportMessage struct {
	subjects []string
	hdr      nats.Header
	data     []byte
}

// runThroughput runs the experiment once and returns its figures (all but
// the baseline's) and the baseline's message.
func runThroughput(b *testing.B, embedded bool, trials, per int) (throughput, reportMessage) {
	b.Helper()
	total := trials * per
	var m throughput
	rec := &spans{}
	fn := reporter(per, rec)
	opts := []tune.Option{
		tune.WithName("throughput"),
		tune.WithRunConfig(tune.RunConfig{StoragePath: b.TempDir()}),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.Uniform(0, 1)}),
		tune.WithTuneConfig(tune.TuneConfig{NumSamples: trials}),
	}
	const limit = 10 * time.Minute
	var d *deployment
	var g *tune.ResultGrid
	var cpu0 time.Duration
	if embedded {
		cpu0 = processCPU(b)
		b.StartTimer()
		g, m.fit = fitEmbedded(b, limit, trials, fn, opts...)
	} else {
		d = startDeployment(b, trials, map[string]tune.Trainable{"reporter": fn})
		defer d.close()
		cpu0 = processCPU(b)
		b.StartTimer()
		g, m.fit = d.fit(limit, "reporter", opts...)
	}
	fitEnd := time.Now()
	m.cpu = processCPU(b) - cpu0
	b.StopTimer()

	// Correctness first: every report is a line in result.json by the time
	// Fit returns.
	lastWrite := checkReports(b, g, trials, per, nil)
	m.spans(rec, total, lastWrite)
	m.fitLag = fitEnd.Sub(lastWrite)

	// The baseline publishes a message of one report: a trial.reported
	// event of a single result, encoded as the runner does, on the trials'
	// subjects. (The runner sends the results that queue while a publish
	// is answered in one event; the baseline does not batch.)
	var msg reportMessage
	for _, r := range g.Results() {
		msg.subjects = append(msg.subjects, events.Subject("throughput", events.WriterRunner, events.TypeTrialReported, r.TrialID))
	}
	msg.hdr, msg.data = rebuildReport(b, g.Get(0))
	if !embedded {
		filter := events.TypeSubjects("throughput", events.WriterRunner, events.TypeTrialReported)
		first, last, _ := d.storedSpan(context.Background(), filter)
		m.storeSpan = last.Sub(first)
		m.stored = perSecond(total, m.storeSpan)
		m.events = d.countStored(context.Background(), filter)
	}
	return m, msg
}

// rebuildReport encodes the trial.reported event of a trial's last result
// as the runner did.
func rebuildReport(b *testing.B, r *tune.Result) (nats.Header, []byte) {
	b.Helper()
	data, err := os.ReadFile(filepath.Join(r.Path, "result.json"))
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	var result map[string]any
	if err := json.Unmarshal(lines[len(lines)-1], &result); err != nil {
		b.Fatal(err)
	}
	delete(result, "config") // the syncer adds it; the event does not carry it
	ev := events.New("throughput", events.WriterRunner, "tunejet/embedded/runner", &events.TrialReported{TrialID: r.TrialID, Attempt: 1, Result: result})
	msg, err := bus.ToNATS(ev)
	if err != nil {
		b.Fatal(err)
	}
	return msg.Header, msg.Data
}

// rawPublish publishes n copies of a message (each with its own
// Nats-Msg-Id, round robin over subjects) with PublishAsync to the TUNEJET
// stream of a fresh server — over TCP, or in process — waits for every
// ack, and returns how long that took. The stream must then hold all n (a
// failed ack would be missing).
func rawPublish(b *testing.B, inProcess bool, subjects []string, hdr nats.Header, data []byte, n int) time.Duration {
	b.Helper()
	emb := startServer(b)
	defer emb.Shutdown()
	var nc *nats.Conn
	var err error
	if inProcess {
		nc, err = nats.Connect("", nats.InProcessServer(emb.Server), nats.Name("bench-raw"))
	} else {
		nc, err = nats.Connect(emb.URL(), nats.Name("bench-raw"))
	}
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	bs, err := bus.New(nc, "bench/raw", zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	if err := bs.Provision(context.Background()); err != nil {
		b.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	return publishAll(b, js, 1, subjects, hdr, data, n)
}

// publishAll times n PublishAsync calls of the message (each with its own
// Nats-Msg-Id, round robin over subjects) into the event log until every
// one is acknowledged; the log must then hold all n, with replicas.
func publishAll(b *testing.B, js jetstream.JetStream, replicas int, subjects []string, hdr nats.Header, data []byte, n int) time.Duration {
	b.Helper()
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = events.NewID()
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		h := make(nats.Header, len(hdr))
		for k, v := range hdr {
			h[k] = v
		}
		h.Set(jetstream.MsgIDHeader, ids[i])
		// Backpressure, not failure, when 4,000 acks are outstanding: a
		// loaded machine can keep them in flight longer than nats.go's
		// default 200 ms stall wait; the baseline measures the rate the
		// log takes messages at.
		if _, err := js.PublishMsgAsync(&nats.Msg{Subject: subjects[i%len(subjects)], Header: h, Data: data}, jetstream.WithStallWait(time.Minute)); err != nil {
			b.Fatalf("raw publish %d: %v", i, err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		b.Fatalf("raw publish: %d acks outstanding after 5 minutes", js.PublishAsyncPending())
	}
	took := time.Since(start)
	s, err := js.Stream(ctx, bus.StreamName)
	if err != nil {
		b.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if info.State.Msgs != uint64(n) || info.Config.Replicas != replicas {
		b.Fatalf("raw publish: the log holds %d messages with %d replicas, want %d with %d", info.State.Msgs, info.Config.Replicas, n, replicas)
	}
	return took
}

// checkReports fails the benchmark unless every one of trials ended
// TERMINATED with per lines in its result.json when Fit returned (logging
// each trial, then calling diagnose if set); it returns the last write.
func checkReports(b *testing.B, g *tune.ResultGrid, trials, per int, diagnose func()) time.Time {
	b.Helper()
	lines, lastWrite := resultFiles(b, g)
	sum, short := 0, 0
	for _, n := range lines {
		sum += n
		if n != per {
			short++
		}
	}
	if g.NumTerminated() != trials || len(lines) != trials || short > 0 {
		for _, r := range g.Results() {
			b.Logf("trial %s: %s, %d lines in result.json, %d failures, error %v", r.TrialID, r.Status, lines[r.TrialID], r.NumFailures, r.Error)
		}
		if diagnose != nil {
			diagnose()
		}
		b.Fatalf("%d of %d trials TERMINATED; result.json holds %d lines, want %d (%d per trial) when Fit returns", g.NumTerminated(), trials, sum, trials*per, per)
	}
	return lastWrite
}

// spans sets the end-to-end, emitted and written rates of total reports
// from the trainables' report times and the last write.
func (m *throughput) spans(rec *spans, total int, lastWrite time.Time) {
	emitFirst, emitLast, _ := rec.bounds()
	m.e2e = perSecond(total, m.fit)
	m.emitSpan, m.writeSpan = emitLast.Sub(emitFirst), lastWrite.Sub(emitFirst)
	m.emitted, m.written = perSecond(total, m.emitSpan), perSecond(total, m.writeSpan)
	m.writeLag = lastWrite.Sub(emitLast)
}

// headerBytes is the size of a header block on the wire.
func headerBytes(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}
