package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/dashboard"
	"github.com/tunejet/tunejet/tune"
	"github.com/tunejet/tunejet/tune/tunetest"
)

// stepped is an experiment whose trials report one result, then one more
// each time the test steps them, so that the test watches the curves grow
// at its own pace.
type stepped struct {
	name string
	// dash is the dashboard's test server; bus the dashboard's bus, for
	// another.
	dash *httptest.Server
	bus  *bus.Bus

	mu       sync.Mutex
	steps    map[string]chan struct{} // by the trial's x, closed by finish
	finished bool
	fit      chan error
}

// xs are the trials' configs: x is also each trial's first loss.
var xs = []float64{1, 2}

// startStepped starts a stack, a dashboard reading it, and an experiment
// of one trial per x in xs.
func startStepped(t *testing.T, token string) *stepped {
	t.Helper()
	return startSteppedWith(t, dashboard.Config{Token: token})
}

// startSteppedWith is startStepped with the dashboard's config.
func startSteppedWith(t *testing.T, cfg dashboard.Config) *stepped {
	t.Helper()
	e := &stepped{name: "stepped", steps: map[string]chan struct{}{}, fit: make(chan error, 1)}
	for _, x := range xs {
		e.steps[fmt.Sprint(x)] = make(chan struct{})
	}
	train := func(ctx context.Context, config map[string]any) error {
		x, _ := config["x"].(float64)
		step := e.step(fmt.Sprint(x))
		for i := 1; ; i++ {
			if err := tune.Report(ctx, map[string]any{"loss": x / float64(i)}); err != nil {
				return err
			}
			select {
			case _, ok := <-step:
				if !ok {
					return nil
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	opts := tunetest.Start(t, tunetest.Config{Trainables: map[string]tune.Trainable{"stepped": train}, Slots: len(xs)})
	e.bus = dashBus(t, opts.URL)
	cfg.Log = testLog(t)
	e.dash = serveDashboard(t, dashboard.New(dashCtx(t), e.bus, cfg))

	tuner, err := tune.NewTuner(train, tune.WithNATS(opts), tune.WithName(e.name), tune.WithTrainableName("stepped"),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(anys(xs)...)}),
		tune.WithTuneConfig(tune.TuneConfig{Metric: "loss", Mode: "min"}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	fitCtx, stopFit := context.WithCancel(context.Background())
	go func() { _, err := tuner.Fit(fitCtx); e.fit <- err }()
	t.Cleanup(func() {
		e.finish()
		if err := <-e.fit; err != nil && !errors.Is(err, tune.ErrInterrupted) {
			t.Errorf("fit: %v", err)
		}
		stopFit()
	})
	return e
}

func (e *stepped) step(x string) chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.steps[x]
}

// next lets the trial of x report once more.
func (e *stepped) next(t *testing.T, x float64) {
	t.Helper()
	select {
	case e.step(fmt.Sprint(x)) <- struct{}{}:
	case <-t.Context().Done():
		t.Fatal("the trial never took the step")
	}
}

// finish ends every trial, those that have not started yet too.
func (e *stepped) finish() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.finished {
		return
	}
	e.finished = true
	for _, ch := range e.steps {
		close(ch)
	}
}

// serveDashboard serves srv until the test ends; New's watches end then
// too.
func serveDashboard(t testing.TB, srv *dashboard.Server) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	return ts
}

// dashCtx is the context of a dashboard's watches: cancelled when the
// test ends, before the connections the test made earlier close.
func dashCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// dashBus is a bus on a new connection to url, for the dashboard.
func dashBus(t testing.TB, url string) *bus.Bus {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b, err := bus.New(nc, "tunejet/dashboard-test", testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testLog(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
}

func anys(fs []float64) []any {
	out := make([]any, len(fs))
	for i, f := range fs {
		out[i] = f
	}
	return out
}

// finishTrial ends the trial of x.
func (e *stepped) finishTrial(x float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ch, ok := e.steps[fmt.Sprint(x)]; ok {
		close(ch)
		delete(e.steps, fmt.Sprint(x))
	}
}
