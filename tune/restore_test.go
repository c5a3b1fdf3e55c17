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
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
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
			// Fit waits a bounded time for the syncer's final state; on a busy
			// machine the file may come after.
			bustest.Eventually(t, 2*time.Minute, "the restored run's experiment_state file", func() bool {
				states, _ := filepath.Glob(filepath.Join(path, "experiment_state-*.json"))
				return len(states) == 2
			})
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

// TestRestoreRefusalsMatchTheirErrors: a restore refused by tune, against
// the stored snapshot, or by the restorer, over NATS, fails with an error
// that errors.Is matches against ErrCannotRestore and the refusal's own
// error, and no other.
func TestRestoreRefusalsMatchTheirErrors(t *testing.T) {
	var failOdd atomic.Bool
	d := startDeployment(t, 2, map[string]tune.Trainable{"twoSteps": twoSteps(&failOdd)})
	rc := storage(t)
	space := tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(0, 2)})
	d.fit(t, "twoSteps", tune.WithName("stored"), tune.WithRunConfig(rc), space)
	d.fit(t, "twoSteps", tune.WithName("logged"), tune.WithRunConfig(rc), space)
	stored, logged := filepath.Join(rc.StoragePath, "stored"), filepath.Join(rc.StoragePath, "logged")
	// Without its state files only the restorer, reading the log, can refuse.
	files, _ := filepath.Glob(filepath.Join(logged, "experiment_state-*.json"))
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	restore := func(path string, trainable any, opts ...tune.Option) error {
		tuner, err := tune.Restore(t.Context(), path, trainable, append(opts, d.nats())...)
		if err != nil {
			return err
		}
		_, err = tuner.Fit(t.Context())
		return err
	}
	canRestore := func(path string) error {
		r, err := tune.CanRestore(t.Context(), path, d.nats())
		if err != nil {
			t.Fatalf("CanRestore(%s): %v", path, err)
		}
		if r.OK != (r.Err == nil) || (r.Err != nil && r.Err.Error() == "") {
			t.Errorf("CanRestore(%s): OK %v with error %v", path, r.OK, r.Err)
		}
		return r.Err
	}
	otherKeys := tune.WithParamSpace(tune.ParamSpace{"y": 1})
	unparsable := tune.WithParamSpace(tune.ParamSpace{"x": map[string]any{"uniform": []any{1.0}}})
	all := []error{tune.ErrBadRequest, tune.ErrNoState, tune.ErrTrainableDiffers, tune.ErrTrainableRequired,
		tune.ErrParamSpaceDiffers, tune.ErrStateInvalid, tune.ErrCheckpointLost}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"another trainable than the stored one", restore(stored, "other"), tune.ErrTrainableDiffers},
		{"another trainable than the log's", restore(logged, "other"), tune.ErrTrainableDiffers},
		{"other param space keys than the stored ones", restore(stored, "twoSteps", otherKeys), tune.ErrParamSpaceDiffers},
		{"other param space keys than the log's", restore(logged, "twoSteps", otherKeys), tune.ErrParamSpaceDiffers},
		{"a param space that does not parse, against the stored one", restore(stored, "twoSteps", unparsable), tune.ErrBadRequest},
		{"a param space that does not parse, against the log's", restore(logged, "twoSteps", unparsable), tune.ErrBadRequest},
		{"nothing to restore", restore(filepath.Join(rc.StoragePath, "nothing_here"), "twoSteps"), tune.ErrNoState},
		{"nothing to restore, asked whether it can be", canRestore(filepath.Join(rc.StoragePath, "nothing_here")), tune.ErrNoState},
		{"a path that is not an experiment's directory", canRestore(filepath.Join(rc.StoragePath, "not a name")), tune.ErrBadRequest},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) || !errors.Is(tt.err, tune.ErrCannotRestore) {
			t.Errorf("%s: %v; want it to match %v and ErrCannotRestore", tt.name, tt.err, tt.want)
		}
		for _, other := range all {
			if !errors.Is(other, tt.want) && errors.Is(tt.err, other) {
				t.Errorf("%s: %v matches %v too", tt.name, tt.err, other)
			}
		}
		var te *tune.TrainableError
		if isTrainable := errors.As(tt.err, &te); isTrainable != errors.Is(tt.want, tune.ErrTrainableDiffers) {
			t.Errorf("%s: %v is a *TrainableError: %v", tt.name, tt.err, isTrainable)
		}
	}
	for _, ev := range d.events(t, "logged") {
		if ev.Type() == events.TypeExperimentRestored {
			t.Errorf("a refused restore published %s", ev.Type())
		}
	}
}

// TestRestoreNeverRunsACommandFromAStateFile: the stored state of a
// finished experiment is rewritten as someone who can write the storage
// folder could (a command instead of the Go trainable, the trials back to
// RUNNING, the checksum recomputed) and restored with no event log. The Go
// trainable is refused as another than the file's; with no trainable the
// restore is refused, naming the file's; only WithTrustStoredTrainable
// runs it, after printing it.
func TestRestoreNeverRunsACommandFromAStateFile(t *testing.T) {
	var failOdd atomic.Bool
	fn := twoSteps(&failOdd)
	d := startStoppable(t, 2, map[string]tune.Trainable{"twoSteps": fn})
	rc := storage(t)
	d.fit(t, fn, tune.WithTrainableName("twoSteps"), tune.WithName("tampered"), tune.WithRunConfig(rc), tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(0, 2)}))
	d.stopServices() // the syncer has written its last state
	path := filepath.Join(rc.StoragePath, "tampered")
	states, _ := filepath.Glob(filepath.Join(path, "experiment_state-*.json"))
	if len(states) != 1 {
		t.Fatalf("experiment_state files %v, want 1", states)
	}
	marker := filepath.Join(t.TempDir(), "tampered")
	command := []string{"/bin/sh", "-c", "touch '" + marker + "'"}
	b, err := os.ReadFile(states[0])
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	st.Spec.Trainable.Command = command
	for _, tr := range st.Trials {
		tr.Status = events.StatusRunning
	}
	if b, err = st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(states[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	ran := func() bool { _, err := os.Stat(marker); return err == nil }

	fresh := startDeployment(t, 2, map[string]tune.Trainable{"twoSteps": fn}) // no log
	storagetest.OwnerGone(t, rc.StoragePath, "tampered")                      // nor the deployment that wrote it
	_, err = tune.Restore(t.Context(), path, fn, tune.WithTrainableName("twoSteps"), fresh.nats())
	var te *tune.TrainableError
	if !errors.Is(err, tune.ErrTrainableDiffers) || !errors.As(err, &te) || !reflect.DeepEqual(te.Stored.Command, command) ||
		!strings.Contains(err.Error(), "'twoSteps'") || !strings.Contains(err.Error(), marker) {
		t.Errorf("Restore with the Go trainable: %v; want ErrTrainableDiffers naming both", err)
	}

	tuner, err := tune.Restore(t.Context(), path, nil, fresh.nats())
	if err != nil {
		t.Fatal(err)
	}
	_, err = tuner.Fit(t.Context())
	if ran() {
		t.Fatal("Restore with no trainable ran the command of the state file")
	}
	if !errors.Is(err, tune.ErrTrainableRequired) || !errors.Is(err, tune.ErrCannotRestore) || !errors.As(err, &te) ||
		!reflect.DeepEqual(te.Stored.Command, command) || !strings.HasPrefix(te.Snapshot, "experiment_state-") {
		t.Errorf("Fit of a Restore with no trainable: %v (%+v); want ErrTrainableRequired naming the file's command", err, te)
	}
	if evs := fresh.events(t, "tampered"); len(evs) != 0 {
		t.Errorf("a refused restore published %d events", len(evs))
	}

	var out strings.Builder
	tuner, err = tune.Restore(t.Context(), path, nil, fresh.nats(), tune.WithTrustStoredTrainable(), tune.WithProgress(&out))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tuner.Fit(t.Context()); err != nil {
		t.Fatalf("Fit with WithTrustStoredTrainable: %v", err)
	}
	if !ran() || !strings.Contains(out.String(), marker) {
		t.Errorf("WithTrustStoredTrainable: ran %v, printed:\n%s\nwant the stored command printed and run", ran(), out.String())
	}
}

// TestNewTunerRefusesTheResumeOptions: the resume options are Restore's;
// given to NewTuner, which starts a new experiment, they would do nothing
// (and Results would read an empty path), so NewTuner refuses them.
func TestNewTunerRefusesTheResumeOptions(t *testing.T) {
	for name, opt := range map[string]tune.Option{
		"WithResumeUnfinished":     tune.WithResumeUnfinished(false),
		"WithResumeErrored":        tune.WithResumeErrored(),
		"WithRestartErrored":       tune.WithRestartErrored(),
		"WithResumeConfig":         tune.WithResumeConfig(tune.ResumeConfig{}),
		"WithNumSamples":           tune.WithNumSamples(5),
		"WithTrustStoredTrainable": tune.WithTrustStoredTrainable(),
	} {
		_, err := tune.NewTuner("fn", opt)
		if !errors.Is(err, tune.ErrInvalidConfig) || !strings.Contains(err.Error(), "tune.Restore") {
			t.Errorf("NewTuner with %s: %v; want ErrInvalidConfig pointing at tune.Restore", name, err)
		}
	}
}
