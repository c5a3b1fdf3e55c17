package tune_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tunejet/tunejet/tune"
)

// twoSteps reports two iterations from its checkpoint, a checkpoint with
// each; while failOdd is set, trials with an odd x fail right after their
// first iteration.
func twoSteps(failOdd *atomic.Bool) tune.Trainable {
	return func(ctx context.Context, config map[string]any) error {
		step := 0
		if dir, _ := tune.GetCheckpoint(ctx); dir != "" {
			b, err := os.ReadFile(filepath.Join(dir, "step"))
			if err != nil {
				return err
			}
			if err := json.Unmarshal(b, &step); err != nil {
				return err
			}
		}
		for i := 0; i < 2; i++ {
			step++
			dir, err := os.MkdirTemp("", "ckpt")
			if err != nil {
				return err
			}
			b, _ := json.Marshal(step)
			if err := os.WriteFile(filepath.Join(dir, "step"), b, 0o644); err != nil {
				return err
			}
			err = tune.Report(ctx, map[string]any{"step": step}, tune.WithCheckpoint(dir))
			os.RemoveAll(dir)
			if err != nil {
				return err
			}
			if int(config["x"].(float64))%2 == 1 && failOdd.Load() {
				return errors.New("odd trials fail on the first run")
			}
		}
		return nil
	}
}

func iterations(g *tune.ResultGrid) []float64 {
	var out []float64
	for _, r := range g.Results() {
		it, _ := r.Metrics["training_iteration"].(float64)
		out = append(out, it)
	}
	return out
}

// TestRestoreErroredTrialsAsRay reproduces Ray's restore tests: 4 trials,
// two fail after their first report.
func TestRestoreErroredTrialsAsRay(t *testing.T) {
	tests := []struct {
		name   string
		opts   []tune.Option
		iters  []float64
		errors int
	}{
		{"default keeps the errors", nil, []float64{2, 1, 2, 1}, 2},
		{"resume_errored", []tune.Option{tune.WithResumeErrored()}, []float64{2, 3, 2, 3}, 0},
		{"restart_errored", []tune.Option{tune.WithRestartErrored()}, []float64{2, 2, 2, 2}, 0},
		{"resume_errored wins over restart_errored", []tune.Option{tune.WithRestartErrored(), tune.WithResumeErrored()}, []float64{2, 3, 2, 3}, 0},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var failOdd atomic.Bool
			failOdd.Store(true)
			d := startDeployment(t, 4, map[string]tune.Trainable{"twoSteps": twoSteps(&failOdd)})
			rc := storage(t)
			name := fmt.Sprintf("restore%d", i)
			g := d.fit(t, "twoSteps", tune.WithName(name), tune.WithRunConfig(rc),
				tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(0, 1, 2, 3)}))
			if got := iterations(g); !reflect.DeepEqual(got, []float64{2, 1, 2, 1}) || g.NumErrors() != 2 {
				t.Fatalf("first run: iterations %v with %d errors, want [2 1 2 1] with 2", got, g.NumErrors())
			}
			failOdd.Store(false)
			path := filepath.Join(rc.StoragePath, name)
			tuner, err := tune.Restore(t.Context(), path, "twoSteps", append(tc.opts, d.nats())...)
			if err != nil {
				t.Fatal(err)
			}
			before, err := tuner.GetResults(t.Context())
			if err != nil || before.NumErrors() != 2 {
				t.Fatalf("results before Fit: %v errors (%v); want the stored 2", before, err)
			}
			g, err = tuner.Fit(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got := iterations(g); !reflect.DeepEqual(got, tc.iters) || g.NumErrors() != tc.errors {
				t.Fatalf("restored: iterations %v with %d errors, want %v with %d", got, g.NumErrors(), tc.iters, tc.errors)
			}
			states, _ := filepath.Glob(filepath.Join(path, "experiment_state-*.json"))
			if len(states) != 2 {
				t.Errorf("%d experiment_state files after one restore, want 2: %v", len(states), states)
			}
		})
	}
}

func TestRestoreValidation(t *testing.T) {
	var failOdd atomic.Bool
	d := startDeployment(t, 2, map[string]tune.Trainable{"twoSteps": twoSteps(&failOdd)})
	rc := storage(t)
	d.fit(t, "twoSteps", tune.WithName("valid"), tune.WithRunConfig(rc), tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(0, 2)}))
	path := filepath.Join(rc.StoragePath, "valid")
	_, err := tune.Restore(t.Context(), path, "other", d.nats())
	if err == nil || !strings.Contains(err.Error(), "pass in the same trainable") || !strings.Contains(err.Error(), "'other'") || !strings.Contains(err.Error(), "'twoSteps'") {
		t.Errorf("another trainable: got %v, want Ray's error naming both", err)
	}
	_, err = tune.Restore(t.Context(), path, "twoSteps", d.nats(), tune.WithParamSpace(tune.ParamSpace{"x": 1, "y": 2}))
	if err == nil || !strings.Contains(err.Error(), "Got:") || !strings.Contains(err.Error(), "Expected:") {
		t.Errorf("other param_space keys: got %v, want Got/Expected", err)
	}
	tuner, err := tune.Restore(t.Context(), filepath.Join(rc.StoragePath, "nothing_here"), "twoSteps", d.nats())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tuner.Fit(t.Context()); !errors.Is(err, tune.ErrCannotRestore) {
		t.Errorf("restore of nothing: got %v, want ErrCannotRestore (never a silent fresh start)", err)
	}
	ok, err := tune.CanRestore(t.Context(), path, d.nats())
	if err != nil || !ok.OK || ok.Source != "log" {
		t.Errorf("CanRestore of a finished experiment: %+v, %v; want OK from the log", ok, err)
	}
	no, err := tune.CanRestore(t.Context(), filepath.Join(rc.StoragePath, "nothing_here"), d.nats())
	if err != nil || no.OK || no.Reason == "" {
		t.Errorf("CanRestore of nothing: %+v, %v; want not OK with a reason", no, err)
	}
}
