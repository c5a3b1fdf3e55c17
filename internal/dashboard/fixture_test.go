package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tunejet/tunejet/tune"
	"github.com/tunejet/tunejet/tune/tunetest"
)

// finished is an experiment that ran to its end on a stack of its own:
// eight trials (x in 1..4, opt sgd or adam) that report loss = x·f(opt)/i
// with a checkpoint at each iteration until a maximum_iteration stopper
// stops them at 3; the trial of x=3, adam fails at its second report on
// both of its attempts (ERROR), the trial of x=4, adam on its first
// attempt only (a retry from its checkpoint finishes it).
type finished struct {
	name    string
	nats    tune.NATSOptions
	expPath string // the experiment directory in storage
	results *tune.ResultGrid
}

var (
	finishedXs   = []any{1.0, 2.0, 3.0, 4.0}
	finishedOpts = []any{"sgd", "adam"}
)

const divergedMsg = "diverged: loss is NaN"

func runFinished(t *testing.T) *finished {
	t.Helper()
	return runFinishedRoute(t, "")
}

// runFinishedRoute is runFinished with the checkpoints' route: "" (auto:
// the runner writes them to storage), or events.RouteObjectStore (staged,
// then persisted by the syncer).
func runFinishedRoute(t *testing.T, route string) *finished {
	t.Helper()
	var (
		mu       sync.Mutex
		attempts = map[string]int{}
	)
	train := func(ctx context.Context, config map[string]any) error {
		x, _ := config["x"].(float64)
		opt, _ := config["opt"].(string)
		f := 1.0
		if opt == "adam" {
			f = 0.5
		}
		key := fmt.Sprint(x, opt)
		mu.Lock()
		attempts[key]++
		attempt := attempts[key]
		mu.Unlock()
		for i := 1; ; i++ {
			if opt == "adam" && i == 2 && (x == 3 || (x == 4 && attempt == 1)) {
				return errors.New(divergedMsg)
			}
			dir, err := os.MkdirTemp("", "ckpt")
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, "weights"), fmt.Appendf(nil, "x=%v opt=%s i=%d", x, opt, i), 0o644); err != nil {
				return err
			}
			err = tune.Report(ctx, map[string]any{"loss": x * f / float64(i)}, tune.WithCheckpoint(dir))
			if errors.Is(err, tune.ErrStopped) {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	opts := tunetest.Start(t, tunetest.Config{Trainables: map[string]tune.Trainable{"grid": train}, Slots: 2})
	e := &finished{name: "finished", nats: opts}
	tuner, err := tune.NewTuner(train, tune.WithNATS(opts), tune.WithName(e.name), tune.WithTrainableName("grid"),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(finishedXs...), "opt": tune.GridSearch(finishedOpts...)}),
		tune.WithTuneConfig(tune.TuneConfig{Metric: "loss", Mode: "min"}),
		tune.WithRunConfig(tune.RunConfig{
			StoragePath:      t.TempDir(),
			Stoppers:         []any{map[string]any{"type": "maximum_iteration", "max_iter": 3}},
			FailureConfig:    tune.FailureConfig{MaxFailures: 1},
			CheckpointConfig: tune.CheckpointConfig{Route: route},
		}))
	if err != nil {
		t.Fatal(err)
	}
	if e.results, err = tuner.Fit(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.expPath = e.results.ExperimentPath
	// What tunejet results reads.
	if e.results, err = tune.LoadResults(t.Context(), e.expPath); err != nil {
		t.Fatal(err)
	}
	if e.results.Len() != len(finishedXs)*len(finishedOpts) || e.results.NumErrors() != 1 {
		t.Fatalf("the fixture ran %d trials, %d errors; want %d and 1", e.results.Len(), e.results.NumErrors(), len(finishedXs)*len(finishedOpts))
	}
	return e
}

// result is the trial of x and opt.
func (e *finished) result(t *testing.T, x float64, opt string) *tune.Result {
	t.Helper()
	for _, r := range e.results.Results() {
		if r.Config["x"] == x && r.Config["opt"] == opt {
			return &r
		}
	}
	t.Fatalf("no trial of x=%v opt=%s", x, opt)
	return nil
}
