package tune_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/session"
	"github.com/tunejet/tunejet/services/controller"
	"github.com/tunejet/tunejet/services/restorer"
	"github.com/tunejet/tunejet/services/runner"
	"github.com/tunejet/tunejet/services/syncer"
	"github.com/tunejet/tunejet/tune"
)

// deployment is a real nats-server with the controller, a runner and the
// syncer running against it, as separate services would.
type deployment struct {
	srv *bustest.Server
	bus *bus.Bus
}

func startDeployment(t testing.TB, slots int, fns map[string]tune.Trainable) *deployment {
	t.Helper()
	srv := bustest.Start(t)
	d := &deployment{srv: srv, bus: srv.Bus("test")}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	reg := map[string]session.Func{}
	for k, v := range fns {
		reg[k] = v
	}
	run := func(f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("service: %v", err)
			}
		}()
	}
	run(controller.New(srv.Bus("controller"), controller.Config{}).Run)
	run(runner.New(srv.Bus("runner"), runner.Config{Slots: slots, Trainables: reg, WorkDir: t.TempDir()}).Run)
	run(syncer.New(srv.Bus("syncer"), syncer.Config{}).Run)
	run(restorer.New(srv.Bus("restorer"), restorer.Config{}).Run)
	t.Cleanup(func() { cancel(); wg.Wait() })
	return d
}

func (d *deployment) nats() tune.Option { return tune.WithNATS(tune.NATSOptions{URL: d.srv.URL()}) }

// events returns every event of an experiment, in log order.
func (d *deployment) events(t testing.TB, exp string) []*events.Event {
	t.Helper()
	return bustest.Log(t, d.bus, exp)
}

// fit runs an experiment on the deployment and fails the test on error.
func (d *deployment) fit(t testing.TB, trainable any, opts ...tune.Option) *tune.ResultGrid {
	t.Helper()
	tuner, err := tune.NewTuner(trainable, append(opts, d.nats())...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), fitDeadline)
	defer cancel()
	g, err := tuner.Fit(ctx)
	if err != nil {
		if ctx.Err() != nil {
			if s, serr := tuner.Spec(); serr == nil {
				d.dumpLog(t, s.Name)
			}
		}
		t.Fatalf("Fit: %v", err)
	}
	return g
}

// fitDeadline bounds an experiment of these tests, which all end in
// seconds, so that one that never ends fails with its log instead of
// hanging the package until go test's timeout.
const fitDeadline = 3 * time.Minute

// dumpLog logs every event of an experiment, for a test that failed.
func (d *deployment) dumpLog(t testing.TB, exp string) {
	t.Helper()
	for _, ev := range bustest.Log(t, d.bus, exp) {
		b, _ := json.Marshal(ev.Data)
		t.Logf("log: %s %s", ev.Type(), b)
	}
}
