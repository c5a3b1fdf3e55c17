package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/tune"
)

// takeoverScript is the trainable of BenchmarkControllerTakeover: a short
// trial that reports once, so that the controller has a decision to make
// (create and schedule the next trial) every few hundred milliseconds.
const takeoverScript = `set -eu
sleep 0.2
"$TUNEJET_BIN" report score=1 >/dev/null
`

// takeoverSlots is the runner's slots and the experiment's
// max_concurrent_trials: every completed trial frees a place the
// controller fills with a new one.
const takeoverSlots = 4

// BenchmarkControllerTakeover measures how long an experiment goes without
// a controller when the active one dies: from SIGKILL of the controller
// process holding the experiment's lease (KV bucket tunejet_leases) to the
// first controller event the standby stores in the log. Everything runs as
// real processes built from ./cmd/tunejet (two `tunejet controller`, a
// syncer and a runner of 4 slots, all with --replicas 3) against a 3-node
// JetStream cluster in the benchmark process; the experiment samples short
// trials without end (num_samples -1, 4 at a time), so there is always a
// decision to make. Each of TUNEJET_BENCH_TAKEOVERS (10) rounds waits
// until the standby has caught up with the log, kills the lease holder at
// a random point of its renewal cycle, times the takeover, and starts a
// new controller as the next standby. Target: under 5 s.
func BenchmarkControllerTakeover(b *testing.B) {
	rounds := envInt(b, "TUNEJET_BENCH_TAKEOVERS", 10, 1)
	var r takeovers
	for i := 0; i < b.N; i++ {
		r = controllerTakeover(b, rounds)
	}
	total := newDistribution(r.total)
	acquire := newDistribution(r.acquire)
	decide := newDistribution(r.decide)
	age := newDistribution(r.age)
	total.report(b)
	b.ReportMetric(acquire.median().Seconds(), "lease_median_s")
	b.ReportMetric(decide.median().Seconds()*1000, "decide_median_ms")
	b.ReportMetric(newDistribution(r.expiryLag).median().Seconds(), "expiry_lag_median_s")
	b.ReportMetric(newDistribution(r.retry).median().Seconds(), "retry_median_s")
	b.Logf("lease TTL %v (internal/bus/lease.go LeaseTTL); the holder renews and a standby retries every %v (controller reconciler.lead); controller tick %v",
		bus.LeaseTTL, bus.LeaseTTL/3, 200*time.Millisecond)
	b.Logf("SIGKILL of the lease holder → the standby's first stored controller event, over %d takeovers: %s (target < 5s); distribution %s",
		len(r.total), total, total.histogram(250*time.Millisecond))
	b.Logf("  of which SIGKILL → the standby holds the lease (the key expires LeaseTTL after its last renewal, then the standby's next try): %s", acquire)
	b.Logf("  and lease → first decision stored: %s", decide)
	b.Logf("  the lease's age at the kill (time since its last renewal): %s", age)
	b.Logf("  when it should expire (LeaseTTL after the last renewal) → a read finds it gone: %s", newDistribution(r.expiryLag))
	b.Logf("  found gone → the standby holds it (the standby retries every %v): %s", bus.LeaseTTL/3, newDistribution(r.retry))
	b.Logf("load average: %s", loadAvg())
}

type takeovers struct {
	total, acquire, decide, age []time.Duration
	// expiryLag is from when the lease should expire (LeaseTTL after the
	// last renewal) to when a read finds it gone; retry from then to the
	// standby holding it (the standby's retry period).
	expiryLag, retry []time.Duration
}

// storedEvent is a controller event as the log stored it.
type storedEvent struct {
	source, typ string
	stored      time.Time
}

func controllerTakeover(b *testing.B, rounds int) takeovers {
	b.Helper()
	const exp = "takeover"
	bin := buildTunejet(b)
	c := bustest.StartCluster(b, clusterNodes)
	defer c.Shutdown()
	url := c.URL()
	replicas := strconv.Itoa(c.Replicas())
	script := filepath.Join(b.TempDir(), "trial.sh")
	if err := os.WriteFile(script, []byte(takeoverScript), 0o644); err != nil {
		b.Fatal(err)
	}
	env := cleanEnv("TUNEJET_BIN="+bin, "TUNEJET_LOG_FORMAT=json", "TUNEJET_LOG_LEVEL=info")
	// The streams and buckets exist, replicated, before the services start,
	// so that they find them as they are and change nothing.
	bs := c.Bus("bench-takeover")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := bs.ProvisionBuckets(ctx); err != nil {
		b.Fatal(err)
	}
	js := c.JetStream() // the log and the leases, read raw
	s, err := js.Stream(ctx, bus.StreamName)
	if err != nil {
		b.Fatal(err)
	}
	all := []*proc{
		startProc(b, bin, env, "syncer", "syncer", "--nats", url, "--replicas", replicas),
		startProc(b, bin, env, "runner", "runner", "--nats", url, "--replicas", replicas, "--slots", strconv.Itoa(takeoverSlots), "--name", "r1", "--work-dir", b.TempDir()),
	}
	controllers := map[string]*proc{} // by source
	nextCtl := 0
	startController := func() string {
		nextCtl++
		p := startProc(b, bin, env, fmt.Sprintf("controller-%02d", nextCtl), "controller", "--nats", url, "--replicas", replicas)
		all = append(all, p)
		host, _ := os.Hostname()
		src := fmt.Sprintf("tunejet/controller/%s-%d", host, p.cmd.Process.Pid)
		controllers[src] = p
		return src
	}
	defer func() {
		for _, p := range all {
			p.kill()
		}
	}()
	dump := func() {
		for _, p := range all {
			b.Logf("--- %s (exited %v) ---\n%s", p.name, p.exited(), p.tail(15))
		}
	}
	fail := func(format string, args ...any) {
		b.Helper()
		dump()
		b.Fatalf(format, args...)
	}
	startController()
	// Fit starts once every service watches the log: their provisioning
	// is over.
	if !waitWatching(ctx, s, 2*time.Minute, serviceFilters()...) {
		fail("the services do not watch the log after 2 minutes")
	}

	tuner, err := tune.NewTuner(tune.Command{"/bin/sh", script},
		tune.WithName(exp),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.Uniform(0, 1)}),
		tune.WithTuneConfig(tune.TuneConfig{NumSamples: -1, MaxConcurrentTrials: takeoverSlots}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: b.TempDir()}),
		tune.WithNATS(tune.NATSOptions{URL: url, Name: "bench-client"}))
	if err != nil {
		b.Fatal(err)
	}
	fitCtx, cancelFit := context.WithCancel(ctx)
	fitDone := make(chan error, 1)
	go func() {
		_, err := tuner.Fit(fitCtx)
		fitDone <- err
	}()
	defer func() {
		cancelFit()
		<-fitDone //nolint:errcheck // Fit ends with the cancellation; only its end is waited for
	}()

	// Every controller event the log stores, with the server's timestamp.
	stored := make(chan storedEvent, 4096)
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.WriterSubjects(exp, events.WriterController)},
	})
	if err != nil {
		b.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		ev, err := events.Decode(m.Subject(), m.Headers(), m.Data())
		md, merr := m.Metadata()
		if err != nil || merr != nil {
			return
		}
		select {
		case stored <- storedEvent{source: ev.Source, typ: ev.Type(), stored: md.Timestamp}:
		default:
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()

	// Every write of the lease, with the server's timestamp.
	kv, err := js.KeyValue(ctx, bus.LeaseBucket)
	if err != nil {
		b.Fatal(err)
	}
	leases := make(chan jetstream.KeyValueEntry, 4096)
	w, err := kv.Watch(ctx, exp, jetstream.UpdatesOnly())
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			select {
			case leases <- e:
			default:
			}
		}
	}()

	// The experiment is running once a controller has written events.
	if !waitUntil(ctx, 2*time.Minute, func() bool { return len(stored) > 0 }) {
		fail("no controller event within 2 minutes of Fit")
	}
	// Fit's client provisions too; it must leave the log replicated.
	checkReplicas(b, s, c.Replicas())

	// The standby starts once the experiment runs, as the next ones do
	// after each kill.
	watchers := consumerNames(ctx, b, s)
	standby := startController()

	var r takeovers
	drainLeases := func() {
		for len(leases) > 0 {
			<-leases
		}
	}
	for k := 0; k < rounds; k++ {
		if !waitCaughtUp(ctx, s, exp, watchers, 2*time.Minute) {
			fail("takeover %d: the standby controller did not catch up with the log within 2 minutes", k+1)
		}
		if controllers[standby].exited() {
			fail("takeover %d: the standby controller exited", k+1)
		}
		// Kill at a random point of the holder's 1 s renewal cycle (any
		// point in a smoke run).
		if !smoke() {
			time.Sleep(rand.N(time.Second))
		}
		e, err := kv.Get(ctx, exp)
		if err != nil {
			fail("takeover %d: read the lease: %v", k+1, err)
		}
		holder := string(e.Value())
		victim := controllers[holder]
		if victim == nil || holder == standby {
			fail("takeover %d: the lease is held by %q, not by the active controller this benchmark started", k+1, holder)
		}
		drainLeases()
		for len(stored) > 0 {
			<-stored
		}
		killed := time.Now()
		victim.kill()
		delete(controllers, holder)
		age := killed.Sub(e.Created()) // the holder's last renewal, read just before
		r.age = append(r.age, age)
		// When the lease is gone: read it every 5 ms until it is not the
		// victim's any more.
		gone := make(chan time.Time, 1)
		pctx, stopPoll := context.WithCancel(ctx)
		go func() {
			defer close(gone)
			for pctx.Err() == nil {
				e, err := kv.Get(pctx, exp)
				if errors.Is(err, jetstream.ErrKeyNotFound) || (err == nil && string(e.Value()) != holder) {
					gone <- time.Now()
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()

		var acquired time.Time
		deadline := time.NewTimer(time.Minute)
	wait:
		for {
			select {
			case e := <-leases:
				if string(e.Value()) == standby && acquired.IsZero() {
					acquired = e.Created()
				}
			case ev := <-stored:
				if ev.stored.Before(killed) {
					continue
				}
				if ev.source == holder {
					continue // published just before the kill, stored just after
				}
				if ev.source != standby {
					fail("takeover %d: %s stored a %s after the kill; want the standby %s", k+1, ev.source, ev.typ, standby)
				}
				r.total = append(r.total, ev.stored.Sub(killed))
				if acquired.IsZero() { // the lease write may still be in flight to the watcher
					e, err := kv.Get(ctx, exp)
					if err != nil || string(e.Value()) != standby {
						fail("takeover %d: the standby decided without holding the lease (%v)", k+1, err)
					}
					acquired = e.Created()
				}
				r.acquire = append(r.acquire, acquired.Sub(killed))
				stopPoll()
				if at, ok := <-gone; ok {
					r.expiryLag = append(r.expiryLag, at.Sub(e.Created().Add(bus.LeaseTTL)))
					r.retry = append(r.retry, acquired.Sub(at))
				}
				r.decide = append(r.decide, ev.stored.Sub(acquired))
				b.Logf("takeover %d: %v (the lease was renewed %v before the kill; the standby held it %v after the kill, and stored a %s %v later)",
					k+1, ev.stored.Sub(killed).Round(time.Millisecond), age.Round(time.Millisecond),
					acquired.Sub(killed).Round(time.Millisecond), ev.typ, ev.stored.Sub(acquired).Round(time.Millisecond))
				break wait
			case err := <-fitDone:
				fitDone <- err
				fail("takeover %d: Fit returned: %v", k+1, err)
			case <-deadline.C:
				fail("takeover %d: no controller event within a minute of the kill", k+1)
			}
		}
		deadline.Stop()
		watchers = consumerNames(ctx, b, s)
		standby = startController()
	}
	checkDecisions(b, c, exp)
	return r
}

// consumerNames are the names of the log's consumers.
func consumerNames(ctx context.Context, b *testing.B, s jetstream.Stream) map[string]bool {
	b.Helper()
	names := map[string]bool{}
	l := s.ConsumerNames(ctx)
	for name := range l.Name() {
		names[name] = true
	}
	if err := l.Err(); err != nil {
		b.Fatalf("list the log's consumers: %v", err)
	}
	return names
}

// waitWatching waits until, for every filter, a consumer of the log
// filters on it.
func waitWatching(ctx context.Context, s jetstream.Stream, within time.Duration, filters ...string) bool {
	return waitUntil(ctx, within, func() bool {
		have := map[string]bool{}
		for info := range s.ListConsumers(ctx).Info() {
			have[info.Config.FilterSubject] = true
			for _, f := range info.Config.FilterSubjects {
				have[f] = true
			}
		}
		for _, f := range filters {
			if !have[f] {
				return false
			}
		}
		return true
	})
}

// waitCaughtUp waits until a consumer that was not among before watches
// the whole experiment (the new standby controller's fold of the log) and
// has at most a few events left to deliver.
func waitCaughtUp(ctx context.Context, s jetstream.Stream, exp string, before map[string]bool, within time.Duration) bool {
	filter := events.ExperimentSubjects(exp)
	return waitUntil(ctx, within, func() bool {
		for name := range s.ConsumerNames(ctx).Name() {
			if before[name] {
				continue
			}
			c, err := s.Consumer(ctx, name)
			if err != nil {
				continue
			}
			info := c.CachedInfo()
			fs := info.Config.FilterSubjects
			if info.Config.FilterSubject != "" {
				fs = append(fs, info.Config.FilterSubject)
			}
			if len(fs) == 1 && fs[0] == filter && info.NumPending < 50 {
				return true
			}
		}
		return false
	})
}

// checkDecisions reads the experiment's log and fails the benchmark if any
// trial was created twice: two controllers deciding at once.
func checkDecisions(b *testing.B, c *bustest.Cluster, exp string) {
	b.Helper()
	d := &deployment{b: b, url: c.URL(), replicas: c.Replicas()}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	defer d.close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	created := map[string]int{}
	sources := map[string]bool{}
	n := 0
	for _, ev := range d.events(ctx, exp) {
		if ev.Writer != events.WriterController {
			continue
		}
		n++
		sources[ev.Source] = true
		if p, ok := ev.Data.(*events.TrialCreated); ok {
			created[p.TrialID]++
		}
	}
	var dup []string
	for id, k := range created {
		if k > 1 {
			dup = append(dup, fmt.Sprintf("%s ×%d", id, k))
		}
	}
	b.Logf("the log holds %d controller events from %d controllers; %d trials created", n, len(sources), len(created))
	if len(dup) > 0 {
		b.Fatalf("trials created more than once: %s", strings.Join(dup, ", "))
	}
}
