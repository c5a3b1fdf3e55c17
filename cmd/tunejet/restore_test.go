package main_test

// Process tests of experiment-level fault tolerance (issue 5): `tunejet
// run` on the embedded stack killed with SIGKILL or interrupted with
// SIGINT, then `tunejet restore`, `tunejet can-restore` and `tunejet run
// --resume auto`, with the JetStream store kept or deleted.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// heldScript reports step=1..$STEPS (x=1: 1..2) with a checkpoint each,
// resuming from TUNEJET_CHECKPOINT_DIR. Until $MARK_DIR/release exists, a
// trial with more steps to go after step 2 or later waits there (the first
// run holds at step 2, a resumed one at the step after its checkpoint). Each start
// appends "<trial id> <attempt> <fresh|resumed>" to $MARK_DIR/starts and
// leaves its pid (its process group) in $MARK_DIR/pid-<trial>-<attempt>.
const heldScript = `set -eu
echo $$ > "$MARK_DIR/.pid-$TUNEJET_TRIAL_ID-$TUNEJET_ATTEMPT"
mv "$MARK_DIR/.pid-$TUNEJET_TRIAL_ID-$TUNEJET_ATTEMPT" "$MARK_DIR/pid-$TUNEJET_TRIAL_ID-$TUNEJET_ATTEMPT"  # whole, never seen empty
how=fresh
step=0
if [ -n "${TUNEJET_CHECKPOINT_DIR:-}" ]; then how=resumed; step=$(cat "$TUNEJET_CHECKPOINT_DIR/step"); fi
echo "$TUNEJET_TRIAL_ID $TUNEJET_ATTEMPT $how" >> "$MARK_DIR/starts"
last=$STEPS
case "$TUNEJET_CONFIG" in *'"x":1'*) last=2 ;; esac
while [ "$step" -lt "$last" ]; do
	step=$((step + 1))
	dir=$(mktemp -d)
	echo "$step" > "$dir/step"
	out=$("$TUNEJET_BIN" report --checkpoint "$dir" step=$step)
	rm -rf "$dir"
	if [ "$out" = stop ]; then exit 0; fi
	if [ "$step" -ge 2 ] && [ "$step" -lt "$last" ]; then
		while [ ! -e "$MARK_DIR/release" ]; do sleep 0.05; done
	fi
done
`

// heldExperiment: 4 grid values × 2 samples, at most 3 at once. Held, the
// first run finishes trial 0 (x=1) and then holds 3 trials at step 2, so
// it never creates the last 4.
const heldExperiment = `name: %s
trainable:
  name: held
  command: ["/bin/sh", "held.sh"]
param_space:
  x: {grid_search: [1, 2, 3, 4]}
tune_config:
  num_samples: 2
  max_concurrent_trials: 3
run_config:
  failure_config: {max_failures: 0}
  sync_config: {sync_period: 0.2}
`

const heldSteps = 4

// heldSetup is an experiment file of the held trainable with its marks,
// storage and JetStream store in temp dirs.
type heldSetup struct {
	exp, file, marks, storage, store string
}

func newHeldSetup(t *testing.T, exp string) *heldSetup {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "held.sh", heldScript)
	h := &heldSetup{exp: exp, file: writeFile(t, dir, "experiment.yaml", fmt.Sprintf(heldExperiment, exp)),
		marks: t.TempDir(), storage: t.TempDir(), store: t.TempDir()}
	t.Cleanup(func() { h.killTrainables(t) })
	return h
}

func (h *heldSetup) expDir() string { return filepath.Join(h.storage, h.exp) }

func (h *heldSetup) env(t *testing.T) []string {
	return embeddedEnv(t, "MARK_DIR="+h.marks, "STEPS="+strconv.Itoa(heldSteps))
}

// run starts `tunejet run FILE` on the embedded stack with extra flags.
func (h *heldSetup) run(t *testing.T, extra ...string) *proc {
	t.Helper()
	args := append([]string{"run", h.file, "--store-dir", h.store, "--storage-path", h.storage, "--slots", "4"}, extra...)
	return startTunejet(t, "", h.env(t), args...)
}

// release lets held trials go on past step 2.
func (h *heldSetup) release(t *testing.T) {
	t.Helper()
	writeFile(t, h.marks, "release", "")
}

// starts returns the starts the trainable recorded, by trial id:
// "<attempt> <fresh|resumed>".
func (h *heldSetup) starts(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.marks, "starts"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if id, rest, ok := strings.Cut(line, " "); ok {
			out[id] = append(out[id], rest)
		}
	}
	return out
}

// killTrainables kills the process groups of the trainables still alive,
// as a crash of their host would: a SIGKILL to tunejet orphans them.
func (h *heldSetup) killTrainables(t *testing.T) {
	t.Helper()
	pids, _ := filepath.Glob(filepath.Join(h.marks, "pid-*"))
	for _, p := range pids {
		pid := readPid(t, p)
		if alive(pid) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	for _, p := range pids {
		pid := readPid(t, p)
		bustest.Eventually(t, time.Minute, fmt.Sprintf("trainable %d to end", pid), func() bool { return !alive(pid) })
	}
}

// snapshotIn reads the newest experiment state stored under dir, if any.
func snapshotIn(t *testing.T, dir string) (*state.Experiment, bool) {
	t.Helper()
	d := &storage.Dir{Root: dir}
	name, err := d.NewestState()
	if err != nil {
		return nil, false
	}
	b, err := d.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Load(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return st, true
}

// waitHeld waits until storage shows the first run held: trial 0 (x=1)
// TERMINATED and 3 trials RUNNING, each with its second checkpoint
// persisted.
func (h *heldSetup) waitHeld(t *testing.T, p *proc) *state.Experiment {
	t.Helper()
	var st *state.Experiment
	bustest.Eventually(t, time.Minute, "1 trial TERMINATED and 3 held with checkpoint_000001 persisted", func() bool {
		if p.exited() {
			t.Fatalf("tunejet %s exited before the test stopped it:\n%s\n%s", p.name, p.stdout, p.stderr)
		}
		var ok bool
		if st, ok = snapshotIn(t, h.expDir()); !ok {
			return false
		}
		held, done := 0, 0
		for _, tr := range st.Trials {
			switch {
			case tr.Status == events.StatusTerminated:
				done++
			case tr.Status == events.StatusRunning && tr.Persisted["checkpoint_000001"]:
				held++
			}
		}
		return len(st.Trials) == 4 && done == 1 && held == 3
	})
	return st
}

// storeLog reads an experiment's events from a JetStream store directory
// no process is using.
func storeLog(t *testing.T, storeDir, exp string) []*events.Event {
	t.Helper()
	e, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: storeDir})
	if err != nil {
		t.Fatalf("open the JetStream store %s: %v", storeDir, err)
	}
	defer e.Shutdown()
	b, err := e.Dial("test", "test", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	return bustest.Log(t, b, exp)
}

// restoredEvent returns the last experiment.restored and its sequence.
func restoredEvent(t *testing.T, evs []*events.Event) (*events.ExperimentRestored, uint64) {
	t.Helper()
	var r *events.ExperimentRestored
	var seq uint64
	for _, ev := range evs {
		if p, ok := ev.Data.(*events.ExperimentRestored); ok {
			r, seq = p, ev.Seq
		}
	}
	if r == nil {
		t.Fatal("the log holds no experiment.restored")
	}
	return r, seq
}

// checkRestoredRun checks the end of a held experiment restored after a
// SIGKILL: before is the state it was restored from. Finished trials never
// started again; each unfinished one started once more, from its latest
// checkpoint in before, and went on from the iteration after it; and the
// totals are the file's.
func (h *heldSetup) checkRestoredRun(t *testing.T, r result, evs []*events.Event, before *state.Experiment, source string) {
	t.Helper()
	if r.code != 0 || !strings.Contains(r.stdout, "Experiment finished: 8 trials, 8 TERMINATED, 0 ERROR.") {
		t.Fatalf("tunejet restore: want the experiment file's 8 trials TERMINATED:\n%s", r)
	}
	restored, seq := restoredEvent(t, evs)
	if restored.Source != source {
		t.Errorf("restored from %q, want %q", restored.Source, source)
	}
	after := map[string][]*events.TrialStarted{}
	firstReport := map[string]map[string]any{}
	created := map[string]int{}
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.TrialCreated:
			created[p.TrialID]++
		case *events.TrialStarted:
			if ev.Seq > seq {
				after[p.TrialID] = append(after[p.TrialID], p)
			}
		case *events.TrialReported:
			if ev.Seq > seq && firstReport[p.TrialID] == nil {
				firstReport[p.TrialID] = p.Results()[0]
			}
		}
	}
	starts := h.starts(t)
	for _, tr := range before.TrialList() {
		switch tr.Status {
		case events.StatusTerminated:
			if len(after[tr.ID]) != 0 || len(starts[tr.ID]) != 1 {
				t.Errorf("finished trial %s started again: %+v (trainable starts %v)", tr.ID, after[tr.ID], starts[tr.ID])
			}
		default:
			c := tr.LatestCheckpoint()
			if c == nil {
				t.Errorf("trial %s was %s with no checkpoint; want the held trials' checkpoints", tr.ID, tr.Status)
				continue
			}
			if s := after[tr.ID]; len(s) != 1 || s[0].RestoredFrom != c.Name {
				t.Errorf("trial %s (%s) after the restore: started %+v; want once, restored_from %s", tr.ID, tr.Status, s, c.Name)
			}
			if got := firstReport[tr.ID]["training_iteration"]; got != float64(c.Iteration+1) {
				t.Errorf("trial %s: first iteration after the restore %v, want %d (after %s)", tr.ID, got, c.Iteration+1, c.Name)
			}
			if s := starts[tr.ID]; len(s) != 2 || !strings.HasSuffix(s[1], " resumed") {
				t.Errorf("trial %s: trainable starts %v; want a fresh one, then one resumed from a checkpoint", tr.ID, s)
			}
		}
	}
	// The trials of the state restored from, and those the restored run
	// created: no trial twice, 8 in all.
	all := map[string]bool{}
	for id := range before.Trials {
		all[id] = true
	}
	for _, ev := range evs {
		if p, ok := ev.Data.(*events.TrialCreated); ok && ev.Seq > seq {
			if all[p.TrialID] {
				t.Errorf("the restored run created trial %s again", p.TrialID)
			}
			all[p.TrialID] = true
		}
	}
	if len(all) != 8 {
		t.Errorf("%d distinct trials, want the file's 8: %v", len(all), all)
	}
	for id, n := range created {
		if n != 1 {
			t.Errorf("trial %s created %d times in the log", id, n)
		}
	}
	got := resultsJSON(t, h.expDir())
	perX := map[float64]int{}
	for _, tr := range got.Trials {
		x := tr.Config["x"].(float64)
		perX[x]++
		want := float64(heldSteps)
		if x == 1 {
			want = 2
		}
		if tr.Status != events.StatusTerminated || tr.Metrics["training_iteration"] != want || tr.Metrics["step"] != want {
			t.Errorf("trial %s (x=%v): %s at iteration %v step %v; want TERMINATED at %v", tr.TrialID, x, tr.Status, tr.Metrics["training_iteration"], tr.Metrics["step"], want)
		}
	}
	if len(got.Trials) != 8 || perX[1] != 2 || perX[2] != 2 || perX[3] != 2 || perX[4] != 2 {
		t.Errorf("stored results: %d trials, per x %v; want 8, 2 of each", len(got.Trials), perX)
	}
}

// TestKill9ThenRestoreFromTheLog: `tunejet run` on the embedded stack is
// killed with SIGKILL while one trial has finished and three hold
// checkpoints; `tunejet restore PATH --store-dir <same>` restores it from
// the log: the finished trial is not rerun, the three resume from their
// checkpoints, and the experiment ends with the file's 8 trials.
func TestKill9ThenRestoreFromTheLog(t *testing.T) {
	t.Parallel()
	h := newHeldSetup(t, "kill9_log")
	p := h.run(t)
	h.waitHeld(t, p)
	p.kill()
	h.killTrainables(t)
	before := foldEvents(t, storeLog(t, h.store, h.exp), h.exp)
	if before.Status != state.ExperimentRunning {
		t.Fatalf("the log says %s after SIGKILL; want RUNNING (nobody recorded anything)", before.Status)
	}
	h.release(t)
	env := append(h.env(t), "TUNEJET_LOG_LEVEL=info", "TUNEJET_LOG_FORMAT=json")
	r := tunejet(t, "", env, "restore", h.expDir(), "--store-dir", h.store, "--slots", "4")
	h.checkRestoredRun(t, r, storeLog(t, h.store, h.exp), before, "log")
	// The embedded controller starts once the restorer has answered, so it
	// folds from the restored state, not the whole log before it.
	if !strings.Contains(r.stderr, `"message":"folding from the last restore"`) {
		t.Errorf("the restore's controller did not fold from the restored state; its log:\n%s", r.stderr)
	}
}

// TestKill9AndStoreDeletedRestoresFromTheSnapshot: as above, and the
// JetStream store is deleted too. `tunejet restore PATH EXPERIMENT_FILE
// --store-dir <fresh>` restores from the newest stored snapshot, running
// the file's trainable; the run was killed after a sync, so the snapshot's
// checkpoints are the latest the log had: the trials resume from exactly
// those, persisted in storage.
func TestKill9AndStoreDeletedRestoresFromTheSnapshot(t *testing.T) {
	t.Parallel()
	h := newHeldSetup(t, "kill9_snapshot")
	p := h.run(t)
	h.waitHeld(t, p)
	p.kill()
	h.killTrainables(t)
	logged := foldEvents(t, storeLog(t, h.store, h.exp), h.exp)
	if err := os.RemoveAll(h.store); err != nil {
		t.Fatal(err)
	}
	before, ok := snapshotIn(t, h.expDir())
	if !ok {
		t.Fatal("no experiment state in storage after the kill")
	}
	for _, tr := range before.TrialList() {
		if tr.Finished() {
			continue
		}
		c, lc := tr.LatestCheckpoint(), logged.Trials[tr.ID].LatestCheckpoint()
		if c == nil || lc == nil || c.Name != lc.Name || !tr.Persisted[c.Name] {
			t.Fatalf("trial %s: the snapshot's latest checkpoint %+v (persisted %v), the log's %+v; want the same, persisted", tr.ID, c, tr.Persisted, lc)
		}
		if _, err := os.Stat(filepath.Join(h.expDir(), tr.DirName, c.Name, "step")); err != nil {
			t.Fatalf("trial %s: %s is not in storage: %v", tr.ID, c.Name, err)
		}
	}
	fresh := t.TempDir()
	can := tunejet(t, "", h.env(t), "can-restore", h.expDir(), "--store-dir", fresh)
	if can.code != 0 || !strings.Contains(can.stdout, "from experiment_state-") {
		t.Errorf("can-restore with the store gone: want exit 0 naming the state file:\n%s", can)
	}
	h.release(t)
	r := tunejet(t, "", h.env(t), "restore", h.expDir(), h.file, "--store-dir", fresh, "--slots", "4")
	h.checkRestoredRun(t, r, storeLog(t, fresh, h.exp), before, "snapshot")
}

// foldEvents folds a log that holds no experiment.restored.
func foldEvents(t *testing.T, evs []*events.Event, exp string) *state.Experiment {
	t.Helper()
	st := state.New(exp)
	for _, ev := range evs {
		if _, ok := ev.Data.(*events.ExperimentRestored); ok {
			t.Fatalf("foldEvents: seq %d is an experiment.restored", ev.Seq)
		}
		st, _, _ = state.Fold(t.Context(), st, ev, nil)
	}
	return st
}

// quickExperiment finishes two trials at once.
const quickExperiment = `name: quick
trainable:
  name: quick
  command: ["/bin/sh", "-c", "\"$TUNEJET_BIN\" report loss=1"]
param_space:
  x: {grid_search: [1, 2]}
run_config:
  sync_config: {sync_period: 0.2}
`

// TestRestoreValidationFromTheCLI: can-restore and restore of a finished
// experiment, of a path with no experiment, and of state files that were
// truncated, corrupted or edited by hand, with no log to fall back on.
func TestRestoreValidationFromTheCLI(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "exp.yaml", quickExperiment)
	store, storagePath := t.TempDir(), t.TempDir()
	env := embeddedEnv(t)
	if r := tunejet(t, "", env, "run", file, "--store-dir", store, "--storage-path", storagePath); r.code != 0 {
		t.Fatalf("tunejet run:\n%s", r)
	}
	expDir := filepath.Join(storagePath, "quick")
	stateFile, err := (&storage.Dir{Root: expDir}).NewestState()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("can-restore a finished experiment", func(t *testing.T) {
		for _, tc := range []struct{ store, from string }{
			{store, "from the event log"},
			{t.TempDir(), "from " + stateFile},
		} {
			r := tunejet(t, "", env, "can-restore", expDir, "--store-dir", tc.store)
			want := fmt.Sprintf("can restore %s: 2 TERMINATED, %s\n", expDir, tc.from)
			if r.code != 0 || r.stdout != want {
				t.Errorf("can-restore: want exit 0 and the one line %q:\n%s", want, r)
			}
		}
	})

	t.Run("no experiment", func(t *testing.T) {
		missing := filepath.Join(storagePath, "never_ran")
		can := tunejet(t, "", env, "can-restore", missing, "--store-dir", store)
		if can.code != 1 || !strings.Contains(can.stderr, "no experiment to restore at "+missing) || can.stdout != "" {
			t.Errorf("can-restore %s: want exit 1 with the reason:\n%s", missing, can)
		}
		r := tunejet(t, "", env, "restore", missing, "--store-dir", store)
		if r.code != 1 || !strings.Contains(r.stderr, missing) || strings.Contains(r.stdout, "Experiment finished") {
			t.Errorf("restore %s: want exit 1 naming the path, never a fresh start:\n%s", missing, r)
		}
		if states, _ := filepath.Glob(filepath.Join(missing, "experiment_state-*.json")); len(states) != 0 {
			t.Errorf("restore of nothing wrote %v", states)
		}
	})

	good, err := os.ReadFile(filepath.Join(expDir, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(good), `"status":"TERMINATED"`, `"status":"PENDING"`, 1)
	if edited == string(good) {
		t.Fatalf("%s holds no TERMINATED status to edit:\n%s", stateFile, good)
	}
	for _, tc := range []struct {
		name, content, problem string
	}{
		{"truncated", string(good[:len(good)/2]), "not valid JSON"},
		{"corrupt", "\x00\x17garbage" + string(good[10:]), "not valid JSON"},
		{"edited by hand", edited, "checksum mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "quick")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			bad := writeFile(t, dir, stateFile, tc.content)
			fresh := t.TempDir() // no log: the state file is all there is
			r := tunejet(t, "", env, "restore", dir, "--store-dir", fresh)
			if r.code != 1 || !strings.Contains(r.stderr, bad) || !strings.Contains(r.stderr, tc.problem) {
				t.Errorf("restore: want exit 1 naming %s and %q:\n%s", bad, tc.problem, r)
			}
			can := tunejet(t, "", env, "can-restore", dir, "--store-dir", fresh)
			if can.code != 1 || !strings.Contains(can.stderr, bad) || !strings.Contains(can.stderr, tc.problem) {
				t.Errorf("can-restore: want exit 1 naming %s and %q:\n%s", bad, tc.problem, can)
			}
			after, _ := filepath.Glob(filepath.Join(dir, "*"))
			if b, err := os.ReadFile(bad); err != nil || string(b) != tc.content || len(after) != 1 {
				t.Errorf("the experiment folder changed: %v (state file intact: %v)", after, err == nil && string(b) == tc.content)
			}
		})
	}
}

// TestRestoreFallsBackFromATruncatedNewestStateFile: with no log, the
// newest state file cut short and an older intact one beside it,
// can-restore and restore read the older one and say which they skipped
// and why.
func TestRestoreFallsBackFromATruncatedNewestStateFile(t *testing.T) {
	t.Parallel()
	q := runQuick(t)
	file, env, expDir, newest, good := q.file, q.env, q.dir, q.state, q.data
	older := storage.StateFileName("2000-01-01_00-00-00")
	writeFile(t, expDir, older, string(good))
	truncated := writeFile(t, expDir, newest, string(good[:len(good)/2]))

	fresh := t.TempDir() // no log: the state files are all there is
	can := tunejet(t, "", env, "can-restore", expDir, "--store-dir", fresh)
	if can.code != 0 || !strings.Contains(can.stdout, "from "+older) || !strings.Contains(can.stderr, "Skipped "+newest) || !strings.Contains(can.stderr, "not valid JSON") {
		t.Errorf("can-restore: want exit 0 from %s, saying it skipped %s as not valid JSON:\n%s", older, newest, can)
	}
	r := tunejet(t, "", env, "restore", expDir, file, "--store-dir", fresh)
	if r.code != 0 || !strings.Contains(r.stdout, "Skipped "+newest) || !strings.Contains(r.stdout, "not valid JSON") || !strings.Contains(r.stdout, older) {
		t.Errorf("restore: want exit 0 from %s, saying it skipped %s as not valid JSON:\n%s", older, truncated, r)
	}
}

const interruptedMessage = "Experiment has been interrupted, but the most recent state was saved."

// interrupt sends SIGINT to p and checks Ray's message with the exact
// restore command and exit status 130.
func interrupt(t *testing.T, p *proc, expDir string) {
	t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 130 || !strings.Contains(r.stderr, interruptedMessage+"\n") || !strings.Contains(r.stderr, "\n  tunejet restore "+expDir+"\n") {
		t.Errorf("tunejet %s after Ctrl-C: want exit 130 with %q and `tunejet restore %s`:\n%s", p.name, interruptedMessage, expDir, r)
	}
	if strings.Contains(r.stdout, "Experiment finished") {
		t.Errorf("tunejet %s printed a finished summary after Ctrl-C:\n%s", p.name, r)
	}
}

// TestInterruptRestoreAndAutoResume: Ctrl-C on `tunejet run` and on
// `tunejet restore` prints Ray's message with the exact restore command
// and exits 130; running the named experiment again is refused, naming
// both ways out; `tunejet run --resume auto` restores the interrupted
// experiment to the end, and starts a new name fresh.
func TestInterruptRestoreAndAutoResume(t *testing.T) {
	t.Parallel()
	h := newHeldSetup(t, "auto")
	p := h.run(t)
	held := h.waitHeld(t, p)
	interrupt(t, p, h.expDir())
	if st, _ := snapshotIn(t, h.expDir()); st.Status != state.ExperimentInterrupted {
		t.Errorf("stored status %s after Ctrl-C, want %s", st.Status, state.ExperimentInterrupted)
	}

	again := h.run(t).wait(t)
	if again.code != 1 || !strings.Contains(again.stderr, "--resume auto") || !strings.Contains(again.stderr, "tunejet restore "+h.expDir()) {
		t.Errorf("running the interrupted experiment again: want exit 1 naming `--resume auto` and `tunejet restore %s`:\n%s", h.expDir(), again)
	}

	// Restore without releasing: the held trials resume and hold again.
	rp := startTunejet(t, "", h.env(t), "restore", h.expDir(), "--store-dir", h.store, "--slots", "4")
	bustest.Eventually(t, time.Minute, "the held trials to resume under tunejet restore", func() bool {
		if rp.exited() {
			t.Fatalf("tunejet restore exited before Ctrl-C:\n%s\n%s", rp.stdout, rp.stderr)
		}
		starts := h.starts(t)
		for _, tr := range held.Trials {
			if !tr.Finished() && len(starts[tr.ID]) < 2 {
				return false
			}
		}
		return true
	})
	interrupt(t, rp, h.expDir())

	h.release(t)
	auto := h.run(t, "--resume", "auto").wait(t)
	if auto.code != 0 || !strings.Contains(auto.stderr, "Restoring "+h.expDir()) ||
		!strings.HasSuffix(strings.TrimSpace(auto.stdout), "Experiment finished: 8 trials, 8 TERMINATED, 0 ERROR.\nResults: "+h.expDir()) {
		t.Errorf("run --resume auto of the interrupted experiment: want it restored and all 8 trials TERMINATED:\n%s", auto)
	}
	starts := h.starts(t)
	for _, tr := range held.Trials {
		if tr.Finished() {
			if len(starts[tr.ID]) != 1 {
				t.Errorf("finished trial %s started %v", tr.ID, starts[tr.ID])
			}
		} else if s := starts[tr.ID]; len(s) != 3 || !strings.HasSuffix(s[2], " resumed") {
			t.Errorf("held trial %s: starts %v; want the first run's, the restore's and --resume auto's, resumed", tr.ID, s)
		}
	}

	done := h.run(t).wait(t)
	if done.code != 1 || !strings.Contains(done.stderr, "--resume auto") || !strings.Contains(done.stderr, "tunejet restore "+h.expDir()) {
		t.Errorf("running the finished experiment again: want exit 1 naming both ways out:\n%s", done)
	}

	before := len(h.starts(t))
	fresh := h.run(t, "--resume", "auto", "--name", "auto_fresh").wait(t)
	if fresh.code != 0 || strings.Contains(fresh.stderr, "Restoring") || !strings.Contains(fresh.stdout, "Experiment finished: 8 trials, 8 TERMINATED, 0 ERROR.") {
		t.Errorf("run --resume auto of a new name: want a fresh run of 8 trials:\n%s", fresh)
	}
	starts = h.starts(t)
	if len(starts)-before != 8 {
		t.Errorf("run --resume auto of a new name started %d new trials, want 8", len(starts)-before)
	}
	for id, s := range starts {
		if _, old := held.Trials[id]; !old && len(s) == 1 && s[0] != "1 fresh" {
			t.Errorf("trial %s of the fresh run started %v, want attempt 1 fresh", id, s)
		}
	}
}

// tamperState rewrites the state file at path as someone who can write the
// storage folder could: the trainable's command replaced by one that
// touches marker, every trial back to RUNNING so a restore runs them, and
// the checksum recomputed.
func tamperState(t *testing.T, path, marker string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	st.Spec.Trainable.Command = []string{"/bin/sh", "-c", "touch '" + marker + "'; \"$TUNEJET_BIN\" report loss=1"}
	for _, tr := range st.Trials {
		tr.Status, tr.EndReason = events.StatusRunning, ""
	}
	st.Status = state.ExperimentRunning
	out, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := state.Load(out); err != nil {
		t.Fatalf("the tampered state file does not load: %v", err)
	}
	return st.Spec.Trainable.Command
}

// TestRestoreNeverRunsACommandFromAStateFile: a state file whose trainable
// command was replaced (checksum recomputed), in a folder restored with no
// event log, runs nothing of its own through `tunejet restore PATH`,
// `tunejet restore PATH EXPERIMENT_FILE` (the genuine file: refused, naming
// both commands) or `tunejet run --resume auto`; only
// --trust-stored-trainable runs it, after printing it. An untampered folder
// restores with its experiment file.
func TestRestoreNeverRunsACommandFromAStateFile(t *testing.T) {
	t.Parallel()
	q := runQuick(t)
	file, env, genuineDir, stateFile, good := q.file, q.env, q.dir, q.state, q.data
	tamperedRoot := t.TempDir()
	dir := filepath.Join(tamperedRoot, "quick")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "tampered")
	stored := strings.Join(tamperState(t, writeFile(t, dir, stateFile, string(good)), marker), " ")
	ranTampered := func() bool {
		_, err := os.Stat(marker)
		return err == nil
	}

	t.Run("restore PATH", func(t *testing.T) {
		r := tunejet(t, "", env, "restore", dir, "--store-dir", t.TempDir())
		if ranTampered() {
			t.Fatalf("tunejet restore PATH ran the command of the state file:\n%s", r)
		}
		for _, want := range []string{marker, "tunejet restore " + dir + " EXPERIMENT_FILE", "--trust-stored-trainable"} {
			if r.code != 1 || !strings.Contains(r.stderr, want) {
				t.Errorf("tunejet restore PATH: want exit 1 saying %q:\n%s", want, r)
			}
		}
	})
	t.Run("restore PATH EXPERIMENT_FILE", func(t *testing.T) {
		r := tunejet(t, "", env, "restore", dir, file, "--store-dir", t.TempDir())
		if ranTampered() {
			t.Fatalf("tunejet restore PATH FILE ran the command of the state file:\n%s", r)
		}
		for _, want := range []string{"Invalid `trainable` input", "'" + stored + "'", `'/bin/sh -c "$TUNEJET_BIN" report loss=1'`} {
			if r.code != 1 || !strings.Contains(r.stderr, want) {
				t.Errorf("tunejet restore PATH FILE: want exit 1 naming both commands, %q:\n%s", want, r)
			}
		}
	})
	t.Run("run --resume auto", func(t *testing.T) {
		r := tunejet(t, "", env, "run", file, "--resume", "auto", "--store-dir", t.TempDir(), "--storage-path", tamperedRoot)
		if ranTampered() {
			t.Fatalf("tunejet run --resume auto ran the command of the state file:\n%s", r)
		}
		if r.code != 1 || !strings.Contains(r.stderr, "Invalid `trainable` input") || !strings.Contains(r.stderr, "'"+stored+"'") {
			t.Errorf("tunejet run --resume auto: want exit 1 naming both commands:\n%s", r)
		}
	})
	t.Run("an untampered folder restores with its experiment file", func(t *testing.T) {
		r := tunejet(t, "", env, "restore", genuineDir, file, "--store-dir", t.TempDir())
		if r.code != 0 || !strings.Contains(r.stdout, "Experiment finished: 2 trials, 2 TERMINATED, 0 ERROR.") {
			t.Errorf("tunejet restore PATH FILE of the genuine folder:\n%s", r)
		}
	})
	t.Run("restore PATH --trust-stored-trainable", func(t *testing.T) {
		r := tunejet(t, "", env, "restore", dir, "--trust-stored-trainable", "--store-dir", t.TempDir())
		if r.code != 0 || !ranTampered() {
			t.Fatalf("tunejet restore --trust-stored-trainable: want the stored command run:\n%s", r)
		}
		if !strings.Contains(r.stdout+r.stderr, marker) {
			t.Errorf("tunejet restore --trust-stored-trainable ran the stored command without printing it:\n%s", r)
		}
	})
}

// quickRun is a completed run of quickExperiment: its file, the
// environment it ran with, its folder, and its newest state file's name
// and content.
type quickRun struct {
	file  string
	env   []string
	dir   string
	state string
	data  []byte
}

// runQuick runs quickExperiment to its end on an embedded stack of its own.
func runQuick(t *testing.T) quickRun {
	t.Helper()
	q := quickRun{file: writeFile(t, t.TempDir(), "exp.yaml", quickExperiment), env: embeddedEnv(t)}
	storagePath := t.TempDir()
	if r := tunejet(t, "", q.env, "run", q.file, "--store-dir", t.TempDir(), "--storage-path", storagePath); r.code != 0 {
		t.Fatalf("tunejet run:\n%s", r)
	}
	q.dir = filepath.Join(storagePath, "quick")
	var err error
	if q.state, err = (&storage.Dir{Root: q.dir}).NewestState(); err != nil {
		t.Fatal(err)
	}
	if q.data, err = os.ReadFile(filepath.Join(q.dir, q.state)); err != nil {
		t.Fatal(err)
	}
	return q
}
