package tune_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/tune"
)

// report reports config["x"] once.
func reportX(ctx context.Context, config map[string]any) error {
	return tune.Report(ctx, map[string]any{"x": config["x"]})
}

// xsOf lists the x each trial of g reported, sorted.
func xsOf(g *tune.ResultGrid) []float64 {
	var xs []float64
	for _, r := range g.Results() {
		x, _ := r.Metrics["x"].(float64)
		xs = append(xs, x)
	}
	slices.Sort(xs)
	return xs
}

// A second run of an experiment name that has state is refused, unless
// WithNewRun: then it starts anew in the same folder, as Ray's
// Tuner.fit() with an existing experiment folder (TuneController with no
// resume_config starts a new experiment; python/ray/tune/execution/
// tune_controller.py, ray-project/ray at
// bde9c15a44ce3b309504e2bce936c9e3ae4b18ed), at once: within the log's
// dedupe window of the first run's events.
func TestNewRunOfAnExperimentThatHasState(t *testing.T) {
	store, rc := t.TempDir(), storage(t)
	fit := func(first float64, opts ...tune.Option) (*tune.ResultGrid, error) {
		tuner, err := tune.NewTuner(tune.Trainable(reportX), append([]tune.Option{
			tune.WithName("again"), tune.WithRunConfig(rc), tune.WithStoreDir(store),
			tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(first, first+1)}),
		}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), fitDeadline)
		defer cancel()
		return tuner.Fit(ctx)
	}
	g1, err := fit(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fit(10); !errors.Is(err, tune.ErrExists) {
		t.Fatalf("a second run without WithNewRun: %v; want ErrExists", err)
	}
	g2, err := fit(10, tune.WithNewRun())
	if err != nil {
		t.Fatalf("WithNewRun: %v", err)
	}
	if got := xsOf(g2); !slices.Equal(got, []float64{10, 11}) {
		t.Errorf("the new run's results hold x %v; want [10 11]", got)
	}
	for _, r := range append(g1.Results(), g2.Results()...) {
		if filepath.Dir(r.Path) != filepath.Join(rc.StoragePath, "again") {
			t.Errorf("trial folder %s is not in the experiment's folder", r.Path)
		}
	}
	loaded, err := tune.LoadResults(t.Context(), filepath.Join(rc.StoragePath, "again"))
	if err != nil {
		t.Fatal(err)
	}
	if got := xsOf(loaded); !slices.Equal(got, []float64{10, 11}) {
		t.Errorf("storage's results hold x %v; want the new run's [10 11]", got)
	}
}

// WithNewRun still refuses a run of that name that is live: its
// controller holds the lease.
func TestNewRunRefusedWhileARunIsLive(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	block := func(ctx context.Context, config map[string]any) error {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return tune.Report(ctx, map[string]any{"x": 1.0})
	}
	d := startDeployment(t, 1, map[string]tune.Trainable{"block": block, "x": reportX})
	rc := storage(t)
	first, err := tune.NewTuner("block", tune.WithName("live"), tune.WithRunConfig(rc), d.nats())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := first.Fit(t.Context()); done <- err }()
	<-started
	second, err := tune.NewTuner("x", tune.WithName("live"), tune.WithRunConfig(rc), d.nats(), tune.WithNewRun(),
		tune.WithParamSpace(tune.ParamSpace{"x": 2.0}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = second.Fit(t.Context())
	close(release)
	if !errors.Is(err, tune.ErrExists) || !strings.Contains(err.Error(), "is live") {
		t.Errorf("a new run while one is live: %v; want ErrExists saying it is live", err)
	}
	if err := <-done; err != nil {
		t.Errorf("the live run: %v", err)
	}
}

// WithNewRun also starts over an interrupted run (Ctrl-C of an embedded
// run): that run is not live once its process has ended.
func TestNewRunAfterAnInterruptedRun(t *testing.T) {
	store, rc := t.TempDir(), storage(t)
	started := make(chan struct{})
	block := func(ctx context.Context, config map[string]any) error {
		if err := tune.Report(ctx, map[string]any{"x": 0.0}); err != nil {
			return err
		}
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}
	first, err := tune.NewTuner(tune.Trainable(block), tune.WithName("cut"), tune.WithRunConfig(rc), tune.WithStoreDir(store))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := first.Fit(ctx); done <- err }()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, tune.ErrInterrupted) {
		t.Fatalf("the first run: %v; want ErrInterrupted", err)
	}
	second, err := tune.NewTuner(tune.Trainable(reportX), tune.WithName("cut"), tune.WithRunConfig(rc), tune.WithStoreDir(store),
		tune.WithNewRun(), tune.WithParamSpace(tune.ParamSpace{"x": 5.0}))
	if err != nil {
		t.Fatal(err)
	}
	fctx, fcancel := context.WithTimeout(t.Context(), fitDeadline)
	defer fcancel()
	g, err := second.Fit(fctx)
	if err != nil {
		t.Fatalf("WithNewRun after an interrupted run: %v", err)
	}
	if got := xsOf(g); !slices.Equal(got, []float64{5}) {
		t.Errorf("the new run's results hold x %v; want [5]", got)
	}
	loaded, err := tune.LoadResults(t.Context(), filepath.Join(rc.StoragePath, "cut"))
	if err != nil {
		t.Fatal(err)
	}
	if got := xsOf(loaded); !slices.Equal(got, []float64{5}) || loaded.NumTerminated() != 1 {
		t.Errorf("storage's results hold x %v, %d terminated; want the new run's [5], 1", got, loaded.NumTerminated())
	}
}
