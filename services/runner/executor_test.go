package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/session"
)

// The executor conformance suite: every driver runs the same trainable
// behaviours, picked by config["behave"] (conformanceTrainable in Go,
// testdata/trainable.py as a command), and must show the same results.

// waitLimit bounds every wait in these tests; only a broken executor
// reaches it.
const waitLimit = time.Minute

// testGrace is the stop grace the drivers get.
const testGrace = 200 * time.Millisecond

func TestFuncExecutor(t *testing.T) {
	testExecutor(t, func(t *testing.T) Executor {
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		return &funcExecutor{Func: conformanceTrainable(release), Grace: testGrace, Log: testLog(t)}
	})
}

func TestCommandExecutor(t *testing.T) {
	testExecutor(t, func(t *testing.T) Executor { return pythonExecutor(t, testGrace) })
}

// TestWarmCommandExecutor: the command forked from a warm worker of it
// (one per test, as a run's) passes the suite as a cold start does.
func TestWarmCommandExecutor(t *testing.T) {
	testExecutor(t, func(t *testing.T) Executor {
		e := pythonExecutor(t, testGrace)
		s := &Service{cfg: Config{WorkDir: t.TempDir(), WorkerIdle: time.Minute}}
		e.Warm = newWarmSet(s, "exp")
		t.Cleanup(func() {
			if len(e.Warm.infos()) != 1 {
				t.Errorf("warm workers %+v, want the one the test's attempt forked from", e.Warm.infos())
			}
			e.Warm.close()
		})
		return e
	})
}

// TestAForkThatEndsAtOnceIsSeenToEnd: a forked attempt that exits before
// the runner has taken in its pid (the worker's report of its end read
// first) still ends Execute with its exit status.
func TestAForkThatEndsAtOnceIsSeenToEnd(t *testing.T) {
	e := pythonExecutor(t, testGrace)
	s := &Service{cfg: Config{WorkDir: t.TempDir(), WorkerIdle: time.Minute}}
	s.hooks.forked = func(w *warmWorker, pid int) {
		bustest.Eventually(t, waitLimit, "the worker's report of the fork's end to be read", func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			_, running := w.procs[pid]
			return !running
		})
	}
	e.Warm = newWarmSet(s, "exp")
	t.Cleanup(e.Warm.close)
	r := newRecorder(t, "crash")
	if err := r.run(t, e); err == nil || !strings.Contains(err.Error(), "exited with status 3") {
		t.Fatalf("Execute = %v, want the trainable's exit status 3", err)
	}
}

// testExecutor runs the conformance suite against the driver newExecutor
// returns.
func testExecutor(t *testing.T, newExecutor func(t *testing.T) Executor) {
	t.Run("report", func(t *testing.T) {
		r := newRecorder(t, "report")
		if err := r.run(t, newExecutor(t)); err != nil {
			t.Fatalf("Execute: %v", err)
		}
		if diff := cmp.Diff([]float64{1, 2, 3}, r.steps()); diff != "" {
			t.Errorf("steps reported (-want +got):\n%s", diff)
		}
		for _, rep := range r.all() {
			if x, _ := toFloat(rep.metrics["x"]); x != 0.5 {
				t.Errorf("report %v: x = %v, want the config's 0.5", rep.metrics, rep.metrics["x"])
			}
		}
	})
	t.Run("trial info", func(t *testing.T) {
		r := newRecorder(t, "info")
		r.info.Attempt = 3
		if err := r.run(t, newExecutor(t)); err != nil {
			t.Fatalf("Execute: %v", err)
		}
		var got []string
		for _, rep := range r.all() {
			m := rep.metrics
			got = append(got, fmt.Sprintf("%v %v %v %v %v", m["experiment"], m["trial_id"], m["trial_name"], m["trial_dir"], m["attempt"]))
		}
		want := []string{fmt.Sprintf("exp t1 train_t1 %s 3", r.info.TrialDir)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the trial as the trainable sees it (-want +got):\n%s", diff)
		}
	})
	t.Run("checkpoint", func(t *testing.T) {
		r := newRecorder(t, "checkpoint")
		if err := r.run(t, newExecutor(t)); err != nil {
			t.Fatalf("Execute: %v", err)
		}
		var got []map[string]string
		for _, rep := range r.all() {
			got = append(got, rep.files)
		}
		want := []map[string]string{{"state": "1"}, {"state": "2"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("checkpoints as Report saw them (-want +got):\n%s", diff)
		}
	})
	t.Run("resume from a checkpoint", func(t *testing.T) {
		r := newRecorder(t, "resume")
		r.checkpoint = t.TempDir()
		if err := os.WriteFile(filepath.Join(r.checkpoint, "state"), []byte("5"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := r.run(t, newExecutor(t)); err != nil {
			t.Fatalf("Execute: %v", err)
		}
		if diff := cmp.Diff([]float64{6}, r.steps()); diff != "" {
			t.Errorf("steps reported after resuming from step 5 (-want +got):\n%s", diff)
		}
	})
	t.Run("stop answered to a report", func(t *testing.T) {
		r := newRecorder(t, "loop")
		r.stopAt = 3
		_ = r.run(t, newExecutor(t)) // a command may end by its exit or by the SIGTERM
		if diff := cmp.Diff([]float64{1, 2, 3}, r.steps()); diff != "" {
			t.Errorf("steps reported (-want +got):\n%s", diff)
		}
	})
	t.Run("stop requested while running", func(t *testing.T) {
		r := newRecorder(t, "loop")
		done := r.start(t, newExecutor(t))
		select {
		case <-r.reported:
		case <-time.After(waitLimit):
			t.Fatalf("no report within %v", waitLimit)
		}
		r.stop()
		_ = r.wait(t, done)
		n := len(r.all())
		if steps := r.steps(); steps[n-1] != float64(n) {
			t.Errorf("steps %v: want 1..n in order", steps)
		}
	})
	t.Run("crash", func(t *testing.T) {
		r := newRecorder(t, "crash")
		err := r.run(t, newExecutor(t))
		if err == nil || !strings.Contains(err.Error(), "fatal: out of cheese") {
			t.Fatalf("Execute = %v, want the trainable's own words", err)
		}
	})
	t.Run("hang", func(t *testing.T) {
		r := newRecorder(t, "hang")
		done := r.start(t, newExecutor(t))
		bustest.Eventually(t, waitLimit, "the trainable to hang", func() bool {
			_, err := os.Stat(filepath.Join(r.info.TrialDir, "hanging"))
			return err == nil
		})
		r.cancel(context.Canceled) // the runner stops: the trainable ignores it
		_ = r.wait(t, done)
		if len(r.all()) != 0 {
			t.Errorf("a trainable that never reports reported %v", r.all())
		}
	})
}

// conformanceTrainable is the suite's trainable as a Go function; it does
// what testdata/trainable.py does. A hanging one ignores its context and
// returns only once release is closed.
func conformanceTrainable(release <-chan struct{}) session.Func {
	return func(ctx context.Context, config map[string]any) error {
		s, err := session.From(ctx)
		if err != nil {
			return err
		}
		switch config["behave"] {
		case "report":
			for step := 1; step <= 3; step++ {
				if _, err := s.Report(ctx, map[string]any{"step": step, "x": config["x"]}, ""); err != nil {
					return err
				}
			}
		case "info":
			i := s.Info()
			_, err := s.Report(ctx, map[string]any{
				"experiment": i.Experiment, "trial_id": i.TrialID, "trial_name": i.TrialName, "trial_dir": i.TrialDir, "attempt": i.Attempt,
			}, "")
			return err
		case "checkpoint":
			for step := 1; step <= 2; step++ {
				if err := reportCheckpoint(ctx, s, step); err != nil {
					return err
				}
			}
		case "resume":
			b, err := os.ReadFile(filepath.Join(s.Checkpoint(), "state"))
			if err != nil {
				return err
			}
			step, err := strconv.Atoi(string(b))
			if err != nil {
				return err
			}
			_, err = s.Report(ctx, map[string]any{"step": step + 1}, "")
			return err
		case "loop":
			for step := 1; ; step++ {
				if stop, err := s.Report(ctx, map[string]any{"step": step}, ""); stop || err != nil {
					return err
				}
			}
		case "crash":
			return errors.New("fatal: out of cheese")
		case "hang":
			if err := os.WriteFile(filepath.Join(s.Info().TrialDir, "hanging"), nil, 0o644); err != nil {
				return err
			}
			<-release
		}
		return nil
	}
}

// reportCheckpoint reports step with a checkpoint directory holding it,
// and removes the directory once Report has returned.
func reportCheckpoint(ctx context.Context, s session.Session, step int) error {
	dir, err := os.MkdirTemp("", "checkpoint-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := os.WriteFile(filepath.Join(dir, "state"), []byte(strconv.Itoa(step)), 0o644); err != nil {
		return err
	}
	_, err = s.Report(ctx, map[string]any{"step": step}, dir)
	return err
}

// pythonExecutor runs testdata/trainable.py with the Python SDK. python3
// is required: a missing interpreter fails the test, it is not skipped.
func pythonExecutor(t *testing.T, grace time.Duration) *commandExecutor {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is required by the command executor tests: %v", err)
	}
	sdk, err := filepath.Abs(filepath.Join("..", "..", "sdk", "python"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", sdk)
	t.Setenv("PYTHONDONTWRITEBYTECODE", "1")
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return &commandExecutor{
		Command: []string{"python3", "trainable.py"}, Dir: dir, Sockets: t.TempDir(), Grace: grace, Log: testLog(t),
	}
}

func testLog(t *testing.T) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
}

// recorder is the session the suite gives an executor. Like an attempt's,
// it has read a reported checkpoint's files before Report returns, answers
// stop from the stopAt-th report on (0: never) and then cancels the run
// with session.ErrStopped, and refuses reports once stopped.
type recorder struct {
	info       session.Info
	config     map[string]any
	checkpoint string
	stopAt     int
	ctx        context.Context
	cancel     context.CancelCauseFunc

	reported chan struct{} // closed by the first report

	mu      sync.Mutex
	reports []recorded
	stopped bool
}

type recorded struct {
	metrics map[string]any
	files   map[string]string // the checkpoint's files, by name
}

func newRecorder(t *testing.T, behave string) *recorder {
	r := &recorder{
		info:   session.Info{Experiment: "exp", TrialID: "t1", TrialName: "train_t1", TrialDir: t.TempDir(), Attempt: 1},
		config: map[string]any{"behave": behave, "x": 0.5}, reported: make(chan struct{}),
	}
	r.ctx, r.cancel = context.WithCancelCause(t.Context())
	t.Cleanup(func() { r.cancel(nil) })
	return r
}

// start runs e in the background; the channel yields Execute's error.
func (r *recorder) start(t *testing.T, e Executor) <-chan error {
	done := make(chan error, 1)
	go func() { done <- e.Execute(r.ctx, r, r.config) }()
	return done
}

// wait returns Execute's error.
func (r *recorder) wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitLimit):
		t.Fatalf("Execute did not return within %v", waitLimit)
		return nil
	}
}

// run runs e to its end and returns Execute's error.
func (r *recorder) run(t *testing.T, e Executor) error {
	t.Helper()
	return r.wait(t, r.start(t, e))
}

// stop stops the run, as a stop request or a met criterion does.
func (r *recorder) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
}

func (r *recorder) stopLocked() {
	r.stopped = true
	r.cancel(session.ErrStopped)
}

func (r *recorder) Report(_ context.Context, metrics map[string]any, dir string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return true, session.ErrStopped
	}
	rec := recorded{metrics: metrics}
	if dir != "" {
		files, err := readFiles(dir)
		if err != nil {
			return false, err
		}
		rec.files = files
	}
	r.reports = append(r.reports, rec)
	if len(r.reports) == 1 {
		close(r.reported)
	}
	if len(r.reports) == r.stopAt {
		r.stopLocked()
		return true, nil
	}
	return false, nil
}

func (r *recorder) Checkpoint() string { return r.checkpoint }
func (r *recorder) Info() session.Info { return r.info }

func (r *recorder) Object(context.Context, string) ([]byte, error) {
	return nil, errors.New("no objects in the executor tests")
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reports...)
}

// steps returns each report's "step", as a number whichever driver sent it.
func (r *recorder) steps() []float64 {
	var out []float64
	for _, rep := range r.all() {
		f, _ := toFloat(rep.metrics["step"])
		out = append(out, f)
	}
	return out
}

// readFiles returns the regular files directly in dir and their contents.
func readFiles(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files[e.Name()] = string(b)
	}
	return files, nil
}
