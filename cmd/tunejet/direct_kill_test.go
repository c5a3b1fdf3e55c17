package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt/direct"
)

// directKillExperiment runs testdata/directkill/train.sh once.
const directKillExperiment = `name: directkill
trainable:
  name: bigcheckpoint
  command: ["/bin/sh", %q]
run_config:
  checkpoint_config: {route: storage}
`

// A runner killed with SIGKILL while it copies a checkpoint straight into
// storage leaves a temporary folder that no event names: the restored run
// resumes the trial from the checkpoint before, every iteration counts
// once, the trial ends TERMINATED, and the next attempt removes the
// temporary folder.
func TestCheckpointKilledMidCopyIsNeverReferenced(t *testing.T) {
	t.Parallel()
	script := filepath.Join(moduleRoot, "cmd", "tunejet", "testdata", "directkill", "train.sh")
	file := writeFile(t, t.TempDir(), "experiment.yaml", fmt.Sprintf(directKillExperiment, script))
	store, storage, marks := t.TempDir(), t.TempDir(), t.TempDir()
	t.Cleanup(func() { killTrainablesOf(t, marks, script) })
	env := embeddedEnv(t, "MARK_DIR="+marks, "BIG_FILES=400")
	expDir := filepath.Join(storage, "directkill")
	p := startGroup(t, env, "run", file, "--store-dir", store, "--storage-path", storage, "--slots", "1")

	// Strike when the copy of checkpoint_000001 is under way.
	var tmp string
	deadline := time.Now().Add(processTimeout)
	for tmp == "" && time.Now().Before(deadline) && !p.exited() {
		matches, _ := filepath.Glob(filepath.Join(expDir, "*", ".checkpoint_000001.tmp-*"))
		if len(matches) > 0 {
			tmp = matches[0]
			break
		}
		time.Sleep(time.Millisecond)
	}
	if tmp == "" {
		t.Fatalf("no copy of checkpoint_000001 under way was seen; the run:\n%s", p.stderr)
	}
	p.killGroup()
	killTrainablesOf(t, marks, script)
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("the temporary folder %s is gone before the restore (the copy finished first: the test tests nothing): %v", tmp, err)
	}
	trialDir := filepath.Dir(tmp)
	if _, err := os.Stat(filepath.Join(trialDir, "checkpoint_000001", direct.ManifestFile)); err == nil {
		t.Fatal("checkpoint_000001 was complete when the process was killed: the test tests nothing")
	}
	for _, ev := range storeLog(t, store, "directkill") {
		if c, ok := ev.Data.(*events.TrialCheckpointed); ok && c.Checkpoint.Name == "checkpoint_000001" {
			t.Fatalf("the log names checkpoint_000001 before its copy was complete: %+v", c.Checkpoint)
		}
	}

	p = startGroup(t, env, "restore", expDir, file, "--store-dir", store, "--slots", "1")
	if r := p.wait(t); r.code != 0 || !strings.Contains(r.stdout, "Experiment finished: 1 trials") {
		t.Fatalf("restore: %s", r)
	}
	evs := storeLog(t, store, "directkill")
	var restored []string
	for _, ev := range evs {
		if s, ok := ev.Data.(*events.TrialStarted); ok && s.Attempt > 1 {
			restored = append(restored, s.RestoredFrom)
		}
	}
	if !slices.Equal(restored, []string{"checkpoint_000000"}) {
		t.Errorf("later attempts restored from %v, want checkpoint_000000", restored)
	}
	var final *events.CheckpointRef
	for _, ev := range evs {
		if c, ok := ev.Data.(*events.TrialCheckpointed); ok && c.Checkpoint.Name == "checkpoint_000001" {
			final = &c.Checkpoint
		}
	}
	if final == nil || final.Location != filepath.Base(trialDir)+"/checkpoint_000001" {
		t.Fatalf("the restored run's checkpoint_000001: %+v", final)
	}
	if err := (&direct.FileSystem{Root: expDir}).Read(t.Context(), final.Location, final.Digest, filepath.Join(t.TempDir(), "x")); err != nil {
		t.Errorf("checkpoint_000001 in storage is not the one its event names: %v", err)
	}
	entries, err := os.ReadDir(trialDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".checkpoint_") {
			t.Errorf("the trial folder still holds %s", e.Name())
		}
	}
	rows := readLines(t, filepath.Join(trialDir, "result.json"))
	var iters []string
	for _, row := range rows {
		i := strings.Index(row, `"training_iteration":`)
		if i < 0 {
			t.Fatalf("result.json line without training_iteration: %s", row)
		}
		iters = append(iters, strings.SplitN(row[i+len(`"training_iteration":`):], ",", 2)[0])
	}
	if !slices.Equal(iters, []string{"1", "2", "3", "4"}) {
		t.Errorf("result.json iterations %v, want 1..4 once each", iters)
	}
}

// readLines reads a file's non-empty lines.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}
