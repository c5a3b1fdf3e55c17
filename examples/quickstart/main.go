// Command quickstart tunes a toy objective with tunejet on the embedded
// stack: no NATS server or anything else to install.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/tunejet/tunejet/tune"
)

// train minimizes a noisy bowl: loss falls with each step at a speed set
// by lr, towards a floor set by how far x is from 3.
func train(ctx context.Context, config map[string]any) error {
	lr := config["lr"].(float64)
	x := config["x"].(float64)
	loss := 10.0
	for step := 1; step <= 10; step++ {
		loss = loss*(1-lr) + 0.1*(x-3)*(x-3)*lr
		if err := tune.Report(ctx, map[string]any{"loss": loss, "step": step}); err != nil {
			return err
		}
		select {
		case <-time.After(50 * time.Millisecond): // pretend to work
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	tmp := filepath.Join(os.TempDir(), "tunejet-quickstart")
	tuner, err := tune.NewTuner(train,
		tune.WithParamSpace(tune.ParamSpace{
			"lr": tune.LogUniform(0.01, 0.5),
			"x":  tune.GridSearch(1.0, 2.0, 3.0, 4.0),
		}),
		tune.WithTuneConfig(tune.TuneConfig{NumSamples: 3, Metric: "loss", Mode: "min", MaxConcurrentTrials: 4}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: filepath.Join(tmp, "results")}),
		tune.WithStoreDir(filepath.Join(tmp, "jetstream")),
		tune.WithProgress(os.Stdout),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	results, err := tuner.Fit(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Print(tune.Summary(results))
}
