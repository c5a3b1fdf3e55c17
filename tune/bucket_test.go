package tune_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tunejet/tunejet/internal/storage/storagetest"
	"github.com/tunejet/tunejet/tune"
)

// TestFitRefusesABucketItCannotWrite: Fit on the embedded stack with a
// bucket that does not exist fails with tune.ErrNoSuchBucket, in one line
// naming the storage path, and runs no trial.
func TestFitRefusesABucketItCannotWrite(t *testing.T) {
	u := storagetest.S3WithoutBucket(t)
	var ran atomic.Bool
	tuner, err := tune.NewTuner(func(context.Context, map[string]any) error { ran.Store(true); return nil },
		tune.WithTrainableName("fn"), tune.WithName("nobucket"), tune.WithStoreDir(t.TempDir()),
		tune.WithRunConfig(tune.RunConfig{StoragePath: u}), tune.WithParamSpace(tune.ParamSpace{"x": 1}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tuner.Fit(t.Context())
	if !errors.Is(err, tune.ErrNoSuchBucket) {
		t.Fatalf("Fit = %v, want tune.ErrNoSuchBucket", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "storage_path "+u+": no such bucket (") {
		t.Errorf("Fit's error is not one line naming the storage path and why: %q", msg)
	}
	if ran.Load() {
		t.Error("a trial ran")
	}
}
