package main_test

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// embeddedEnv is the environment of an embedded `tunejet run`: the
// embedded runner's default work dir (under TMPDIR) goes to a temp dir.
func embeddedEnv(t *testing.T, extra ...string) []string {
	return baseEnv(append([]string{"TMPDIR=" + t.TempDir(), "TUNEJET_BIN=" + tunejetBin}, extra...)...)
}

// embeddedRun runs `tunejet run FILE` on the embedded stack with its store
// and storage in temp dirs; it returns the storage path.
func embeddedRun(t *testing.T, file string, extra ...string) (result, string) {
	t.Helper()
	storagePath := t.TempDir()
	args := append([]string{"run", file, "--store-dir", t.TempDir(), "--storage-path", storagePath}, extra...)
	return tunejet(t, "", embeddedEnv(t), args...), storagePath
}

// halfFailing has two trials: x=1 reports twice and exits 0, x=2 writes to
// stderr and exits 3.
const halfFailing = `name: half_failing
trainable:
  name: half
  command:
    - /bin/sh
    - -c
    - |
      case "$TUNEJET_CONFIG" in
      *'"x":2'*) echo "x=2 is not allowed" >&2; exit 3 ;;
      esac
      "$TUNEJET_BIN" report loss=0.5
      "$TUNEJET_BIN" report loss=0.25
param_space:
  x: {grid_search: [1, 2]}
tune_config:
  metric: loss
  mode: min
`

func TestRunMalformedFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := writeFile(t, dir, "exp.yaml", `name: bad
trainable:
  command: ["/bin/sh", "-c", "exit 0"]
tune_config:
  num_samples: 2
  mode: avg
  num_sample: 3
`)
	r := tunejet(t, dir, baseEnv(), "run", file, "--store-dir", t.TempDir(), "--storage-path", t.TempDir())
	if r.code != 1 {
		t.Fatalf("want exit status 1 for a malformed file, got:\n%s", r)
	}
	for _, want := range []string{
		file + `:6: tune_config.mode: must be "min" or "max", got "avg"`,
		file + `:7: tune_config.num_sample: unknown key`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r)
		}
	}
	if !strings.Contains(r.stderr, "did you mean") || !strings.Contains(r.stderr, "num_samples") {
		t.Errorf("stderr does not suggest num_samples for num_sample:\n%s", r)
	}
	if r.stdout != "" {
		t.Errorf("a refused file printed on stdout:\n%s", r)
	}
}

func TestRunMissingFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "missing.yaml")
	r := tunejet(t, "", baseEnv(), "run", file, "--store-dir", t.TempDir(), "--storage-path", t.TempDir())
	if r.code != 1 {
		t.Fatalf("want exit status 1 for a missing file, got:\n%s", r)
	}
	if !strings.Contains(r.stderr, file) || !strings.Contains(r.stderr, "no such file or directory") {
		t.Errorf("stderr does not name %s and say it does not exist:\n%s", file, r)
	}
}

// TestRunEmbeddedWithFailingTrial: a trial that exits 3 ends ERROR with its
// stderr in error.txt, and the experiment still completes with status 0.
func TestRunEmbeddedWithFailingTrial(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "exp.yaml", halfFailing)
	r, storagePath := embeddedRun(t, file)
	if r.code != 0 {
		t.Fatalf("want exit status 0 for a completed experiment with an errored trial, got:\n%s", r)
	}
	expDir := filepath.Join(storagePath, "half_failing")
	for _, want := range []string{
		"Experiment finished: 2 trials, 1 TERMINATED, 1 ERROR.",
		"Results: " + expDir,
		"Best trial half_",
		`(min loss = 0.25) with config {"x":1}`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout does not say %q:\n%s", want, r)
		}
	}
	errs, _ := filepath.Glob(filepath.Join(expDir, "*", "error.txt"))
	if len(errs) != 1 {
		t.Fatalf("want one error.txt under %s, found %v", expDir, errs)
	}
	b, err := os.ReadFile(errs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "Failure # 1") || !strings.Contains(string(b), "status 3") || !strings.Contains(string(b), "x=2 is not allowed") {
		t.Errorf("%s does not hold the failure with exit status 3 and the stderr line:\n%s", errs[0], b)
	}
	if !strings.Contains(filepath.Base(filepath.Dir(errs[0])), "x=2") {
		t.Errorf("error.txt is in %s, want the trial with x=2", filepath.Dir(errs[0]))
	}
}

func TestReportOutsideTrainable(t *testing.T) {
	t.Parallel()
	r := tunejet(t, t.TempDir(), baseEnv(), "report", "loss=1")
	if r.code == 0 {
		t.Fatalf("tunejet report without a runner succeeded:\n%s", r)
	}
	if !strings.Contains(r.stderr, "TUNEJET_SOCKET") {
		t.Errorf("stderr does not name TUNEJET_SOCKET:\n%s", r)
	}
	if r.stdout != "" {
		t.Errorf("a failed report printed on stdout:\n%s", r)
	}
}

func TestResults(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "exp.yaml", halfFailing)
	run, storagePath := embeddedRun(t, file)
	if run.code != 0 {
		t.Fatalf("tunejet run:\n%s", run)
	}
	expDir := filepath.Join(storagePath, "half_failing")

	got := resultsJSON(t, expDir)
	if got.ExperimentPath != expDir {
		t.Errorf("experiment_path = %q, want %q", got.ExperimentPath, expDir)
	}
	if len(got.Trials) != 2 {
		t.Fatalf("results --json lists %d trials, want 2: %+v", len(got.Trials), got.Trials)
	}
	byX := map[float64]int{}
	for i, tr := range got.Trials {
		x, _ := tr.Config["x"].(float64)
		byX[x] = i
		if !strings.HasPrefix(tr.TrialName, "half_") || !strings.HasSuffix(tr.TrialName, tr.TrialID) {
			t.Errorf("trial %d: name %q does not read half_<trial id %s>", i, tr.TrialName, tr.TrialID)
		}
		if filepath.Dir(tr.Path) != expDir {
			t.Errorf("trial %s: path %q is not in %s", tr.TrialID, tr.Path, expDir)
		}
		if _, err := os.Stat(filepath.Join(tr.Path, "params.json")); err != nil {
			t.Errorf("trial %s: path %q has no params.json: %v", tr.TrialID, tr.Path, err)
		}
	}
	ok, bad := got.Trials[byX[1]], got.Trials[byX[2]]
	if ok.Status != events.StatusTerminated || ok.Metrics["loss"] != 0.25 || ok.Metrics["training_iteration"] != 2.0 || ok.Error != "" {
		t.Errorf("trial x=1: status %s, loss %v, iteration %v, error %q; want TERMINATED after 2 reports, last loss 0.25",
			ok.Status, ok.Metrics["loss"], ok.Metrics["training_iteration"], ok.Error)
	}
	if bad.Status != events.StatusError || bad.NumFailures != 1 || !strings.Contains(bad.Error, "x=2 is not allowed") {
		t.Errorf("trial x=2: status %s, %d failures, error %q; want ERROR after 1 failure with the trainable's stderr",
			bad.Status, bad.NumFailures, bad.Error)
	}
	if got.Best != ok.TrialID {
		t.Errorf("best_trial_id = %q, want %q (the only trial with a loss)", got.Best, ok.TrialID)
	}

	text := tunejet(t, "", baseEnv(), "results", expDir)
	if text.code != 0 {
		t.Fatalf("tunejet results:\n%s", text)
	}
	for _, tr := range got.Trials {
		line := lineWith(text.stdout, tr.TrialName)
		if line == "" {
			t.Errorf("tunejet results does not list trial %s:\n%s", tr.TrialName, text.stdout)
			continue
		}
		x := strconv.FormatFloat(tr.Config["x"].(float64), 'f', -1, 64)
		if !strings.Contains(line, tr.Status) || !strings.Contains(line, `{"x":`+x+`}`) {
			t.Errorf("tunejet results line for %s does not show status %s and config x=%s: %q", tr.TrialName, tr.Status, x, line)
		}
	}
	if !strings.Contains(text.stdout, "Experiment finished: 2 trials, 1 TERMINATED, 1 ERROR.") {
		t.Errorf("tunejet results prints no summary:\n%s", text)
	}
}

func TestResultsWithoutState(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	missing := filepath.Join(t.TempDir(), "never_ran")
	for _, path := range []string{empty, missing} {
		r := tunejet(t, "", baseEnv(), "results", path)
		if r.code != 1 {
			t.Errorf("tunejet results %s: want exit status 1, got:\n%s", path, r)
			continue
		}
		if !strings.Contains(r.stderr, path) {
			t.Errorf("tunejet results %s: stderr does not name the path:\n%s", path, r)
		}
		if r.stdout != "" {
			t.Errorf("tunejet results %s printed on stdout:\n%s", path, r)
		}
	}
}

// TestPythonExample runs examples/python as its README says, on the
// embedded stack.
func TestPythonExample(t *testing.T) {
	t.Parallel()
	storagePath := t.TempDir()
	r := tunejet(t, moduleRoot, embeddedEnv(t), "run", "examples/python/experiment.yaml",
		"--storage-path", storagePath, "--store-dir", t.TempDir(), "--name", "py_example")
	if r.code != 0 {
		t.Fatalf("tunejet run examples/python/experiment.yaml:\n%s", r)
	}
	got := resultsJSON(t, filepath.Join(storagePath, "py_example"))
	if len(got.Trials) != 6 {
		t.Errorf("%d trials, want 6 (2 samples x 3 grid values)", len(got.Trials))
	}
	for _, tr := range got.Trials {
		if tr.Status != events.StatusTerminated {
			t.Errorf("trial %s ended %s, want TERMINATED; error: %s", tr.TrialName, tr.Status, tr.Error)
			continue
		}
		if tr.Metrics["step"] != 10.0 || tr.Metrics["training_iteration"] != 10.0 {
			t.Errorf("trial %s: last result step %v, training_iteration %v; want 10 and 10", tr.TrialName, tr.Metrics["step"], tr.Metrics["training_iteration"])
		}
	}
}

// TestASHAExample runs examples/asha as its README says, on the embedded
// stack, with short epochs: ASHA stops most trials at an early rung, with
// its reason, and the best trial trains to max_t.
func TestASHAExample(t *testing.T) {
	t.Parallel()
	storagePath := t.TempDir()
	r := tunejet(t, moduleRoot, embeddedEnv(t, "EPOCH_SECONDS=0.01"), "run", "examples/asha/experiment.yaml",
		"--storage-path", storagePath, "--store-dir", t.TempDir(), "--name", "asha_example")
	if r.code != 0 {
		t.Fatalf("tunejet run examples/asha/experiment.yaml:\n%s", r)
	}
	got := resultsJSON(t, filepath.Join(storagePath, "asha_example"))
	if len(got.Trials) != 24 {
		t.Fatalf("%d trials, want 24", len(got.Trials))
	}
	stopped, best, bestLoss := 0, "", math.Inf(1)
	for _, tr := range got.Trials {
		if tr.Status != events.StatusTerminated {
			t.Errorf("trial %s ended %s, want TERMINATED; error: %s", tr.TrialName, tr.Status, tr.Error)
		}
		if strings.HasPrefix(tr.EndReason, "scheduler: stopped at rung") {
			stopped++
		}
		if loss, _ := tr.Metrics["loss"].(float64); loss < bestLoss && tr.Metrics["training_iteration"] == 27.0 {
			best, bestLoss = tr.TrialName, loss
		}
	}
	if stopped < 12 {
		t.Errorf("ASHA stopped %d of 24 trials at a rung, want most of them", stopped)
	}
	if best == "" {
		t.Errorf("no trial trained the 27 epochs of max_t")
	}
}

// slowExperiment reports once every 100 ms for a minute, much longer than
// the test waits.
const slowExperiment = `name: slow
trainable:
  name: slow
  command:
    - /bin/sh
    - -c
    - |
      echo $$ > "$PID_FILE"
      i=0
      while [ $i -lt 600 ]; do
        i=$((i + 1))
        out=$("$TUNEJET_BIN" report loss=$i)
        if [ "$out" = stop ]; then exit 0; fi
        sleep 0.1
      done
run_config:
  sync_config: {sync_period: 0.2}   # results reach storage while it runs
`

// TestRunInterrupted sends SIGINT to `tunejet run` while a trial runs: it
// exits 130, says so, stops the trainable, and leaves the experiment's
// state INTERRUPTED in storage.
func TestRunInterrupted(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "exp.yaml", slowExperiment)
	storagePath := t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "trainable.pid")
	p := startTunejet(t, "", embeddedEnv(t, "PID_FILE="+pidFile),
		"run", file, "--store-dir", t.TempDir(), "--storage-path", storagePath)
	expDir := filepath.Join(storagePath, "slow")
	bustest.Eventually(t, time.Minute, "a result.json line of the running trial", func() bool {
		if p.exited() {
			t.Fatalf("tunejet run exited before it was interrupted:\n%s\n%s", p.stdout, p.stderr)
		}
		files, _ := filepath.Glob(filepath.Join(expDir, "*", "result.json"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "\n") {
				return true
			}
		}
		return false
	})
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 130 {
		t.Fatalf("want exit status 130 after SIGINT, got:\n%s", r)
	}
	if !strings.Contains(r.stderr, "experiment interrupted") {
		t.Errorf("stderr does not say the experiment was interrupted:\n%s", r)
	}
	if strings.Contains(r.stdout, "Experiment finished") {
		t.Errorf("an interrupted run printed the summary of a finished experiment:\n%s", r)
	}

	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", pidFile, err)
	}
	if alive(pid) {
		t.Errorf("the trainable (pid %d) still runs after tunejet run exited", pid)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}

	dir := &storage.Dir{Root: expDir}
	name, err := dir.NewestState()
	if err != nil {
		t.Fatalf("no experiment state saved: %v", err)
	}
	sb, err := dir.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Load(sb)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if st.Status != state.ExperimentInterrupted {
		t.Errorf("saved experiment status %s, want %s", st.Status, state.ExperimentInterrupted)
	}
	for _, tr := range st.TrialList() {
		if tr.Status == events.StatusTerminated || tr.Status == events.StatusError {
			t.Errorf("trial %s ended %s, but it was interrupted, not finished", tr.ID, tr.Status)
		}
		if tr.NumResults < 1 {
			t.Errorf("trial %s: the saved state has %d results, want the ones reported before the interrupt", tr.ID, tr.NumResults)
		}
	}
}

// alive reports whether pid is a process that has not ended (a zombie
// waiting to be reaped has ended).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func lineWith(text, substr string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, substr) {
			return l
		}
	}
	return ""
}

// paretoExp optimizes loss (min) and throughput (max) together: x=3 is
// dominated by x=2, x=5 fails, the others are the front.
const paretoExp = `name: pareto
trainable:
  command:
    - /bin/sh
    - -c
    - |
      case "$TUNEJET_CONFIG" in
      *'"x":1'*) "$TUNEJET_BIN" report loss=1 throughput=1 ;;
      *'"x":2'*) "$TUNEJET_BIN" report loss=2 throughput=3 ;;
      *'"x":3'*) "$TUNEJET_BIN" report loss=3 throughput=2 ;;
      *'"x":4'*) "$TUNEJET_BIN" report loss=4 throughput=4 ;;
      *) exit 3 ;;
      esac
param_space:
  x: {grid_search: [1, 2, 3, 4, 5]}
tune_config:
  metric: [loss, throughput]
  mode: [min, max]
`

// TestResultsParetoFront: an experiment of several metrics ends with its
// Pareto front, in the summary, in tunejet results and in its --json.
func TestResultsParetoFront(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "exp.yaml", paretoExp)
	run, storagePath := embeddedRun(t, file)
	if run.code != 0 {
		t.Fatalf("tunejet run:\n%s", run)
	}
	expDir := filepath.Join(storagePath, "pareto")
	got := resultsJSON(t, expDir)
	var want []string
	for _, tr := range got.Trials {
		if x := tr.Config["x"]; x == 1.0 || x == 2.0 || x == 4.0 {
			want = append(want, tr.TrialID)
		}
	}
	if len(got.Trials) != 5 || !slices.Equal(got.ParetoFront, want) {
		t.Errorf("pareto_front = %v, want %v (x = 1, 2, 4 of 5 trials)", got.ParetoFront, want)
	}
	if got.Best != "" {
		t.Errorf("best_trial_id = %q: with several metrics there is no one best trial", got.Best)
	}
	text := tunejet(t, "", baseEnv(), "results", expDir)
	for _, out := range []string{run.stdout, text.stdout} {
		_, front, ok := strings.Cut(out, "Pareto front: 3 of 5 trials (loss min, throughput max)\n")
		if !ok {
			t.Errorf("no Pareto front section:\n%s", out)
			continue
		}
		for _, x := range []string{"1", "2", "4"} {
			if !strings.Contains(front, `{"x":`+x+`}`) {
				t.Errorf("the Pareto front does not list x=%s:\n%s", x, front)
			}
		}
		if strings.Contains(front, `{"x":3}`) {
			t.Errorf("the Pareto front lists x=3, which x=2 dominates:\n%s", front)
		}
	}
	best := tunejet(t, "", baseEnv(), "results", "--metric", "throughput", "--mode", "max", expDir)
	if !strings.Contains(best.stdout, "Best trial: ") || !strings.Contains(best.stdout, `"throughput":4`) {
		t.Errorf("results --metric throughput --mode max does not name the x=4 trial:\n%s", best)
	}
}

// TestRunDashboardKeepsServingAfterTheRun: the page of tunejet run
// --dashboard stays up once the run is over, saying so, until Ctrl-C,
// which then ends the process with the run's own exit status; with
// --dashboard-keep=false the process ends with the run.
func TestRunDashboardKeepsServingAfterTheRun(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "exp.yaml", "name: kept\ntrainable:\n  command: [/bin/sh, -c, 'exit 0']\n")
	args := []string{"run", "--dashboard=127.0.0.1:0", file, "--store-dir", t.TempDir(), "--storage-path", t.TempDir()}
	p := startProc(t, "", embeddedEnv(t), false, args...)
	kept := regexp.MustCompile(`The run is over; the dashboard keeps serving at (http://\S+/) until Ctrl-C\.`)
	var url string
	bustest.Eventually(t, 60*time.Second, "the run to end and the dashboard to stay", func() bool {
		if p.exited() {
			t.Fatalf("tunejet run --dashboard exited after the run:\n%s", p.stderr)
		}
		if m := kept.FindStringSubmatch(p.stderr.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	resp, err := http.Get(url + "api/experiments")
	if err != nil {
		t.Fatalf("the dashboard after the run: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"name":"kept"`) || !strings.Contains(string(body), `"COMPLETED"`) {
		t.Errorf("the dashboard after the run answers %s %s; want the experiment kept, COMPLETED", resp.Status, body)
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.code != 0 || strings.Contains(r.stderr, "interrupted") {
		t.Errorf("Ctrl-C after a run that succeeded: exit status %d; want 0, not an interruption:\n%s", r.code, r)
	}

	r := tunejet(t, "", embeddedEnv(t), "run", "--dashboard=127.0.0.1:0", "--dashboard-keep=false", file,
		"--store-dir", t.TempDir(), "--storage-path", t.TempDir())
	if r.code != 0 || strings.Contains(r.stderr, "keeps serving") {
		t.Errorf("run --dashboard-keep=false: exit status %d, want 0 without serving on:\n%s", r.code, r)
	}
}
