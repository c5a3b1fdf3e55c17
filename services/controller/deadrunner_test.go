package controller_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/session"
	"github.com/tunejet/tunejet/services/runner"
)

// testRunner is a runner service on its own connection, named after it, so
// the test can close the connection as the process's death would.
type testRunner struct {
	name string
	nc   *nats.Conn
	stop func()
}

func startRunner(t *testing.T, srv *bustest.Server, name string, fn session.Func) *testRunner {
	t.Helper()
	nc, err := nats.Connect(srv.URL(), nats.Name(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b, err := bus.New(nc, "runner/"+name, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	svc := runner.New(b, runner.Config{Name: name, Slots: 1, WorkDir: t.TempDir(), Trainables: map[string]session.Func{"fn": fn}, StopGrace: time.Second})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = svc.Run(ctx) }()
	r := &testRunner{name: name, nc: nc, stop: func() { cancel(); wg.Wait() }}
	t.Cleanup(r.stop)
	return r
}

// probesAnswered is how many liveness requests the runner's connection has
// received so far, by the server's count.
func probesAnswered(t *testing.T, srv *bustest.Server, name string) uint64 {
	t.Helper()
	cz, err := srv.Server.Connz(&server.ConnzOptions{Subscriptions: true, SubscriptionsDetail: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cz.Conns {
		if c.Name != name {
			continue
		}
		for _, sd := range c.SubsDetail {
			if sd.Subject == bus.LivenessSubject(name) {
				return uint64(sd.Msgs)
			}
		}
	}
	return 0
}

func trialStarts(evs []*events.Event) []*events.TrialStarted {
	var out []*events.TrialStarted
	for _, ev := range evs {
		if p, ok := ev.Data.(*events.TrialStarted); ok {
			out = append(out, p)
		}
	}
	return out
}

// TestKilledRunnersTrialRestartsBeforeTheHeartbeatTimeout: the heartbeat
// timeout is 60 s, and the trial runs again on another runner well within
// the test's 15 s: the controller's liveness watch noticed the closed
// connection and handed the work on.
func TestKilledRunnersTrialRestartsBeforeTheHeartbeatTimeout(t *testing.T) {
	srv := bustest.Start(t)
	startController(t, srv, "controller-1")
	client := srv.Bus("client")
	sp := gridSpec("deadrunner", 1, 1, t.TempDir())
	sp.RunConfig.FailureConfig = events.FailureConfig{MaxFailures: 1, HeartbeatTimeoutS: 60}
	fn := func(ctx context.Context, _ map[string]any) error {
		s, err := session.From(ctx)
		if err != nil {
			return err
		}
		if _, err := s.Report(ctx, map[string]any{"loss": 1.0}, ""); err != nil || s.Info().Attempt > 1 {
			return err
		}
		<-ctx.Done() // attempt 1 runs until its runner is gone
		return context.Cause(ctx)
	}
	a := startRunner(t, srv, "rA", fn)
	submit(t, client, sp)
	bustest.Eventually(t, wait, "attempt 1 running on rA, listed with its work in the registry", func() bool {
		runners, ok, err := client.LiveRunners(t.Context())
		return err == nil && ok && len(runners) == 1 && len(runners[0].Trials) == 1 && runners[0].Trials[0].Ack != ""
	})
	// The controller has found rA present: it answered a liveness request
	// of a poll that ended before the next one asked again.
	bustest.Eventually(t, wait, "rA to answer two liveness requests", func() bool { return probesAnswered(t, srv, "rA") >= 2 })
	startRunner(t, srv, "rB", fn)

	a.nc.Close() // the server drops rA's subscriptions, as for a killed process
	completion(t, client, sp.Name)
	starts := trialStarts(bustest.Log(t, client, sp.Name))
	if len(starts) != 2 || starts[0].Runner != "rA" || starts[1].Runner != "rB" || starts[1].Attempt != 2 {
		t.Fatalf("trial.started %+v; want attempt 1 on rA, then attempt 2 on rB", starts)
	}
	cons, err := bustest.WorkConsumer(t.Context(), srv.JetStream(), sp.Name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.AckWait != time.Minute {
		t.Fatalf("work AckWait %v; the test relies on a heartbeat timeout it cannot wait for", info.Config.AckWait)
	}
}

// TestBusyRunnerIsNotDeclaredGone: a runner whose trainable keeps every CPU
// busy still answers liveness requests (the client library's goroutine
// does), so its trial runs to the end in its first attempt.
func TestBusyRunnerIsNotDeclaredGone(t *testing.T) {
	srv := bustest.Start(t)
	startController(t, srv, "controller-1")
	client := srv.Bus("client")
	sp := gridSpec("busyrunner", 1, 1, t.TempDir())
	sp.RunConfig.FailureConfig = events.FailureConfig{MaxFailures: 1, HeartbeatTimeoutS: 60}
	const probes = 8
	fn := func(ctx context.Context, _ map[string]any) error {
		s, err := session.From(ctx)
		if err != nil {
			return err
		}
		// Spin on every CPU until the runner has answered probes liveness
		// requests while spinning.
		from := probesAnswered(t, srv, "busy")
		var done atomic.Bool
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; !done.Load(); n++ {
					_ = n * n
				}
			}()
		}
		deadline := time.Now().Add(wait)
		for probesAnswered(t, srv, "busy") < from+probes && time.Now().Before(deadline) && ctx.Err() == nil {
			runtime.Gosched()
		}
		done.Store(true)
		wg.Wait()
		_, err = s.Report(ctx, map[string]any{"loss": 1.0}, "")
		return err
	}
	startRunner(t, srv, "busy", fn)
	submit(t, client, sp)
	completion(t, client, sp.Name)
	if n := probesAnswered(t, srv, "busy"); n < probes {
		t.Fatalf("the busy runner answered %d liveness requests; want at least %d", n, probes)
	}
	starts := trialStarts(bustest.Log(t, client, sp.Name))
	if len(starts) != 1 || starts[0].Attempt != 1 {
		t.Fatalf("trial.started %+v; want one attempt", starts)
	}
}
