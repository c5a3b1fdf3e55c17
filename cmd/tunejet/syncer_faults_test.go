package main_test

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/tboard/tboardtest"
)

// syncedStepsExperiment is the steps trainable with a short sync_period
// and num_to_keep, on a file:// storage URL.
const syncedStepsExperiment = `name: %s
trainable:
  command: ["/bin/sh", "steps.sh"]
param_space:
  x: {grid_search: [1, 2, 3]}
run_config:
  storage_path: %s
  failure_config: {max_failures: 0, heartbeat_timeout_s: 3}
  checkpoint_config: {num_to_keep: 2}
  sync_config: {sync_period: 0.3}
`

// currentAttempt is what the log holds of each trial's current attempt:
// its reports and checkpoints, in order.
type currentAttempt struct {
	dir         string
	attempt     int
	reports     []map[string]any
	checkpoints []events.CheckpointRef
	completed   *events.TrialCompleted
}

func currentAttempts(evs []*events.Event) map[string]*currentAttempt {
	out := map[string]*currentAttempt{}
	get := func(id string) *currentAttempt {
		if out[id] == nil {
			out[id] = &currentAttempt{}
		}
		return out[id]
	}
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.TrialCreated:
			get(p.TrialID).dir = p.DirName
		case *events.TrialStarted:
			if c := get(p.TrialID); p.Attempt > c.attempt {
				c.attempt, c.reports, c.checkpoints = p.Attempt, nil, nil
			}
		case *events.TrialReported:
			if c := get(p.TrialID); p.Attempt == c.attempt {
				c.reports = append(c.reports, p.Results()...)
			}
		case *events.TrialCheckpointed:
			if c := get(p.TrialID); p.Attempt == c.attempt {
				c.checkpoints = append(c.checkpoints, p.Checkpoint)
			}
		case *events.TrialCompleted:
			get(p.TrialID).completed = p
		}
	}
	return out
}

// killMoment says whether the syncer may be killed now: wait (no sync yet,
// or a trial not reporting yet), sharp (every trial reporting, and the
// newest stored snapshot is behind two checkpoint.persisted of one trial:
// the syncer has persisted, and released staged copies, past what a
// restart resumes from), or late (the trials near their end without a
// sharp moment: kill anyway while they still report).
func killMoment(t *testing.T, evs []*events.Event, root string, steps int) string {
	t.Helper()
	tr := currentAttempts(evs)
	if len(tr) != 3 {
		return "wait"
	}
	most := 0
	for _, c := range tr {
		if c.completed != nil || len(c.reports) < 3 {
			return "wait"
		}
		most = max(most, len(c.reports))
	}
	snap, ok := storedSeq(t, root)
	if !ok {
		return "wait"
	}
	after := map[string]int{}
	for _, ev := range evs {
		if p, ok := ev.Data.(*events.CheckpointPersisted); ok && ev.Seq > snap {
			after[p.TrialID]++
			if after[p.TrialID] >= 2 && most < steps-5 {
				return "sharp"
			}
		}
	}
	if most >= steps-10 {
		return "late"
	}
	return "wait"
}

// storedSeq returns the stream sequence of the newest stored snapshot.
func storedSeq(t *testing.T, root string) (uint64, bool) {
	t.Helper()
	d := &storage.Dir{Root: root}
	name, err := d.NewestState()
	if err != nil {
		return 0, false
	}
	b, err := d.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Load(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return st.LastSeq, true
}

func countReports(evs []*events.Event) int {
	n := 0
	for _, ev := range evs {
		if p, ok := ev.Data.(*events.TrialReported); ok {
			n += len(p.Results())
		}
	}
	return n
}

// filesUnder lists the regular files under dir (none if it is missing).
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKilledSyncerLosesAndRepeatsNothing: the syncer process is killed
// with SIGKILL mid-experiment, after it has synced at least once and while
// the trials still report; a new syncer process takes over. When the
// experiment ends, every trial's result.json holds each report of its
// current attempt exactly once, in order, progress.csv has as many rows,
// and the kept checkpoints are in storage.
func TestKilledSyncerLosesAndRepeatsNothing(t *testing.T) {
	t.Parallel()
	const exp = "syncer_kill9"
	const steps = 40
	f := newFaultSetup(t, exp, "[1, 2, 3]", 0, 3, steps, "0.05")
	dir := t.TempDir()
	writeFile(t, dir, "steps.sh", stepsScript)
	f.file = writeFile(t, dir, "experiment.yaml", fmt.Sprintf(syncedStepsExperiment, exp, "file://"+f.storage))
	f.runner(t, "rA", 3)
	run := f.submit(t)

	// Kill the syncer after it has synced, while every trial reports, at
	// the sharpest moment seen: when it has persisted two checkpoints of a
	// trial that its newest stored snapshot does not know about. It is
	// frozen while the test checks, so nothing moves in between.
	root := filepath.Join(f.storage, exp)
	first := f.syncer
	moment := ""
	bustest.Eventually(t, 2*time.Minute, "a moment to kill the syncer", func() bool {
		moment = killMoment(t, replay(t, f.srv, exp), root, steps)
		if moment == "wait" {
			return false
		}
		if err := first.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if moment = killMoment(t, replay(t, f.srv, exp), root, steps); moment != "wait" {
			return true
		}
		if err := first.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		return false
	})
	t.Logf("killing the syncer: %s moment", moment)
	first.kill() // SIGKILL: mid-batch, no final sync
	atKill := countReports(replay(t, f.srv, exp))
	f.waitFor(t, "the trials to report on without a syncer", func(evs []*events.Event) bool {
		return countReports(evs) >= atKill+6
	})
	f.syncer = startTunejet(t, "", f.env, "syncer", "--nats", f.url)

	r := run.wait(t)
	if r.code != 0 || !strings.Contains(r.stdout, "3 TERMINATED, 0 ERROR") {
		t.Fatalf("tunejet run: want 3 TERMINATED:\n%s", r)
	}
	if f.syncer.exited() {
		t.Errorf("the second syncer exited:\n%s", f.syncer.stderr)
	}

	evs := replay(t, f.srv, exp)
	// Storage was healthy all along: the new syncer has nothing to fail.
	for _, ev := range evs {
		if p, ok := ev.Data.(*events.SyncFailed); ok {
			t.Errorf("sync.failed from %s: %s: %s", ev.Source, p.Operation, p.Error)
		}
	}
	st := loadState(t, root)
	tr := currentAttempts(evs)
	if len(tr) != 3 {
		t.Fatalf("the log has %d trials, want 3", len(tr))
	}
	for id, c := range tr {
		if c.completed == nil || c.completed.Status != events.StatusTerminated || len(c.reports) != steps {
			t.Errorf("trial %s: completed %+v after %d reports; want TERMINATED after %d", id, c.completed, len(c.reports), steps)
		}
		if s := st.Trials[id]; s == nil || s.Status != events.StatusTerminated || s.NumResults != len(c.reports) {
			t.Errorf("trial %s: stored state %+v; want TERMINATED with %d results", id, s, len(c.reports))
		}

		rows := resultLines(t, filepath.Join(root, c.dir, "result.json"))
		if len(rows) != len(c.reports) {
			t.Errorf("trial %s: result.json has %d lines, the log %d reports of attempt %d", id, len(rows), len(c.reports), c.attempt)
		}
		for i := 0; i < len(rows) && i < len(c.reports); i++ {
			want := c.reports[i]
			if rows[i]["training_iteration"] != want["training_iteration"] || rows[i]["step"] != want["step"] || rows[i]["trial_id"] != id {
				t.Errorf("trial %s: result.json line %d is iteration %v step %v, the log's report %d is iteration %v step %v",
					id, i+1, rows[i]["training_iteration"], rows[i]["step"], i+1, want["training_iteration"], want["step"])
				break
			}
		}

		data, err := os.ReadFile(filepath.Join(root, c.dir, "progress.csv"))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
		if err != nil {
			t.Errorf("trial %s: progress.csv: %v", id, err)
		} else if len(recs) != len(c.reports)+1 {
			t.Errorf("trial %s: progress.csv has %d records, want a header and %d rows", id, len(recs), len(c.reports))
		}
		if s := st.Trials[id]; s != nil {
			checkTensorBoard(t, filepath.Join(root, c.dir), id, c, s.Config["x"])
		}

		// num_to_keep 2 without a score: the two newest are kept.
		if len(c.checkpoints) != steps {
			t.Errorf("trial %s: %d checkpoints in the log, want %d", id, len(c.checkpoints), steps)
			continue
		}
		for i, ck := range c.checkpoints {
			files := filesUnder(t, filepath.Join(root, c.dir, ck.Name))
			if i < len(c.checkpoints)-2 {
				if len(files) != 0 {
					t.Errorf("trial %s: the dropped %s still holds %v", id, ck.Name, files)
				}
				continue
			}
			b, err := os.ReadFile(filepath.Join(root, c.dir, ck.Name, "step"))
			if err != nil || string(b) != strconv.Itoa(ck.Iteration)+"\n" {
				t.Errorf("trial %s: kept %s: step file %q (%v), want %d", id, ck.Name, b, err, ck.Iteration)
			}
		}
	}
}

// checkTensorBoard checks a trial's TensorBoard event file, read with a
// decoder of its own (tboardtest): one result event per report of the
// trial's current attempt, in order, at the report's iteration and time,
// holding its step as the scalar ray/tune/step; then the trial's hparams:
// x, its value of the grid.
func checkTensorBoard(t *testing.T, dir, id string, c *currentAttempt, x any) {
	t.Helper()
	files := tboardtest.Files(t, dir)
	if len(files) != 1 {
		t.Errorf("trial %s: event files %v, want one", id, files)
		return
	}
	evs := tboardtest.ReadFile(t, files[0])
	if len(evs) != 1+len(c.reports)+3 {
		t.Errorf("trial %s: the event file holds %d events, want its start, %d results and 3 hparams", id, len(evs), len(c.reports))
		return
	}
	for i, want := range c.reports {
		ev := evs[1+i]
		if float64(ev.Step) != want["training_iteration"] || float64(ev.Scalars()["ray/tune/step"]) != want["step"] || ev.WallTime != want["timestamp"] {
			t.Errorf("trial %s: result event %d is step %d, ray/tune/step %v at %v; the log's report %d is iteration %v, step %v at %v",
				id, i+1, ev.Step, ev.Scalars()["ray/tune/step"], ev.WallTime, i+1, want["training_iteration"], want["step"], want["timestamp"])
			return
		}
	}
	start := evs[len(evs)-2].Values
	if len(start) != 1 || start[0].Tag != "_hparams_/session_start_info" || !cmp.Equal(start[0].HParams, map[string]any{"x": x}) {
		t.Errorf("trial %s: session start %+v, want the hparams {x: %v}", id, start, x)
	}
}
