package tune_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tunejet/tunejet/tune"
)

// A whole experiment on the embedded stack: a grid over x, the best trial
// by the last reported loss.
func ExampleNewTuner() {
	tmp, _ := os.MkdirTemp("", "tunejet-example")
	defer os.RemoveAll(tmp)
	train := func(ctx context.Context, config map[string]any) error {
		x := config["x"].(float64)
		for step := 1; step <= 3; step++ {
			if err := tune.Report(ctx, map[string]any{"loss": (x - 2) * (x - 2) / float64(step)}); err != nil {
				return err
			}
		}
		return nil
	}
	tuner, err := tune.NewTuner(train,
		tune.WithName("example"),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1, 2, 3, 4)}),
		tune.WithTuneConfig(tune.TuneConfig{Metric: "loss", Mode: "min"}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: filepath.Join(tmp, "results")}),
		tune.WithStoreDir(filepath.Join(tmp, "jetstream")),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	results, err := tuner.Fit(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	best, _ := results.GetBestResult("", "", "last")
	fmt.Println("trials:", results.Len(), "terminated:", results.NumTerminated())
	fmt.Println("best x:", best.Config["x"], "loss:", best.Metrics["loss"], "iterations:", best.Metrics["training_iteration"])
	// Output:
	// trials: 4 terminated: 4
	// best x: 2 loss: 0 iterations: 3
}

// Domains build a param space as Ray's tune.grid_search, tune.uniform, ...
// do; they are plain values, the same as in an experiment file.
func ExampleGridSearch() {
	space := tune.ParamSpace{
		"lr":     tune.LogUniform(1e-4, 1e-1),
		"layers": tune.GridSearch(2, 4),
		"act":    tune.Choice("relu", "tanh"),
	}
	fmt.Println(space["layers"], space["act"])
	// Output: map[grid_search:[2 4]] map[choice:[relu tanh]]
}

// Report's error says when the trial should stop: return it.
func ExampleReport() {
	train := func(ctx context.Context, config map[string]any) error {
		for i := 0; ; i++ {
			if err := tune.Report(ctx, map[string]any{"i": i}); err != nil {
				return err // tune.ErrStopped: a stop criterion was met
			}
		}
	}
	_ = train
	err := tune.Report(context.Background(), map[string]any{"i": 0})
	fmt.Println(err)
	// Output: no trial session in context: call this from a trainable run by tunejet
}
