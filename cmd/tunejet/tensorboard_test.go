package main_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/internal/tboard/tboardtest"
)

// A run writes a TensorBoard event file in each trial folder, as Ray's
// default loggers do, so that `tensorboard --logdir <storage>/<name>`
// shows every trial: its result's loss as ray/tune/loss at step 1, then
// its x as an hparam. TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1 (exactly "1",
// as Ray's _create_default_callbacks reads it: ray-project/ray
// python/ray/tune/utils/callback.py at 082f9e719644f64cd26f24d8b20d0ffdccdaa2e1)
// turns it off where the experiment is run; result.json is written all
// the same.
func TestTensorBoard(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, env string
		want      bool
	}{
		{"default", "", true},
		{"0", "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=0", true},
		{"off", "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := writeFile(t, t.TempDir(), "exp.yaml", quickExperiment)
			storagePath := t.TempDir()
			var extra []string
			if tc.env != "" {
				extra = append(extra, tc.env)
			}
			r := tunejet(t, "", embeddedEnv(t, extra...), "run", file, "--store-dir", t.TempDir(), "--storage-path", storagePath)
			if r.code != 0 {
				t.Fatalf("tunejet run:\n%s", r)
			}
			trials, err := filepath.Glob(filepath.Join(storagePath, "quick", "quick_*"))
			if err != nil || len(trials) != 2 {
				t.Fatalf("trial folders %v (%v), want 2", trials, err)
			}
			for _, dir := range trials {
				if _, err := os.Stat(filepath.Join(dir, "result.json")); err != nil {
					t.Errorf("%s: %v", dir, err)
				}
				files := tboardtest.Files(t, dir)
				if !tc.want {
					if len(files) != 0 {
						t.Errorf("%s: event files %v with TensorBoard turned off", dir, files)
					}
					continue
				}
				if len(files) != 1 {
					t.Fatalf("%s: event files %v, want one", dir, files)
				}
				evs := tboardtest.ReadFile(t, files[0])
				if len(evs) != 5 {
					t.Fatalf("%s: %d events, want the start, one result and 3 hparams: %+v", dir, len(evs), evs)
				}
				if evs[1].Step != 1 || evs[1].Scalars()["ray/tune/loss"] != 1 {
					t.Errorf("%s: result event %+v, want ray/tune/loss 1 at step 1", dir, evs[1])
				}
				if x := evs[3].Values[0].HParams["x"]; x != 1.0 && x != 2.0 {
					t.Errorf("%s: hparams %+v, want x of the grid", dir, evs[3].Values)
				}
				if !cmp.Equal(evs[2].Values[0].Metrics, tagsOf(evs[1].Scalars())) {
					t.Errorf("%s: hparams metrics %v, want the result's scalars %v", dir, evs[2].Values[0].Metrics, tagsOf(evs[1].Scalars()))
				}
			}
		})
	}
}

func tagsOf(m map[string]float32) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
