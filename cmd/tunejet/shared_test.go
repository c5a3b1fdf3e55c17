package main_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
)

// TestStorageTheSyncerCannotSeeIsRefused: the syncer runs where the
// client's local storage_path is another folder (a mount namespace with
// its own tmpfs there: another host, as far as files go). The client is
// refused with Ray's "Unable to set up cluster storage" before it submits,
// so no trial starts.
func TestStorageTheSyncerCannotSeeIsRefused(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare(1) to give the syncer its own view of the storage folder")
	}
	if out, err := exec.Command("unshare", "--mount", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot make a mount namespace here (%v): %s", err, out)
	}
	f := newFaultSetup(t, "unshared", "[1, 2]", 0, 3, 3, "0.1")
	f.syncer.kill() // replaced by one that cannot see the storage
	script := fmt.Sprintf("mount -t tmpfs tmpfs %q && exec %q syncer --nats %q", f.storage, tunejetBin, f.url)
	syncer := &proc{name: "unshared syncer", stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	syncer.cmd = exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script)
	syncer.cmd.Env, syncer.cmd.Stdout, syncer.cmd.Stderr = f.env, syncer.stdout, syncer.stderr
	if err := syncer.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { syncer.waitErr = syncer.cmd.Wait(); close(syncer.done) }()
	t.Cleanup(syncer.kill)
	f.runner(t, "rA", 2)

	r := f.submit(t).wait(t)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "unable to set up cluster storage") {
		t.Fatalf("tunejet run: want it refused with Ray's storage message:\n%s\nsyncer: %s", r, syncer.stderr)
	}
	for _, ev := range replay(t, f.srv, f.exp) {
		switch ev.Data.(type) {
		case *events.ExperimentSubmitted, *events.TrialStarted:
			t.Fatalf("the log holds %s: the refused experiment was submitted", ev.Type())
		}
	}
}
