package main_test

// Process tests of storage ownership: two deployments never write one
// experiment folder.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// TestSecondRunIntoAnOwnedFolderIsRefused: `tunejet run` of one name into
// one storage path from two embedded stores (--store-dir). The first runs
// (held, with no state file yet: sync_period is Ray's 300 s); the second
// is refused before any trial starts, naming the first's store, and
// writes nothing into the folder.
func TestSecondRunIntoAnOwnedFolderIsRefused(t *testing.T) {
	h := newHeldSetup(t, "dup")
	file := strings.Replace(fmt.Sprintf(heldExperiment, h.exp), "sync_period: 0.2", "sync_period: 300", 1)
	h.file = writeFile(t, filepath.Dir(h.file), "slow-sync.yaml", file)
	first := h.run(t)
	bustest.Eventually(t, time.Minute, "the first run to hold 3 trials", func() bool {
		if first.exited() {
			t.Fatalf("the first run exited:\n%s\n%s", first.stdout, first.stderr)
		}
		pids, _ := filepath.Glob(filepath.Join(h.marks, "pid-*"))
		return len(pids) == 4 && len(h.starts(t)) == 4
	})
	if _, ok := snapshotIn(t, h.expDir()); ok {
		t.Fatal("the first run wrote a state file: the test needs none yet")
	}
	starts := len(h.starts(t))

	otherStore := t.TempDir()
	args := []string{"run", h.file, "--store-dir", otherStore, "--storage-path", h.storage, "--slots", "4"}
	second := startTunejet(t, "", h.env(t), args...)
	bustest.Eventually(t, time.Minute, "the second run to end, or to start a trial", func() bool {
		return second.exited() || len(h.starts(t)) > starts
	})
	if n := len(h.starts(t)); n > starts {
		t.Fatalf("the second run started %d trials in the first run's folder", n-starts)
	}
	r := second.wait(t)
	if r.code == 0 || !strings.Contains(r.stderr, "owned by another tunejet deployment") || !strings.Contains(r.stderr, "embedded store "+h.store) {
		t.Fatalf("second run: %s\nwant refused, naming the first run's store %s", r, h.store)
	}
	t.Logf("the second run was refused: %s", r.stderr)
	if first.exited() {
		t.Fatalf("the first run ended:\n%s\n%s", first.stdout, first.stderr)
	}
	entries, err := os.ReadDir(h.expDir())
	if err != nil {
		t.Fatal(err)
	}
	var trialDirs int
	for _, e := range entries {
		if e.IsDir() {
			trialDirs++
		}
	}
	if trialDirs != 4 {
		t.Fatalf("%d trial folders in %s; want the first run's 4", trialDirs, h.expDir())
	}
}
