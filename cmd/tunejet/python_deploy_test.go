package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// pythonDeployScript is a Ray Tune script with changed imports: a
// function trainable that checkpoints, an object put by the driver and a
// stop function, run on whatever runners NATS_URL's deployment has.
const pythonDeployScript = `import json, os, sys, tempfile
import tunejet
from tunejet import train, tune

offset = tunejet.put({"offset": 100})

def trainable(config):
    add = tunejet.get(offset)["offset"]
    for step in range(1, 4):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step"), "w") as f:
                f.write(str(step))
            train.report({"score": config["x"] * step + add, "pid": os.getpid()},
                         checkpoint=train.Checkpoint.from_directory(d))

def reached_106(trial_id, result):
    # A stop function runs in the driver: the deployment's controller asks
    # it through the tunejet process the driver started.
    return result["score"] >= 106

grid = tune.Tuner(
    trainable,
    param_space={"x": tune.grid_search([1, 2, 3])},
    tune_config=tune.TuneConfig(metric="score", mode="max"),
    run_config=train.RunConfig(name="py_deploy", storage_path=sys.argv[1], stop=reached_106),
).fit()
best = grid.get_best_result()
print("RESULT " + json.dumps({"terminated": grid.num_terminated, "errors": grid.num_errors,
                              "best": best.metrics["score"], "driver_pid": os.getpid(),
                              "pids": sorted(r.metrics["pid"] for r in grid),
                              "iterations": {str(r.config["x"]): r.metrics["training_iteration"] for r in grid}}))
`

// TestPythonDriverOnADeployment: a Python driver with NATS_URL set submits
// its experiment to a deployment (controller, syncer and a runner as
// processes), whose runner runs the trainable function of the driver's
// script; fit() returns the results as on the embedded stack.
func TestPythonDriverOnADeployment(t *testing.T) {
	t.Parallel()
	_, self, _, _ := runtime.Caller(0)
	pythonDriverOnADeployment(t, "PYTHONPATH="+filepath.Join(filepath.Dir(self), "..", "..", "sdk", "python"))
}

// TestPythonDriverOnARunnerWithoutTheSDK: the deployment's processes were
// started with no tunejet package on their Python path; the runner puts
// the package it carries on the trials' path, and they run.
func TestPythonDriverOnARunnerWithoutTheSDK(t *testing.T) {
	t.Parallel()
	pythonDriverOnADeployment(t, "PYTHONPATH="+t.TempDir())
}

// pythonDriverOnADeployment runs pythonDeployScript on a deployment whose
// processes run with servicesEnv on top of the test's environment.
func pythonDriverOnADeployment(t *testing.T, servicesEnv ...string) {
	d := startPythonDeployment(t, servicesEnv, "--slots", "2", "--name", "rA")
	cmd := d.driver(t, writeFile(t, d.home, "deploy.py", pythonDeployScript))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the driver failed: %v\n%s", err, out)
	}
	var got struct {
		Terminated, Errors int
		Best               float64
		DriverPID          int `json:"driver_pid"`
		PIDs               []int
		Iterations         map[string]int
	}
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			if err := json.Unmarshal([]byte(rest), &got); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got.Terminated != 3 || got.Errors != 0 || got.Best != 106 || got.Iterations["3"] != 2 || got.Iterations["1"] != 3 {
		t.Fatalf("results %+v, want 3 TERMINATED, x=3 stopped by the driver's function at step 2 (score 106, the best):\n%s", got, out)
	}
	for _, pid := range got.PIDs {
		if pid == got.DriverPID {
			t.Errorf("a trial ran in the driver's process")
		}
	}
	started, answered := 0, 0
	for _, ev := range replay(t, d.srv, "py_deploy") {
		if p, ok := ev.Data.(*events.DriverAnswered); ok && p.By == "reached_106" {
			answered++
		}
		if p, ok := ev.Data.(*events.TrialStarted); ok {
			started++
			if p.Runner != "rA" {
				t.Errorf("trial %s started on %q, want the deployment's runner rA", p.TrialID, p.Runner)
			}
		}
	}
	if started != 3 {
		t.Errorf("%d trial.started events, want 3", started)
	}
	if answered != 8 { // x=1 and x=2: 3 results each; x=3: 2
		t.Errorf("%d driver.answered by reached_106, want one per result judged, 8", answered)
	}
	if _, err := os.Stat(filepath.Join(d.storage, "py_deploy")); err != nil {
		t.Errorf("the deployment's syncer wrote no experiment folder: %v", err)
	}
}

// pythonDeployment is NATS with a controller, a syncer and a runner as
// processes, for Python drivers to submit to.
type pythonDeployment struct {
	srv                 *bustest.Server
	url, python, sdk    string
	home, storage, work string // the driver's HOME, the storage, the runner's work dir
}

// startPythonDeployment starts the deployment, its processes with
// servicesEnv on top of the test's environment and the runner with
// runnerArgs; it skips the test without python3.
func startPythonDeployment(t *testing.T, servicesEnv []string, runnerArgs ...string) *pythonDeployment {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	_, self, _, _ := runtime.Caller(0)
	d := &pythonDeployment{srv: bustest.Start(t), python: python, sdk: filepath.Join(filepath.Dir(self), "..", "..", "sdk", "python"),
		home: t.TempDir(), storage: t.TempDir(), work: t.TempDir()}
	d.url = d.srv.URL()
	env := baseEnv(append([]string{"TUNEJET_LOG_FORMAT=json"}, servicesEnv...)...)
	for _, args := range [][]string{
		{"controller", "--nats", d.url},
		{"syncer", "--nats", d.url},
		append([]string{"runner", "--nats", d.url, "--work-dir", d.work}, runnerArgs...),
	} {
		startTunejet(t, "", env, args...)
	}
	return d
}

// driver is the command that runs the driver script with the storage as
// its argument, submitting to the deployment.
func (d *pythonDeployment) driver(t *testing.T, script string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), d.python, script, d.storage)
	cmd.Dir = d.home
	cmd.Env = baseEnv("HOME="+d.home, "NATS_URL="+d.url, "TUNEJET_BIN="+tunejetBin, "PYTHONPATH="+d.sdk, "PYTHONDONTWRITEBYTECODE=1")
	return cmd
}
