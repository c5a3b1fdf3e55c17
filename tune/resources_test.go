package tune_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tunejet/tunejet/tune"
)

// TestTrialResources: trials ask for the GPUs their config names
// (tune.FromConfig), and each sees what it holds through
// tune.GetResources on an embedded runner with two fake GPUs.
func TestTrialResources(t *testing.T) {
	var mu sync.Mutex
	seen := map[float64][]tune.TrialResources{}
	fn := func(ctx context.Context, config map[string]any) error {
		r, err := tune.GetResources(ctx)
		if err != nil {
			return err
		}
		mu.Lock()
		seen[config["gpus"].(float64)] = append(seen[config["gpus"].(float64)], r)
		mu.Unlock()
		return tune.Report(ctx, map[string]any{"loss": 1.0})
	}
	tuner, err := tune.NewTuner(tune.Trainable(fn), tune.WithName("res"), tune.WithRunConfig(storage(t)),
		tune.WithStoreDir(t.TempDir()),
		tune.WithParamSpace(tune.ParamSpace{"gpus": tune.GridSearch(2.0, 1.0, 0.5, 0.0)}),
		tune.WithResources(map[string]tune.ResourceAmount{"cpu": tune.Amount(0.5), "gpu": tune.FromConfig("gpus")}),
		tune.WithRunnerCapacity(tune.RunnerCapacity{CPUs: 2, GPUIDs: []string{"7", "9"}}))
	if err != nil {
		t.Fatal(err)
	}
	g, err := tuner.Fit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if g.NumTerminated() != 4 {
		t.Fatalf("%d of %d trials terminated", g.NumTerminated(), g.Len())
	}
	mu.Lock()
	defer mu.Unlock()
	for gpus, want := range map[float64]int{2: 2, 1: 1, 0.5: 1, 0: 0} {
		rs := seen[gpus]
		if len(rs) != 1 {
			t.Fatalf("gpus=%v ran %d times", gpus, len(rs))
		}
		r := rs[0]
		if len(r.GPUIDs) != want || r.Amounts["cpu"] != 0.5 || r.Amounts["gpu"] != gpus {
			t.Errorf("gpus=%v: got %+v; want %d device(s), cpu 0.5", gpus, r, want)
		}
		for _, id := range r.GPUIDs {
			if !slices.Contains([]string{"7", "9"}, id) {
				t.Errorf("gpus=%v: device %q is not one of the runner's", gpus, id)
			}
		}
	}
	if _, err := tune.NewTuner(tune.Trainable(fn), tune.WithResources(map[string]tune.ResourceAmount{"gpu": tune.Amount(1.5)})); err == nil ||
		!strings.Contains(err.Error(), "whole number") {
		t.Fatalf("a fractional GPU above 1: %v", err)
	}
	if _, err := tune.GetResources(context.Background()); err == nil {
		t.Fatal("GetResources outside a trial did not fail")
	}
}
