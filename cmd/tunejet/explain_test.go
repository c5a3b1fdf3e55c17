package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// foreverScript reports loss = x/i until it is told to stop.
const foreverScript = `import tunejet
x = tunejet.get_config()["x"]
i = 0
while True:
    i += 1
    tunejet.report({"loss": x / i})
`

// ashaExperiment runs one trial at a time, so ASHA decides the same every
// time: x=1 is first at every rung and runs to max_t 4; x=2 is stopped at
// rung 1 (-2 < cutoff -1, x=1's reward alone); x=3 is stopped there too,
// -3 < cutoff -1.5, the 50th percentile of x=1's -1 and x=2's -2.
const ashaExperiment = `name: asha_explain
trainable:
  command: ["python3", %q]
param_space:
  x: {grid_search: [1, 2, 3]}
tune_config:
  metric: loss
  mode: min
  max_concurrent_trials: 1
  scheduler: asha
  scheduler_config: {grace_period: 1, reduction_factor: 2, max_t: 4}
`

// The stop of x=3, the third trial (index 00002), as explain says it.
const (
	thirdFromLog = "at training_iteration 1: rung 1 of bracket 0; reward -3 < cutoff -1.5, the 50th percentile of 2 other trials' rewards between -2 and -1 [-2 -1]"
	thirdReason  = "stopped at rung 1 (training_iteration 1): -3 < cutoff -1.5, the 50th percentile of 2 other trials' rewards [-2 -1]"
)

// TestExplain runs an ASHA experiment on the embedded stack, then explains
// its stopped trial from the event log (every input), from the state file
// alone (the reasons), and refuses an unknown trial, listing the trials.
func TestExplain(t *testing.T) {
	t.Parallel()
	file, pyEnv := ashaFile(t)
	store, storagePath := t.TempDir(), t.TempDir()
	if r := tunejet(t, "", embeddedEnv(t, pyEnv...), "run", file, "--store-dir", store, "--storage-path", storagePath); r.code != 0 {
		t.Fatalf("tunejet run:\n%s", r)
	}
	expDir := filepath.Join(storagePath, "asha_explain")

	t.Run("from the log", func(t *testing.T) {
		r := tunejet(t, "", baseEnv(), "explain", expDir, "00002", "--store-dir", store)
		if r.code != 0 {
			t.Fatalf("tunejet explain:\n%s", r)
		}
		for _, want := range []string{"from the event log", `config {"x":3}`, thirdFromLog, "TERMINATED  stopped by #"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("explain does not say %q:\n%s", want, r.stdout)
			}
		}
		if stop := lineWith(r.stdout, thirdFromLog); !strings.Contains(stop, "scheduler  stop") {
			t.Errorf("the rung's line is not the scheduler's stop: %q", stop)
		}
	})

	t.Run("as JSON from the log", func(t *testing.T) {
		r := tunejet(t, "", baseEnv(), "explain", expDir, "00002", "--store-dir", store, "--json")
		if r.code != 0 {
			t.Fatalf("tunejet explain --json:\n%s", r)
		}
		var x struct {
			Source    string `json:"source"`
			Decisions []struct {
				By     string `json:"by"`
				Action string `json:"action"`
				Reason string `json:"reason"`
				Detail struct {
					Rung struct {
						Milestone float64   `json:"milestone"`
						Cutoff    float64   `json:"cutoff"`
						Values    []float64 `json:"values"`
					} `json:"rung"`
				} `json:"detail"`
				ResultSeq uint64 `json:"result_seq"`
			} `json:"decisions"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &x); err != nil {
			t.Fatalf("explain --json is not JSON: %v\n%s", err, r.stdout)
		}
		if x.Source != "log" || len(x.Decisions) != 1 {
			t.Fatalf("source %q, %d decisions; want the log's one decision:\n%s", x.Source, len(x.Decisions), r.stdout)
		}
		d := x.Decisions[0]
		if d.By != "scheduler" || d.Action != "stop" || d.Reason != thirdReason || d.ResultSeq == 0 {
			t.Errorf("decision %+v; want the scheduler's stop on a result: %s", d, thirdReason)
		}
		if rung := d.Detail.Rung; rung.Milestone != 1 || rung.Cutoff != -1.5 || len(rung.Values) != 2 {
			t.Errorf("rung inputs %+v; want milestone 1, cutoff -1.5 from two values", rung)
		}
	})

	t.Run("from the state file", func(t *testing.T) {
		states, err := filepath.Glob(filepath.Join(expDir, "experiment_state-*.json"))
		if err != nil || len(states) == 0 {
			t.Fatalf("no state file in %s: %v", expDir, err)
		}
		only := filepath.Join(t.TempDir(), "asha_explain")
		newest := states[len(states)-1]
		data, err := os.ReadFile(newest)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(only, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, only, filepath.Base(newest), string(data))
		noStore := filepath.Join(t.TempDir(), "no-store")
		r := tunejet(t, "", baseEnv(), "explain", only, "forever_", "--store-dir", noStore)
		if r.code == 0 || !strings.Contains(r.stderr, "ambiguous") {
			t.Errorf("a prefix of every trial's name: want it refused as ambiguous:\n%s", r)
		}
		r = tunejet(t, "", baseEnv(), "explain", only, "00002", "--store-dir", noStore)
		if r.code != 0 {
			t.Fatalf("tunejet explain:\n%s", r)
		}
		for _, want := range []string{"from the state file " + filepath.Base(newest) + ": inputs are in the log", thirdReason, "scheduler  stop"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("explain does not say %q:\n%s", want, r.stdout)
			}
		}
		if _, err := os.Stat(noStore); err == nil {
			t.Errorf("explain created the store %s it only looked for", noStore)
		}
	})

	t.Run("while another process serves the store", func(t *testing.T) {
		emb, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: store})
		if err != nil {
			t.Fatal(err)
		}
		defer emb.Shutdown()
		r := tunejet(t, "", baseEnv(), "explain", expDir, "00002", "--store-dir", store)
		if r.code != 0 {
			t.Fatalf("tunejet explain:\n%s", r)
		}
		if !strings.Contains(r.stderr, "store dir in use") || !strings.Contains(r.stdout, "from the state file") || !strings.Contains(r.stdout, thirdReason) {
			t.Errorf("want the store named in use and the stop explained from the state file:\n%s", r)
		}
	})

	t.Run("an unknown trial", func(t *testing.T) {
		r := tunejet(t, "", baseEnv(), "explain", expDir, "nosuchtrial", "--store-dir", store)
		if r.code != 1 || r.stdout != "" {
			t.Fatalf("want exit status 1 and nothing on stdout:\n%s", r)
		}
		if !strings.Contains(r.stderr, `no trial "nosuchtrial" in experiment asha_explain`) {
			t.Errorf("stderr does not say there is no such trial:\n%s", r)
		}
		if n := strings.Count(r.stderr, "forever_"); n != 3 {
			t.Errorf("stderr lists %d trials, want the 3:\n%s", n, r)
		}
	})
}

// ashaFile writes the ASHA experiment and its trainable; pyEnv lets the
// trainable import the Python SDK.
func ashaFile(t *testing.T) (file string, pyEnv []string) {
	dir := t.TempDir()
	script := writeFile(t, dir, "forever.py", foreverScript)
	return writeFile(t, dir, "exp.yaml", fmt.Sprintf(ashaExperiment, script)),
		[]string{"PYTHONPATH=" + filepath.Join(moduleRoot, "sdk", "python"), "PYTHONDONTWRITEBYTECODE=1"}
}

// TestExplainDeployment explains a trial from a deployment's log
// (--nats), as tunejet status reaches it.
func TestExplainDeployment(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	url := srv.URL()
	file, pyEnv := ashaFile(t)
	env := baseEnv(pyEnv...)
	startTunejet(t, "", env, "controller", "--nats", url)
	startTunejet(t, "", env, "syncer", "--nats", url)
	startTunejet(t, "", env, "runner", "--nats", url, "--slots", "1", "--name", "r1", "--work-dir", t.TempDir())
	storagePath := t.TempDir()
	if r := tunejet(t, "", baseEnv(), "run", "--nats", url, file, "--storage-path", storagePath); r.code != 0 {
		t.Fatalf("tunejet run --nats:\n%s", r)
	}
	r := tunejet(t, "", baseEnv(), "explain", "--nats", url, filepath.Join(storagePath, "asha_explain"), "00002")
	if r.code != 0 {
		t.Fatalf("tunejet explain --nats:\n%s", r)
	}
	for _, want := range []string{"from the event log", thirdFromLog} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("explain does not say %q:\n%s", want, r.stdout)
		}
	}
}
