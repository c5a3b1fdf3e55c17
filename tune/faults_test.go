package tune_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/tune"
)

// counting reports n iterations with a checkpoint each, resuming from its
// checkpoint; it fails (once per attempt number listed) right after
// reporting iteration failAt.
func counting(n, failAt int, failOn func(attempt int) bool) tune.Trainable {
	return func(ctx context.Context, config map[string]any) error {
		info, err := tune.GetTrialInfo(ctx)
		if err != nil {
			return err
		}
		step := 0
		if dir, _ := tune.GetCheckpoint(ctx); dir != "" {
			b, err := os.ReadFile(filepath.Join(dir, "state.json"))
			if err != nil {
				return err
			}
			if err := json.Unmarshal(b, &step); err != nil {
				return err
			}
		}
		for step < n {
			step++
			dir, err := os.MkdirTemp("", "ckpt")
			if err != nil {
				return err
			}
			b, _ := json.Marshal(step)
			if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o644); err != nil {
				return err
			}
			if err := tune.Report(ctx, map[string]any{"step": step}, tune.WithCheckpoint(dir)); err != nil {
				return err
			}
			os.RemoveAll(dir) // the trainable may delete it as soon as Report returns
			if step == failAt && failOn(info.Attempt) {
				return fmt.Errorf("simulated crash after step %d on attempt %d", step, info.Attempt)
			}
		}
		return nil
	}
}

func TestRetryResumesFromLatestCheckpoint(t *testing.T) {
	d := startDeployment(t, 2, map[string]tune.Trainable{"counting": counting(10, 5, func(a int) bool { return a == 1 })})
	rc := storage(t)
	rc.FailureConfig.MaxFailures = 1
	g := d.fit(t, "counting", tune.WithName("resume"), tune.WithRunConfig(rc), tune.WithParamSpace(tune.ParamSpace{"x": 1}))
	r := g.Get(0)
	if r.Status != events.StatusTerminated || r.Metrics["training_iteration"] != 10.0 || r.NumFailures != 1 {
		t.Fatalf("got %s at iteration %v with %d failures; want TERMINATED at 10 with 1 failure", r.Status, r.Metrics["training_iteration"], r.NumFailures)
	}
	var restoredFrom string
	var firstOfAttempt2 map[string]any
	var names []string
	for _, ev := range d.events(t, "resume") {
		switch p := ev.Data.(type) {
		case *events.TrialStarted:
			if p.Attempt == 2 {
				restoredFrom = p.RestoredFrom
			}
		case *events.TrialReported:
			if p.Attempt == 2 && firstOfAttempt2 == nil {
				firstOfAttempt2 = p.Results()[0]
			}
		case *events.TrialCheckpointed:
			names = append(names, p.Checkpoint.Name)
		}
	}
	if restoredFrom != "checkpoint_000004" {
		t.Errorf("attempt 2 restored from %q, want checkpoint_000004 (iteration 5)", restoredFrom)
	}
	if firstOfAttempt2["training_iteration"] != 6.0 || firstOfAttempt2["iterations_since_restore"] != 1.0 || firstOfAttempt2["step"] != 6.0 {
		t.Errorf("first result of attempt 2: %v; want training_iteration 6, iterations_since_restore 1, step 6", firstOfAttempt2)
	}
	for i, n := range names {
		if want := fmt.Sprintf("checkpoint_%06d", i); n != want {
			t.Fatalf("checkpoint %d is named %s, want %s (numbering continues across retries): %v", i, n, want, names)
		}
	}
	if len(names) != 10 {
		t.Errorf("got %d checkpoints, want 10: %v", len(names), names)
	}
}

// TestMaxFailuresAsRay reproduces Ray's should_recover table.
func TestMaxFailuresAsRay(t *testing.T) {
	tests := []struct {
		name        string
		maxFailures int
		failures    int // attempts that fail before success; -1 = always
		status      string
		numFailures int
	}{
		{"0 fails at the first failure", 0, -1, events.StatusError, 1},
		{"1 with a transient error", 1, 1, events.StatusTerminated, 1},
		{"2 with a persistent error", 2, -1, events.StatusError, 3},
		{"-1 retries until success", -1, 4, events.StatusTerminated, 4},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			flaky := func(ctx context.Context, config map[string]any) error {
				n := int(calls.Add(1))
				if err := tune.Report(ctx, map[string]any{"call": n}); err != nil {
					return err
				}
				if tc.failures < 0 || n <= tc.failures {
					return errors.New("boom")
				}
				return nil
			}
			d := startDeployment(t, 1, map[string]tune.Trainable{"flaky": flaky})
			rc := storage(t)
			rc.FailureConfig.MaxFailures = tc.maxFailures
			g := d.fit(t, "flaky", tune.WithName(fmt.Sprintf("maxfail%d", i)), tune.WithRunConfig(rc), tune.WithParamSpace(tune.ParamSpace{"x": 1}))
			r := g.Get(0)
			if r.Status != tc.status || r.NumFailures != tc.numFailures {
				t.Fatalf("got %s with %d failures, want %s with %d", r.Status, r.NumFailures, tc.status, tc.numFailures)
			}
			if tc.status == events.StatusError {
				b, err := os.ReadFile(filepath.Join(r.Path, "error.txt"))
				if err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprintf("Failure # %d (occurred at", tc.numFailures); !strings.Contains(string(b), want) {
					t.Fatalf("error.txt lacks %q:\n%s", want, b)
				}
			}
		})
	}
}

// oneFails errs at once for x == 0 and runs long for every other x.
func oneFails(ctx context.Context, config map[string]any) error {
	if config["x"] == 0.0 {
		return errors.New("out of cheese")
	}
	for {
		if err := tune.Report(ctx, map[string]any{"alive": 1}); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond): // simulated training work
		}
	}
}

func TestFailFastStopsEveryOtherTrial(t *testing.T) {
	d := startDeployment(t, 4, map[string]tune.Trainable{"oneFails": oneFails})
	rc := storage(t)
	rc.FailureConfig.FailFast = tune.FailFastOn
	g := d.fit(t, "oneFails", tune.WithName("failfast"), tune.WithRunConfig(rc),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(0, 1, 2)}))
	if g.NumErrors() != 1 || g.NumTerminated() != 2 {
		t.Fatalf("got %d ERROR and %d TERMINATED, want exactly 1 and 2", g.NumErrors(), g.NumTerminated())
	}
}

func TestFailFastRaiseReturnsTheTrainableError(t *testing.T) {
	d := startDeployment(t, 4, map[string]tune.Trainable{"oneFails": oneFails})
	rc := storage(t)
	rc.FailureConfig.FailFast = tune.FailFastRaise
	tuner, err := tune.NewTuner("oneFails", d.nats(), tune.WithName("raise"), tune.WithRunConfig(rc),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(0, 1)}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tuner.Fit(t.Context())
	var te *tune.TrialError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "out of cheese") {
		t.Fatalf("Fit: got %v, want a *tune.TrialError carrying the trainable's error", err)
	}
}

func TestFailFastWithRetriesIsRefusedAsRay(t *testing.T) {
	rc := storage(t)
	rc.FailureConfig.FailFast = tune.FailFastOn
	rc.FailureConfig.MaxFailures = 2
	tuner, err := tune.NewTuner("x", tune.WithRunConfig(rc))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tuner.Fit(t.Context())
	if !errors.Is(err, tune.ErrInvalidConfig) || !strings.Contains(err.Error(), "max_failures must be 0 if fail_fast=") {
		t.Fatalf("Fit: got %v, want Ray's error", err)
	}
}

// TestTimeTotalGoesOnAcrossRetries: time_total_s is the trial's, as in
// Ray: a retry resumed from a checkpoint goes on from the time total
// saved with it, and time_since_restore is the attempt's own.
func TestTimeTotalGoesOnAcrossRetries(t *testing.T) {
	inner := counting(8, 4, func(a int) bool { return a == 1 })
	slowFirst := func(ctx context.Context, config map[string]any) error {
		info, err := tune.GetTrialInfo(ctx)
		if err != nil {
			return err
		}
		if info.Attempt == 1 {
			time.Sleep(time.Second) // the first attempt's work before its first report
		}
		return inner(ctx, config)
	}
	d := startDeployment(t, 1, map[string]tune.Trainable{"slow": slowFirst})
	rc := storage(t)
	rc.FailureConfig.MaxFailures = 1
	d.fit(t, "slow", tune.WithName("time_total"), tune.WithRunConfig(rc), tune.WithParamSpace(tune.ParamSpace{"x": 1}))
	byIteration := map[float64]map[string]any{}
	for _, ev := range d.events(t, "time_total") {
		if p, ok := ev.Data.(*events.TrialReported); ok {
			for _, r := range p.Results() {
				byIteration[r["training_iteration"].(float64)] = r
			}
		}
	}
	before, after := byIteration[4], byIteration[5] // attempt 1's checkpointed last, attempt 2's first
	if before == nil || after == nil {
		t.Fatalf("results of iterations 4 and 5 missing: %v", byIteration)
	}
	total4, total5 := before["time_total_s"].(float64), after["time_total_s"].(float64)
	since5 := after["time_since_restore"].(float64)
	if total5 < total4 {
		t.Errorf("time_total_s went from %v (iteration 4) back to %v (iteration 5, the retry); want it to go on", total4, total5)
	}
	if since5 >= total5 {
		t.Errorf("iteration 5: time_since_restore %v, time_total_s %v; want the attempt's time below the trial's", since5, total5)
	}
}
