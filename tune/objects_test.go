package tune_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tunejet/tunejet/tune"
)

// TestObjectReferences: a param_space value from tune.Put reaches trials
// through tune.Get; on restore a re-specified reference reaches both the
// resumed trials and those not generated yet.
func TestObjectReferences(t *testing.T) {
	var block atomic.Bool
	block.Store(true)
	started := make(chan struct{}, 16)
	reader := func(ctx context.Context, config map[string]any) error {
		data, err := tune.Get(ctx, config["data"])
		if err != nil {
			return err
		}
		if err := tune.Report(ctx, map[string]any{"data": string(data)}); err != nil {
			return err
		}
		if block.Load() {
			started <- struct{}{}
			<-ctx.Done() // held until the test interrupts the run
			return ctx.Err()
		}
		return nil
	}
	v1, err := tune.Put(t.Context(), "dataset_v1", []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	store, rc := t.TempDir(), storage(t)
	ctx, cancel := context.WithCancel(t.Context())
	tuner, err := tune.NewTuner(reader, tune.WithName("refs"), tune.WithRunConfig(rc), tune.WithStoreDir(store),
		tune.WithParamSpace(tune.ParamSpace{"data": v1, "x": tune.GridSearch(1, 2, 3)}),
		tune.WithTuneConfig(tune.TuneConfig{MaxConcurrentTrials: 1}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := tuner.Fit(ctx); done <- err }()
	<-started
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Fit of an interrupted experiment returned no error")
	}
	block.Store(false)
	v2, err := tune.Put(t.Context(), "dataset_v2", []byte("second"))
	if err != nil {
		t.Fatal(err)
	}
	restored, err := tune.Restore(t.Context(), filepath.Join(rc.StoragePath, "refs"), reader, tune.WithStoreDir(store),
		tune.WithParamSpace(tune.ParamSpace{"data": v2, "x": tune.GridSearch(1, 2, 3)}))
	if err != nil {
		t.Fatal(err)
	}
	g, err := restored.Fit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if g.Len() != 3 || g.NumTerminated() != 3 {
		t.Fatalf("%d trials, %d terminated; want 3 and 3", g.Len(), g.NumTerminated())
	}
	for _, r := range g.Results() {
		if r.Metrics["data"] != "second" {
			t.Errorf("trial %s read %v, want the re-specified object", r.TrialID, r.Metrics["data"])
		}
	}
}

// TestMissingObjectSaysWhatToDo: a reference whose object is gone fails
// the trial with an error that says to re-specify param_space.
func TestMissingObjectSaysWhatToDo(t *testing.T) {
	var fail atomic.Bool
	d := startDeployment(t, 1, map[string]tune.Trainable{"get": func(ctx context.Context, config map[string]any) error {
		_, err := tune.Get(ctx, map[string]any{"object_ref": "never_put"})
		fail.Store(err != nil)
		return err
	}})
	g := d.fit(t, "get", tune.WithName("gone"), tune.WithRunConfig(storage(t)), tune.WithParamSpace(tune.ParamSpace{"x": 1}))
	if !fail.Load() || g.NumErrors() != 1 || !strings.Contains(fmt.Sprint(g.Errors()), "re-specify param_space") {
		t.Fatalf("errors %v; want the trial ERROR saying to re-specify param_space", g.Errors())
	}
}
