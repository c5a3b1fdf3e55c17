package main_test

import (
	"fmt"
	"os"
	"path/filepath"
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

// stepsScript reports step=1..$STEPS, a checkpoint with each, resuming from
// TUNEJET_CHECKPOINT_DIR; it records its pid per attempt in $MARK_DIR.
const stepsScript = `set -eu
echo $$ > "$MARK_DIR/pid-$TUNEJET_TRIAL_ID-$TUNEJET_ATTEMPT"
step=0
if [ -n "${TUNEJET_CHECKPOINT_DIR:-}" ]; then step=$(cat "$TUNEJET_CHECKPOINT_DIR/step"); fi
while [ "$step" -lt "$STEPS" ]; do
	step=$((step + 1))
	dir=$(mktemp -d)
	echo "$step" > "$dir/step"
	out=$("$TUNEJET_BIN" report --checkpoint "$dir" step=$step)
	rm -rf "$dir"
	if [ "$out" = stop ]; then exit 0; fi
	sleep "$STEP_SLEEP"
done
`

const stepsExperiment = `name: %s
trainable:
  command: ["/bin/sh", "steps.sh"]
param_space:
  x: {grid_search: %s}
run_config:
  storage_path: %s
  failure_config: {max_failures: %d, heartbeat_timeout_s: %v}
`

// faultSetup is a nats-server with a controller and a syncer process, and
// an experiment file of the steps trainable.
type faultSetup struct {
	srv         *bustest.Server
	url         string
	file        string
	storage     string
	marks       string
	env         []string
	exp         string
	controller  *proc
	syncer      *proc
	runnerDirs  map[string]string
	runnerProcs map[string]*proc
}

func newFaultSetup(t *testing.T, exp, grid string, maxFailures int, heartbeat float64, steps int, sleep string) *faultSetup {
	t.Helper()
	srv := bustest.Start(t)
	f := &faultSetup{srv: srv, url: srv.URL(), storage: t.TempDir(), marks: t.TempDir(), exp: exp,
		runnerDirs: map[string]string{}, runnerProcs: map[string]*proc{}}
	dir := t.TempDir()
	writeFile(t, dir, "steps.sh", stepsScript)
	f.file = writeFile(t, dir, "experiment.yaml", fmt.Sprintf(stepsExperiment, exp, grid, f.storage, maxFailures, heartbeat))
	f.env = baseEnv("TUNEJET_BIN="+tunejetBin, "MARK_DIR="+f.marks, "STEPS="+strconv.Itoa(steps), "STEP_SLEEP="+sleep, "TUNEJET_LOG_FORMAT=json")
	f.controller = startTunejet(t, "", f.env, "controller", "--nats", f.url)
	f.syncer = startTunejet(t, "", f.env, "syncer", "--nats", f.url)
	return f
}

func (f *faultSetup) runner(t *testing.T, name string, slots int) *proc {
	t.Helper()
	f.runnerDirs[name] = t.TempDir()
	p := startTunejet(t, "", f.env, "runner", "--nats", f.url, "--slots", strconv.Itoa(slots), "--name", name, "--work-dir", f.runnerDirs[name])
	f.runnerProcs[name] = p
	return p
}

// submit starts `tunejet run --nats` for the experiment.
func (f *faultSetup) submit(t *testing.T) *proc {
	return startTunejet(t, "", baseEnv(), "run", "--nats", f.url, f.file)
}

// count polls the log until cond holds for its events.
func (f *faultSetup) waitFor(t *testing.T, what string, cond func([]*events.Event) bool) []*events.Event {
	t.Helper()
	var evs []*events.Event
	bustest.Eventually(t, 2*time.Minute, what, func() bool {
		evs = replay(t, f.srv, f.exp)
		return cond(evs)
	})
	return evs
}

// trialLog is what the log says about one trial.
type trialLog struct {
	started      []*events.TrialStarted
	checkpoints  map[int][]events.CheckpointRef // by attempt
	firstReport  map[int]map[string]any         // by attempt
	completed    []*events.TrialCompleted
	failed       []*events.TrialFailed
	lastReported map[int]float64 // last training_iteration by attempt
}

func trials(evs []*events.Event) map[string]*trialLog {
	out := map[string]*trialLog{}
	get := func(id string) *trialLog {
		if out[id] == nil {
			out[id] = &trialLog{checkpoints: map[int][]events.CheckpointRef{}, firstReport: map[int]map[string]any{}, lastReported: map[int]float64{}}
		}
		return out[id]
	}
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.TrialStarted:
			get(p.TrialID).started = append(get(p.TrialID).started, p)
		case *events.TrialCheckpointed:
			tl := get(p.TrialID)
			tl.checkpoints[p.Attempt] = append(tl.checkpoints[p.Attempt], p.Checkpoint)
		case *events.TrialReported:
			tl := get(p.TrialID)
			if tl.firstReport[p.Attempt] == nil {
				tl.firstReport[p.Attempt] = p.Results()[0]
			}
			tl.lastReported[p.Attempt], _ = p.Result["training_iteration"].(float64)
		case *events.TrialCompleted:
			get(p.TrialID).completed = append(get(p.TrialID).completed, p)
		case *events.TrialFailed:
			get(p.TrialID).failed = append(get(p.TrialID).failed, p)
		}
	}
	return out
}

func startedOn(evs []*events.Event, runner string) int {
	n := 0
	for _, ev := range evs {
		if p, ok := ev.Data.(*events.TrialStarted); ok && p.Runner == runner {
			n++
		}
	}
	return n
}

// TestKilledRunnerTrialsResumeElsewhere: kill -9 of a runner process
// running 3 trials while a second runner is alive: all 3 end TERMINATED at
// their last iteration, each resumed from its own latest checkpoint.
func TestKilledRunnerTrialsResumeElsewhere(t *testing.T) {
	t.Parallel()
	const steps = 12
	f := newFaultSetup(t, "kill9", "[1, 2, 3]", 1, 1, steps, "0.1")
	a := f.runner(t, "rA", 3)
	run := f.submit(t)
	f.waitFor(t, "3 trials running on rA, each with a checkpoint", func(evs []*events.Event) bool {
		tl := trials(evs)
		n := 0
		for _, x := range tl {
			if len(x.checkpoints[1]) >= 2 {
				n++
			}
		}
		return startedOn(evs, "rA") == 3 && n == 3
	})
	f.runner(t, "rB", 3)
	a.kill() // SIGKILL: no word to anyone
	r := run.wait(t)
	if r.code != 0 || !strings.Contains(r.stdout, "3 TERMINATED, 0 ERROR") {
		t.Fatalf("tunejet run: want 3 TERMINATED:\n%s", r)
	}
	evs := replay(t, f.srv, f.exp)
	for id, tl := range trials(evs) {
		if len(tl.started) != 2 || tl.started[1].Runner != "rB" || tl.started[1].Attempt != 2 {
			t.Errorf("trial %s: started %+v; want attempt 1 on rA then attempt 2 on rB", id, tl.started)
			continue
		}
		// Attempt 1's checkpoints that reached the log before the kill: the
		// retry resumes from the last one.
		ck1 := tl.checkpoints[1]
		last := ck1[len(ck1)-1]
		if tl.started[1].RestoredFrom != last.Name {
			t.Errorf("trial %s: attempt 2 restored from %q, want attempt 1's latest checkpoint %s", id, tl.started[1].RestoredFrom, last.Name)
		}
		first := tl.firstReport[2]
		if first["training_iteration"] != float64(last.Iteration+1) || first["step"] != float64(last.Iteration+1) {
			t.Errorf("trial %s: attempt 2 began at iteration %v, step %v; want %d (after %s)", id, first["training_iteration"], first["step"], last.Iteration+1, last.Name)
		}
		if tl.lastReported[2] != steps {
			t.Errorf("trial %s: ended at iteration %v, want %d", id, tl.lastReported[2], steps)
		}
		ck2 := tl.checkpoints[2]
		if len(ck2) == 0 || ck2[0].Index != last.Index+1 {
			t.Errorf("trial %s: attempt 2's first checkpoint is %+v, want index %d (numbering continues)", id, ck2, last.Index+1)
		}
	}
}

// TestFrozenRunnerIsFenced: a runner frozen (SIGSTOP) past the heartbeat
// timeout loses its trial to another runner; resumed (SIGCONT) it adds
// nothing to the trial and stops its trainable within a heartbeat.
func TestFrozenRunnerIsFenced(t *testing.T) {
	t.Parallel()
	const steps = 30
	f := newFaultSetup(t, "frozen", "[1]", 2, 1, steps, "0.1")
	a := f.runner(t, "rA", 1)
	run := f.submit(t)
	f.waitFor(t, "the trial running on rA with a checkpoint", func(evs []*events.Event) bool {
		for _, tl := range trials(evs) {
			return len(tl.checkpoints[1]) >= 2
		}
		return false
	})
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	f.runner(t, "rB", 1)
	f.waitFor(t, "attempt 2 running on rB", func(evs []*events.Event) bool { return startedOn(evs, "rB") == 1 })
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var id string
	for tid := range trials(replay(t, f.srv, f.exp)) {
		id = tid
	}
	pid := readPid(t, filepath.Join(f.marks, "pid-"+id+"-1"))
	bustest.Eventually(t, time.Minute, "rA to kill its superseded trainable", func() bool {
		return syscall.Kill(pid, 0) != nil
	})
	r := run.wait(t)
	if r.code != 0 || !strings.Contains(r.stdout, "1 TERMINATED, 0 ERROR") {
		t.Fatalf("tunejet run: want 1 TERMINATED:\n%s", r)
	}
	tl := trials(replay(t, f.srv, f.exp))[id]
	if n := len(tl.completed); n != 1 || tl.completed[0].Attempt != 2 {
		t.Errorf("completions %+v; want exactly one, from attempt 2", tl.completed)
	}
	rows := resultLines(t, filepath.Join(f.storage, f.exp, dirOf(t, f, id), "result.json"))
	lastRow := rows[len(rows)-1]
	if lastRow["training_iteration"] != float64(steps) {
		t.Errorf("last result row is iteration %v, want %d", lastRow["training_iteration"], steps)
	}
	st := loadState(t, filepath.Join(f.storage, f.exp))
	if tr := st.Trials[id]; tr.Status != events.StatusTerminated || tr.Attempt != 2 || tr.Iteration != steps {
		t.Errorf("stored state: status %s attempt %d iteration %d; want TERMINATED, 2, %d", tr.Status, tr.Attempt, tr.Iteration, steps)
	}
	if a.exited() {
		t.Errorf("rA exited after SIGCONT:\n%s", a.stderr)
	}
}

// TestPreemptionDoesNotSpendTheBudget: SIGTERM to a runner hands its trial
// back at once; with max_failures 0 the trial still resumes elsewhere from
// its checkpoint and ends TERMINATED with no failure counted.
func TestPreemptionDoesNotSpendTheBudget(t *testing.T) {
	t.Parallel()
	const steps = 20
	f := newFaultSetup(t, "preempt", "[1]", 0, 30, steps, "0.1")
	a := f.runner(t, "rA", 1)
	run := f.submit(t)
	f.waitFor(t, "the trial running on rA with a checkpoint", func(evs []*events.Event) bool {
		for _, tl := range trials(evs) {
			return len(tl.checkpoints[1]) >= 2
		}
		return false
	})
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The heartbeat timeout is 30 s: the trial moves on only because rA
	// handed it back, not because it timed out.
	f.waitFor(t, "rA to hand the trial back", func(evs []*events.Event) bool {
		for _, tl := range trials(evs) {
			return len(tl.failed) == 1 && tl.failed[0].Cause == events.CausePreempted
		}
		return false
	})
	if r := a.wait(t); r.code != 0 {
		t.Errorf("rA after SIGTERM:\n%s", r)
	}
	f.runner(t, "rB", 1)
	r := run.wait(t)
	if r.code != 0 || !strings.Contains(r.stdout, "1 TERMINATED, 0 ERROR") {
		t.Fatalf("tunejet run: want 1 TERMINATED:\n%s", r)
	}
	for id, tl := range trials(replay(t, f.srv, f.exp)) {
		if tl.failed[0].Counted {
			t.Errorf("trial %s: the preemption was counted against max_failures", id)
		}
		if len(tl.started) != 2 || tl.started[1].Runner != "rB" || tl.started[1].RestoredFrom == "" {
			t.Errorf("trial %s: started %+v; want attempt 2 on rB resuming from a checkpoint", id, tl.started)
		}
		st := loadState(t, filepath.Join(f.storage, f.exp))
		if tr := st.Trials[id]; tr.NumFailures != 0 || tr.Status != events.StatusTerminated {
			t.Errorf("trial %s: %d failures, status %s; want 0, TERMINATED", id, tr.NumFailures, tr.Status)
		}
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func dirOf(t *testing.T, f *faultSetup, id string) string {
	t.Helper()
	for _, ev := range replay(t, f.srv, f.exp) {
		if p, ok := ev.Data.(*events.TrialCreated); ok && p.TrialID == id {
			return p.DirName
		}
	}
	t.Fatalf("trial %s was never created", id)
	return ""
}

// loadState reads the newest experiment state file under dir.
func loadState(t *testing.T, dir string) *state.Experiment {
	t.Helper()
	d := &storage.Dir{Root: dir}
	name, err := d.NewestState()
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestLastRunnerDiesSilently: with max_failures 0, the only runner is
// killed mid-trial. Nobody is left to say so; JetStream's max-deliveries
// advisory, captured before the runner started, lets the controller end
// the trial ERROR, and the dead work leaves the log.
func TestLastRunnerDiesSilently(t *testing.T) {
	t.Parallel()
	f := newFaultSetup(t, "silent", "[1]", 0, 1, 100, "0.1")
	a := f.runner(t, "rA", 1)
	run := f.submit(t)
	f.waitFor(t, "the trial running on rA", func(evs []*events.Event) bool { return startedOn(evs, "rA") == 1 })
	a.kill()
	r := run.wait(t)
	if r.code != 0 || !strings.Contains(r.stdout, "0 TERMINATED, 1 ERROR") {
		t.Fatalf("tunejet run: want the trial ERROR:\n%s", r)
	}
	evs := replay(t, f.srv, f.exp)
	for id, tl := range trials(evs) {
		if len(tl.failed) != 1 || tl.failed[0].Cause != events.CauseLost || !tl.failed[0].Final {
			t.Errorf("trial %s: failures %+v; want one final failure with cause lost", id, tl.failed)
		}
	}
	for _, ev := range evs {
		if _, ok := ev.Data.(*events.TrialScheduled); ok {
			t.Errorf("the dead work (seq %d) is still in the log", ev.Seq)
		}
	}
	st := loadState(t, filepath.Join(f.storage, f.exp))
	for _, tr := range st.Trials {
		b, err := os.ReadFile(filepath.Join(f.storage, f.exp, tr.DirName, "error.txt"))
		if err != nil || !strings.Contains(string(b), "Failure # 1") || !strings.Contains(string(b), "stopped heartbeating") {
			t.Errorf("error.txt: %q (%v); want Ray's Failure # 1 entry naming the lost heartbeat", b, err)
		}
	}
}

// TestStatusShowsRunnersAndExperiments: tunejet status lists the live
// runners with their slots and trials, and the experiments.
func TestStatusShowsRunnersAndExperiments(t *testing.T) {
	t.Parallel()
	f := newFaultSetup(t, "status", "[1, 2]", 0, 3, 100, "0.1")
	f.runner(t, "rA", 3)
	run := f.submit(t)
	f.waitFor(t, "both trials running", func(evs []*events.Event) bool { return startedOn(evs, "rA") == 2 })
	var out result
	bustest.Eventually(t, time.Minute, "status to list rA with its 2 trials", func() bool {
		out = tunejet(t, "", baseEnv(), "status", "--nats", f.url)
		return out.code == 0 && strings.Contains(out.stdout, "rA") && strings.Contains(out.stdout, "2/3")
	})
	if !strings.Contains(out.stdout, "status") || !strings.Contains(out.stdout, "RUNNING") {
		t.Errorf("status does not show the running experiment:\n%s", out)
	}
	run.kill()
	if r := tunejet(t, "", baseEnv(), "status"); r.code == 0 || !strings.Contains(r.stderr, "--nats") {
		t.Errorf("status without --nats: want an error naming --nats:\n%s", r)
	}
}

// TestRunFailFastRaise: fail_fast "raise" makes tunejet run exit non-zero
// with the trainable's error.
func TestRunFailFastRaise(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "fail.sh", "echo 'fatal: the cheese ran out' >&2\nexit 3\n")
	file := writeFile(t, dir, "experiment.yaml", fmt.Sprintf(`name: raise
trainable: {command: ["/bin/sh", "fail.sh"]}
param_space: {x: 1}
run_config:
  storage_path: %s
  failure_config: {fail_fast: raise}
`, t.TempDir()))
	r := tunejet(t, "", baseEnv(), "run", "--store-dir", t.TempDir(), file)
	if r.code != 1 || !strings.Contains(r.stderr, "the cheese ran out") {
		t.Fatalf("want exit 1 with the trainable's error:\n%s", r)
	}
}
