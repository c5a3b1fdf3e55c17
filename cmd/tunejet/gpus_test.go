package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
)

// gpuScript records, in $MARK_DIR/<trial>, when it started and ended (as
// the trainable saw it), its working directory (which runner's) and the
// GPUs and resources it was given.
const gpuScript = `set -eu
log="$MARK_DIR/$TUNEJET_TRIAL_ID"
printf 'start|%s|%s|%s|%s\n' "$(date +%s%N)" "$PWD" "$CUDA_VISIBLE_DEVICES" "$TUNEJET_RESOURCES" >> "$log"
"$TUNEJET_BIN" report step=1 > /dev/null
sleep 0.2
printf 'end|%s\n' "$(date +%s%N)" >> "$log"
`

const gpuExperiment = `name: fakegpus
trainable:
  command: ["/bin/sh", "gpu.sh"]
  resources: {gpu: {config: gpus}}
param_space:
  gpus: {grid_search: [1, 0.5, 0]}
  rep: {grid_search: [1, 2, 3]}
run_config:
  storage_path: %s
`

// TestRunnerProcessesShareFakeGPUs: two runner processes declaring fake
// GPUs (--gpus 2 --gpu-ids g0,g1 and --gpus 1) run an experiment of 1-GPU,
// half-GPU and CPU-only command trials. Every trial ends TERMINATED; each
// saw in CUDA_VISIBLE_DEVICES only devices of its runner (none without a
// GPU); and by the times the trainables recorded, no runner ever ran more
// than its 2 CPUs and no device was booked beyond 1.
func TestRunnerProcessesShareFakeGPUs(t *testing.T) {
	t.Parallel()
	f := newFaultSetup(t, "fakegpus", "[1]", 0, 3, 1, "0")
	dir := t.TempDir()
	writeFile(t, dir, "gpu.sh", gpuScript)
	f.file = writeFile(t, dir, "experiment.yaml", fmt.Sprintf(gpuExperiment, f.storage))
	devices := map[string][]string{"ra": {"g0", "g1"}, "rb": {"0"}}
	for name, args := range map[string][]string{"ra": {"--gpus", "2", "--gpu-ids", "g0,g1"}, "rb": {"--gpus", "1"}} {
		f.runnerDirs[name] = t.TempDir()
		f.runnerProcs[name] = startTunejet(t, "", f.env, append([]string{"runner", "--nats", f.url, "--cpus", "2",
			"--name", name, "--work-dir", f.runnerDirs[name]}, args...)...)
	}
	if r := f.submit(t).wait(t); r.code != 0 {
		t.Fatalf("tunejet run:\n%s", r)
	}
	completed := 0
	for _, ev := range replay(t, f.srv, f.exp) {
		if p, ok := ev.Data.(*events.TrialCompleted); ok {
			completed++
			if p.Status != events.StatusTerminated {
				t.Errorf("trial %s ended %s (%s)", p.TrialID, p.Status, p.Reason)
			}
		}
	}
	if completed != 9 {
		t.Fatalf("%d trials completed; want 9", completed)
	}

	type edge struct {
		at     int64
		runner string
		gpus   []string
		share  float64
		cpu    float64
		sign   float64
	}
	var edges []edge
	files, err := os.ReadDir(f.marks)
	if err != nil || len(files) != 9 {
		t.Fatalf("%d trial records (%v); want 9", len(files), err)
	}
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(f.marks, file.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 {
			t.Fatalf("trial %s recorded %q; want one start and one end (one attempt)", file.Name(), b)
		}
		start, end := strings.Split(lines[0], "|"), strings.Split(lines[1], "|")
		if len(start) != 5 || len(end) != 2 {
			t.Fatalf("trial %s recorded %q", file.Name(), b)
		}
		var held map[string]float64
		if err := json.Unmarshal([]byte(start[4]), &held); err != nil {
			t.Fatalf("trial %s: TUNEJET_RESOURCES %q: %v", file.Name(), start[4], err)
		}
		runner := ""
		for name, wd := range f.runnerDirs {
			if strings.HasPrefix(start[2], wd+string(filepath.Separator)) {
				runner = name
			}
		}
		var gpus []string
		if start[3] != "" {
			gpus = strings.Split(start[3], ",")
		}
		want := 0
		if held["gpu"] > 0 {
			want = 1
		}
		if runner == "" || len(gpus) != want {
			t.Fatalf("trial %s holding %v ran in %s (runner %q) with CUDA_VISIBLE_DEVICES=%q; want %d device(s)", file.Name(), held, start[2], runner, start[3], want)
		}
		for _, g := range gpus {
			if !slices.Contains(devices[runner], g) {
				t.Errorf("trial %s on %s got device %q, not one of %v", file.Name(), runner, g, devices[runner])
			}
		}
		from, err1 := strconv.ParseInt(start[1], 10, 64)
		to, err2 := strconv.ParseInt(end[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("trial %s: times %q, %q", file.Name(), start[1], end[1])
		}
		edges = append(edges, edge{from, runner, gpus, held["gpu"], held["cpu"], 1}, edge{to, runner, gpus, held["gpu"], held["cpu"], -1})
	}
	// Ends before starts at the same instant: a release precedes the next
	// take.
	sort.Slice(edges, func(i, j int) bool {
		return edges[i].at < edges[j].at || (edges[i].at == edges[j].at && edges[i].sign < edges[j].sign)
	})
	cpu, booked := map[string]float64{}, map[string]float64{}
	for _, e := range edges {
		cpu[e.runner] += e.sign * e.cpu
		if cpu[e.runner] > 2 {
			t.Errorf("runner %s ran trials holding %v CPUs at once; it has 2", e.runner, cpu[e.runner])
		}
		for _, g := range e.gpus {
			booked[g] += e.sign * min(e.share, 1)
			if booked[g] > 1+1e-9 {
				t.Errorf("device %s booked %v at once", g, booked[g])
			}
		}
	}
}
