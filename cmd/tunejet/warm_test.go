package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// warmGPUScript runs 1-GPU and CPU-only trials of one function; each
// reports the devices it was given and the warm worker that forked it
// (its parent). The first 1-GPU trial waits for $RELEASE_FILE, so that
// the test sees the runner's warm workers while trials run.
const warmGPUScript = `import json, os, sys, time
from tunejet import train, tune

def trainable(config):
    if config["gpus"] == 1 and config["rep"] == 0:
        while not os.path.exists(os.environ["RELEASE_FILE"]):
            time.sleep(0.05)
    train.report({"devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "worker": os.getppid()})

grid = tune.Tuner(
    tune.with_resources(trainable, {"gpu": {"config": "gpus"}}),
    param_space={"gpus": tune.grid_search([1, 0]), "rep": tune.grid_search(list(range(5)))},
    run_config=train.RunConfig(name="warm_gpus", storage_path=sys.argv[1]),
).fit()
print("RESULT " + json.dumps({"errors": grid.num_errors,
                              "trials": [[r.metrics["devices"], r.metrics["worker"]] for r in grid]}))
`

// TestWarmWorkersKeepToTheirGPUs: a runner with two fake GPUs runs 1-GPU
// and CPU-only trials of a Python function from warm workers. A worker is
// started for one device assignment and forks only trials given the same
// devices; workers serve several trials each; and tunejet status shows
// each warm worker with its devices and memory while trials run.
func TestWarmWorkersKeepToTheirGPUs(t *testing.T) {
	t.Parallel()
	metrics := freeAddr(t)
	_, self, _, _ := runtime.Caller(0)
	release := filepath.Join(t.TempDir(), "release")
	sdk := filepath.Join(filepath.Dir(self), "..", "..", "sdk", "python")
	d := startPythonDeployment(t, []string{"PYTHONPATH=" + sdk, "RELEASE_FILE=" + release},
		"--cpus", "3", "--gpus", "2", "--gpu-ids", "g0,g1", "--name", "rG", "--worker-idle", "1s", "--metrics-addr", metrics)
	url := d.url
	cmd := d.driver(t, writeFile(t, d.home, "warm_gpus.py", warmGPUScript))
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	// While the first 1-GPU trial waits, status lists the warm workers;
	// once the other trials have ended, their idle workers exit
	// (--worker-idle 1s) and the waiting trial's stays.
	type worker struct {
		GPUIDs   []string `json:"gpu_ids"`
		RSSBytes int64    `json:"rss_bytes"`
		Running  int
		Trials   int
	}
	workers := func() ([]worker, bool) {
		r := tunejet(t, "", baseEnv(), "status", "--nats", url, "--json")
		var st struct{ Runners []struct{ Workers []worker } }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || len(st.Runners) != 1 {
			return nil, false
		}
		return st.Runners[0].Workers, true
	}
	var verbose string
	bustest.Eventually(t, 2*time.Minute, "tunejet status to list a warm worker on one GPU, with its memory", func() bool {
		ws, _ := workers()
		for _, w := range ws {
			if len(w.GPUIDs) == 1 && w.Running == 1 && w.RSSBytes > 0 {
				verbose = tunejet(t, "", baseEnv(), "status", "--nats", url, "--verbose").stdout
				return true
			}
		}
		return false
	})
	if !strings.Contains(verbose, "WARM WORKER") || !strings.Contains(verbose, "trainable") {
		t.Errorf("tunejet status --verbose does not list the warm workers:\n%s", verbose)
	}
	if _, body := httpGet("http://" + metrics + "/metrics"); !strings.Contains(body, `tunejet_warm_worker_rss_bytes{experiment="warm_gpus"}`) {
		t.Errorf("the runner's /metrics lacks the warm workers' memory:\n%s", body)
	}
	most := 0 // workers listed at once
	bustest.Eventually(t, 2*time.Minute, "another warm worker, then the idle ones to exit and the busy one to stay", func() bool {
		ws, _ := workers()
		most = max(most, len(ws))
		return most > 1 && len(ws) == 1 && ws[0].Running == 1
	})
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the driver failed: %v\n%s", err, out.String())
	}
	// The experiment ended: its workers are gone from /metrics too.
	bustest.Eventually(t, time.Minute, "the ended experiment's warm workers to leave /metrics", func() bool {
		_, body := httpGet("http://" + metrics + "/metrics")
		return strings.Contains(body, "tunejet_reports_total") && !strings.Contains(body, `tunejet_warm_workers{experiment="warm_gpus"}`)
	})

	var got struct {
		Errors int
		Trials [][2]any
	}
	for line := range strings.Lines(out.String()) {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			if err := json.Unmarshal([]byte(rest), &got); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got.Errors != 0 || len(got.Trials) != 10 {
		t.Fatalf("results %+v, want 10 trials without errors:\n%s", got, out.String())
	}
	devicesOf := map[float64]string{} // worker pid → the devices of its trials
	trialsOf := map[float64]int{}
	for _, tr := range got.Trials {
		devices, worker := tr[0].(string), tr[1].(float64)
		if d, ok := devicesOf[worker]; ok && d != devices {
			t.Errorf("warm worker %v forked trials on devices %q and %q", worker, d, devices)
		}
		devicesOf[worker] = devices
		trialsOf[worker]++
	}
	reused := false
	for _, n := range trialsOf {
		reused = reused || n > 1
	}
	if !reused || len(devicesOf) > 3 {
		t.Errorf("trials by warm worker %v, want at most 3 workers (g0, g1, none), one serving several trials", trialsOf)
	}
}
