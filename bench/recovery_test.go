package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/tune"
)

// recoveryScript is the trainable of BenchmarkFailureRecovery: it reports
// a step with a small checkpoint every 200 ms, resuming from its latest
// checkpoint, until $MARK_DIR/stop exists. It records its pid per attempt
// so the benchmark can reap the orphan a killed runner leaves behind.
const recoveryScript = `set -eu
echo $$ > "$MARK_DIR/pid-$TUNEJET_ATTEMPT"
step=0
if [ -n "${TUNEJET_CHECKPOINT_DIR:-}" ]; then step=$(cat "$TUNEJET_CHECKPOINT_DIR/step"); fi
while [ ! -e "$MARK_DIR/stop" ]; do
	step=$((step + 1))
	dir=$(mktemp -d)
	echo "$step" > "$dir/step"
	"$TUNEJET_BIN" report --checkpoint "$dir" step=$step >/dev/null
	rm -rf "$dir"
	sleep 0.2
done
`

// BenchmarkFailureRecovery measures how long a trial takes to run again
// after its runner process dies or freezes: from the signal to the
// trial.started of its next attempt on another runner process, with the
// default heartbeat timeout (3 s). Everything runs as real processes
// (`tunejet controller|syncer|runner --nats URL`) against a nats-server in
// the benchmark process; one trial (max_failures -1) loses its runner
// TUNEJET_BENCH_KILLS times (20), each time on whichever runner holds it,
// while a spare runner waits for work.
//
//   - kill: SIGKILL of the runner process. Its connection closes at once;
//     the controller's liveness watcher notices and naks the work. Target
//     median < 1 s (Ray Tune needs ~20-55 s to notice a lost node).
//   - stop: SIGSTOP of the runner process (a frozen host: the connection
//     stays up, nothing answers). Only the heartbeat timeout notices.
//     Target < heartbeat timeout + 1 s. The frozen process is killed once
//     the trial runs elsewhere, which must not disturb the new attempt.
func BenchmarkFailureRecovery(b *testing.B) {
	kills := envInt(b, "TUNEJET_BENCH_KILLS", 20, 1)
	for _, v := range []struct {
		name string
		sig  syscall.Signal
	}{{"kill", syscall.SIGKILL}, {"stop", syscall.SIGSTOP}} {
		b.Run(v.name, func(b *testing.B) {
			var r recovery
			for i := 0; i < b.N; i++ {
				r = failureRecovery(b, kills, v.sig)
			}
			r.report(b, v.sig)
		})
	}
}

func (r recovery) report(b *testing.B, sig syscall.Signal) {
	total := newDistribution(r.total)
	detect := newDistribution(r.detect)
	start := newDistribution(r.start)
	total.report(b)
	b.ReportMetric(detect.median().Seconds(), "redeliver_median_s")
	b.ReportMetric(start.median().Seconds()*1000, "start_median_ms")
	b.Logf("heartbeat timeout (work consumer AckWait) %v; runners heartbeat every third of it", r.ackWait)
	b.Logf("%s of the runner → the trial's next trial.started on another runner, over %d signals: %s; distribution %s",
		sigName(sig), len(r.total), total, total.histogram(250*time.Millisecond))
	b.Logf("  of which %s → JetStream delivers the work again (a nak from the liveness watcher, which it announces to idle runners, or the heartbeat timeout, which an idle runner finds at its next one-second poll): %s", sigName(sig), detect)
	b.Logf("  and redelivery → trial.started (the new runner fetches the work, checks it, replays the trial's checkpoints, publishes): %s", start)
	b.Logf("the controller's liveness watch nakked the work of %d killed runners, and of %d others (never right)", r.naks, r.wrongNaks)
	b.Logf("each signal landed %v–%v after the attempt started (random, so the heartbeat phase varies)", r.minUp.Round(time.Millisecond), r.maxUp.Round(time.Millisecond))
}

// livenessNaks counts the controller's log lines that say it nakked a gone
// runner's trial: those of runners killed while running the trial, and the
// others.
func livenessNaks(b *testing.B, controller *proc, killed map[string]bool) (ok, wrong int) {
	b.Helper()
	data, err := os.ReadFile(controller.logPath)
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		var l struct {
			Message string `json:"message"`
			Runner  string `json:"runner"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || !strings.HasPrefix(l.Message, "runner gone") || !strings.Contains(l.Message, "handing") {
			continue
		}
		if killed[l.Runner] {
			ok++
		} else {
			wrong++
			b.Logf("controller: %s", line)
		}
	}
	return ok, wrong
}

func sigName(sig syscall.Signal) string {
	if sig == syscall.SIGSTOP {
		return "SIGSTOP"
	}
	return "SIGKILL"
}

type recovery struct {
	ackWait              time.Duration
	total, detect, start []time.Duration
	minUp, maxUp         time.Duration
	// naks counts the controller's liveness naks: of killed runners'
	// current work (the fast path), and of anything else (never right).
	naks, wrongNaks int
}

// startedAt is a trial.started event, when the benchmark received it, and
// how many requests for work it had seen before.
type startedAt struct {
	p    *events.TrialStarted
	at   time.Time
	asks int64
}

// workRequestSubject is where runners' pull requests for an experiment's
// work go (JetStream's API subject for the next messages of a consumer).
func workRequestSubject(exp string) string {
	return "$JS.API.CONSUMER.MSG.NEXT." + bus.StreamName + "." + bus.WorkConsumerName(exp)
}

func failureRecovery(b *testing.B, kills int, sig syscall.Signal) recovery {
	b.Helper()
	const exp = "recovery"
	bin := buildTunejet(b)
	emb := startServer(b)
	defer emb.Shutdown()
	url := emb.URL()
	marks := b.TempDir()
	script := filepath.Join(b.TempDir(), "steps.sh")
	if err := os.WriteFile(script, []byte(recoveryScript), 0o644); err != nil {
		b.Fatal(err)
	}
	env := cleanEnv("TUNEJET_BIN="+bin, "MARK_DIR="+marks, "TUNEJET_LOG_FORMAT=json", "TUNEJET_LOG_LEVEL=info")
	services := []*proc{
		startProc(b, bin, env, "controller", "controller", "--nats", url),
		startProc(b, bin, env, "syncer", "syncer", "--nats", url),
	}
	runners := map[string]*proc{}
	nextRunner := 0
	startRunner := func() string {
		nextRunner++
		name := fmt.Sprintf("r%02d", nextRunner)
		runners[name] = startProc(b, bin, env, name, "runner", "--nats", url, "--slots", "1", "--name", name, "--work-dir", b.TempDir())
		return name
	}
	startRunner()
	startRunner()
	defer func() {
		for _, p := range runners {
			p.kill()
		}
		for _, p := range services {
			p.kill()
		}
	}()
	dump := func() {
		for _, p := range append(services, runnersOf(runners)...) {
			b.Logf("--- %s (exited %v) ---\n%s", p.name, p.exited(), p.tail(15))
		}
	}

	nc, err := nats.Connect(url, nats.Name("bench-recovery"))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	bs, err := bus.New(nc, "bench/recovery", logger(b))
	if err != nil {
		b.Fatal(err)
	}
	if err := bs.Provision(context.Background()); err != nil {
		b.Fatal(err)
	}
	// The spare runner asks for work with no-wait pull requests (once per
	// idle poll, and whenever the experiment's work changes) and leaves
	// none pending, so the work consumer's NumWaiting is 0 nearly always:
	// what shows a spare runner ready is its request itself. The requests
	// and trial.started come on one channel, in the order the server sent
	// them: a runner's request that got its work precedes its
	// trial.started, so a request after a trial.started is a spare's (the
	// runner holding the trial, with its one slot taken, asks for none).
	msgs := make(chan *nats.Msg, 1024)
	var asks atomic.Int64 // requests for work seen
	starts := make(chan startedAt, 64)
	asksSub, err := nc.ChanSubscribe(workRequestSubject(exp), msgs)
	if err != nil {
		b.Fatal(err)
	}
	defer asksSub.Unsubscribe()
	sub, err := nc.ChanSubscribe(events.TypeSubjects(exp, events.WriterRunner, events.TypeTrialStarted), msgs)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	readDone := make(chan struct{})
	defer close(readDone)
	go func() {
		for {
			var m *nats.Msg
			select {
			case m = <-msgs:
			case <-readDone:
				return
			}
			at := time.Now()
			if m.Sub == asksSub {
				asks.Add(1)
				continue
			}
			ev, err := events.Decode(m.Subject, m.Header, m.Data)
			if p, ok := eventData[*events.TrialStarted](ev, err); ok {
				select {
				case starts <- startedAt{p: p, at: at, asks: asks.Load()}:
				default: // more than the benchmark waits for
				}
			}
		}
	}()

	tuner, err := tune.NewTuner(tune.Command{"/bin/sh", script},
		tune.WithName(exp),
		tune.WithParamSpace(tune.ParamSpace{"x": 1}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: b.TempDir(), FailureConfig: tune.FailureConfig{MaxFailures: -1}}),
		tune.WithNATS(tune.NATSOptions{URL: url, Name: "bench-client"}))
	if err != nil {
		b.Fatal(err)
	}
	fitCtx, cancelFit := context.WithTimeout(context.Background(), time.Duration(kills)*time.Minute+2*time.Minute)
	defer cancelFit()
	type fitResult struct {
		g   *tune.ResultGrid
		err error
	}
	fitDone := make(chan fitResult, 1)
	go func() {
		g, err := tuner.Fit(fitCtx)
		fitDone <- fitResult{g, err}
	}()

	waitStart := func(after int, within time.Duration) startedAt {
		t := time.NewTimer(within)
		defer t.Stop()
		for {
			select {
			case s := <-starts:
				if s.p.Attempt > after {
					return s
				}
			case r := <-fitDone:
				dump()
				b.Fatalf("Fit returned while waiting for attempt %d: %v", after+1, r.err)
			case <-t.C:
				dump()
				b.Fatalf("no trial.started after attempt %d within %v", after, within)
			}
		}
	}
	cur := waitStart(0, time.Minute)
	ctx := context.Background()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	cons, err := bustest.WorkConsumer(ctx, js, exp)
	if err != nil {
		b.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	r := recovery{ackWait: info.Config.AckWait, minUp: time.Hour}
	killedRunners := map[string]bool{} // SIGKILLed while running the trial
	for k := 0; k < kills; k++ {
		// Kill at a random point of the heartbeat cycle, once the attempt
		// has been running for a while (1–2 s; 0.2–0.4 s in a smoke run).
		first := time.Second
		if smoke() {
			first = 200 * time.Millisecond
		}
		up := first + rand.N(first)
		time.Sleep(time.Until(cur.at.Add(up)))
		r.minUp, r.maxUp = min(r.minUp, up), max(r.maxUp, up)
		// A spare runner must be asking for work: a pull request since
		// the attempt started (a spare started after the last kill may
		// still be starting under load).
		if !waitUntil(ctx, 30*time.Second, func() bool { return asks.Load() > cur.asks }) {
			dump()
			b.Fatalf("kill %d: no spare runner asked for work in the 30 s after attempt %d started", k+1, cur.p.Attempt)
		}
		before, err := cons.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		victim := runners[cur.p.Runner]
		if victim == nil {
			b.Fatalf("kill %d: attempt %d runs on %q, which this benchmark did not start", k+1, cur.p.Attempt, cur.p.Runner)
		}
		killed := time.Now()
		if sig == syscall.SIGKILL {
			victim.kill()
		} else if err := victim.cmd.Process.Signal(sig); err != nil {
			b.Fatalf("kill %d: %v", k+1, err)
		}
		delete(runners, cur.p.Runner)
		if sig == syscall.SIGKILL {
			killedRunners[victim.name] = true
		}
		next := waitStart(cur.p.Attempt, time.Minute)
		if next.p.Runner == victim.name {
			b.Fatalf("kill %d: attempt %d started on the signalled runner %s", k+1, next.p.Attempt, victim.name)
		}
		victim.kill() // a frozen runner goes now; its death must not disturb the new attempt
		r.total = append(r.total, next.at.Sub(killed))
		// The work consumer's last delivery is the redelivery of the killed
		// attempt's work (the only work there is), by the server's clock.
		if after, err := cons.Info(ctx); err == nil && after.Delivered.Consumer > before.Delivered.Consumer && after.Delivered.Last != nil {
			at := *after.Delivered.Last
			r.detect = append(r.detect, at.Sub(killed))
			r.start = append(r.start, next.at.Sub(at))
		}
		reapTrainable(marks, cur.p.Attempt)
		startRunner()
		cur = next
	}
	if err := os.WriteFile(filepath.Join(marks, "stop"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	select {
	case res := <-fitDone:
		if res.err != nil {
			dump()
			b.Fatalf("Fit: %v", res.err)
		}
		if res.g.Len() != 1 || res.g.NumTerminated() != 1 {
			b.Fatalf("%d trials, %d TERMINATED; want 1, 1", res.g.Len(), res.g.NumTerminated())
		}
		if got := res.g.Get(0); got.NumFailures != kills {
			b.Errorf("the trial counts %d failures, want one per kill (%d)", got.NumFailures, kills)
		}
	case <-time.After(2 * time.Minute):
		dump()
		b.Fatal("Fit did not return within 2 minutes of the stop")
	}
	reapTrainable(marks, kills+1)
	r.naks, r.wrongNaks = livenessNaks(b, services[0], killedRunners)
	if r.wrongNaks > 0 {
		b.Errorf("the controller nakked the work of %d runners it should have left alone (live, or frozen with their work redelivered)", r.wrongNaks)
	}
	return r
}

// reapTrainable kills what is left of an attempt's trainable (a killed
// runner's child outlives it until its next report fails).
func reapTrainable(marks string, attempt int) {
	data, err := os.ReadFile(filepath.Join(marks, "pid-"+strconv.Itoa(attempt)))
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 1 {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // its process group
	}
}

func runnersOf(m map[string]*proc) []*proc {
	out := make([]*proc, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	return out
}

// eventData returns the typed payload of a decoded event.
func eventData[T events.Payload](ev *events.Event, err error) (T, bool) {
	var zero T
	if err != nil || ev == nil {
		return zero, false
	}
	p, ok := ev.Data.(T)
	return p, ok
}
