package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// twoRunnersScript is the trainable: it marks that its runner ran a trial,
// waits (bounded) until both runners have done so, so that the work is
// certain to be shared, then reports loss=1..3.
const twoRunnersScript = `set -eu
touch "$MARK_DIR/ran-$TEST_RUNNER"
n=0
while [ ! -e "$MARK_DIR/ran-rA" ] || [ ! -e "$MARK_DIR/ran-rB" ]; do
	n=$((n + 1))
	if [ "$n" -gt 1200 ]; then
		echo "runner $TEST_RUNNER: the other runner never started a trial" >&2
		exit 1
	fi
	sleep 0.05
done
for i in 1 2 3; do
	out=$("$TUNEJET_BIN" report loss=$i step=$i)
	if [ "$out" = stop ]; then
		exit 0
	fi
done
`

const twoRunnersExperiment = `name: two_runners
trainable:
  command: ["/bin/sh", "train.sh"]
param_space:
  x: {grid_search: [1, 2, 3, 4, 5, 6]}
tune_config:
  num_samples: 2
  metric: loss
  mode: min
run_config:
  storage_path: %s
`

// TestTwoRunnerProcessesShareOneExperiment runs the services as separate
// processes against one nats-server — a controller, a syncer and two
// runners — submits an experiment with `tunejet run --nats`, and checks in
// the event log and in storage that every trial ran exactly once, on one of
// the two runners, and that both runners took part.
func TestTwoRunnerProcessesShareOneExperiment(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	url := srv.URL()
	expDir, storage, marks := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, expDir, "train.sh", twoRunnersScript)
	file := writeFile(t, expDir, "experiment.yaml", fmt.Sprintf(twoRunnersExperiment, storage))

	env := baseEnv("TUNEJET_BIN="+tunejetBin, "MARK_DIR="+marks, "TUNEJET_LOG_FORMAT=json")
	services := []*proc{
		startTunejet(t, "", env, "controller", "--nats", url),
		startTunejet(t, "", env, "syncer", "--nats", url),
	}
	workDirs := map[string]string{"rA": t.TempDir(), "rB": t.TempDir()}
	for _, name := range []string{"rA", "rB"} {
		services = append(services, startTunejet(t, "", append(env, "TEST_RUNNER="+name),
			"runner", "--nats", url, "--slots", "2", "--name", name, "--work-dir", workDirs[name]))
	}

	run := tunejet(t, "", baseEnv(), "run", "--nats", url, file)
	for _, s := range services {
		if s.exited() {
			t.Errorf("service %q exited during the experiment:\n%s", s.name, s.stderr)
		}
	}
	if run.code != 0 {
		t.Fatalf("tunejet run --nats:\n%s", run)
	}
	if !strings.Contains(run.stdout, "Experiment finished: 12 trials, 12 TERMINATED, 0 ERROR.") {
		t.Errorf("tunejet run --nats: no summary with 12 TERMINATED trials:\n%s", run)
	}

	evs := replay(t, srv, "two_runners")
	created := map[string]*events.TrialCreated{}
	started := map[string][]*events.TrialStarted{}
	completed := map[string][]*events.TrialCompleted{}
	byRunner := map[string]int{}
	experimentCompleted := false
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.TrialCreated:
			created[p.TrialID] = p
		case *events.TrialStarted:
			started[p.TrialID] = append(started[p.TrialID], p)
			byRunner[p.Runner]++
		case *events.TrialCompleted:
			completed[p.TrialID] = append(completed[p.TrialID], p)
		case *events.TrialFailed:
			t.Errorf("trial %s attempt %d failed (cause %s): %s", p.TrialID, p.Attempt, p.Cause, p.Error)
		case *events.ExperimentCompleted:
			experimentCompleted = true
		}
	}
	if !experimentCompleted {
		t.Errorf("the log holds no experiment.completed")
	}
	if len(created) != 12 {
		t.Errorf("%d trials created, want 12 (6 grid values x 2 samples)", len(created))
	}
	for id, tc := range created {
		st := started[id]
		if len(st) != 1 || st[0].Attempt != 1 {
			var desc []string
			for _, s := range st {
				desc = append(desc, fmt.Sprintf("attempt %d on %s", s.Attempt, s.Runner))
			}
			t.Errorf("trial %s: started %d times (%s), want once, attempt 1", id, len(st), strings.Join(desc, ", "))
		} else if wd, ok := workDirs[st[0].Runner]; !ok {
			t.Errorf("trial %s ran on runner %q, want rA or rB", id, st[0].Runner)
		} else if _, err := os.Stat(filepath.Join(wd, "two_runners", tc.DirName)); err != nil {
			t.Errorf("trial %s ran on %s, but its --work-dir has no trial directory: %v", id, st[0].Runner, err)
		}
		if c := completed[id]; len(c) != 1 || c[0].Status != events.StatusTerminated {
			t.Errorf("trial %s: completions %+v, want one TERMINATED", id, c)
		}

		rows := resultLines(t, filepath.Join(storage, "two_runners", tc.DirName, "result.json"))
		if len(rows) != 3 {
			t.Errorf("trial %s: result.json has %d lines, want the 3 reported", id, len(rows))
			continue
		}
		for i, row := range rows {
			want := float64(i + 1)
			if row["loss"] != want || row["step"] != want || row["training_iteration"] != want || row["trial_id"] != id {
				t.Errorf("trial %s: result.json line %d = loss %v step %v training_iteration %v trial_id %v, want loss, step and iteration %v of trial %s",
					id, i+1, row["loss"], row["step"], row["training_iteration"], row["trial_id"], want, id)
			}
		}
	}
	for id := range started {
		if created[id] == nil {
			t.Errorf("trial.started for trial %s, which was never created", id)
		}
	}
	t.Logf("trials started per runner: %v", byRunner)
	if byRunner["rA"] == 0 || byRunner["rB"] == 0 {
		t.Errorf("trials started per runner: %v; want both rA and rB to run at least one", byRunner)
	}
}

// replay returns every event of experiment exp in log order.
func replay(t *testing.T, srv *bustest.Server, exp string) []*events.Event {
	t.Helper()
	return bustest.Log(t, srv.Bus("test"), exp)
}
