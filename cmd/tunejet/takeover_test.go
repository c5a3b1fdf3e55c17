package main_test

import (
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tunejet/tunejet/events"
)

// TestStandbyControllerTakesOver: two controller processes; the one that
// holds the experiment's lease is killed with SIGKILL mid-experiment; the
// standby takes over, the experiment completes, and no decision was made
// twice.
func TestStandbyControllerTakesOver(t *testing.T) {
	t.Parallel()
	f := newFaultSetup(t, "takeover", "[1, 2, 3, 4, 5, 6]", 0, 3, 8, "0.1")
	standby := startTunejet(t, "", f.env, "controller", "--nats", f.url)
	f.runner(t, "rA", 2)
	run := f.submit(t)
	f.waitFor(t, "two trials running", func(evs []*events.Event) bool { return startedOn(evs, "rA") >= 2 })

	b := f.srv.Bus("test")
	holder, err := b.LeaseHolder(t.Context(), f.exp) // tunejet/controller/<host>-<pid>
	if err != nil {
		t.Fatal(err)
	}
	leader, other := f.controller, standby
	if strings.HasSuffix(holder, "-"+strconv.Itoa(standby.cmd.Process.Pid)) {
		leader, other = standby, f.controller
	}
	if !strings.HasSuffix(holder, "-"+strconv.Itoa(leader.cmd.Process.Pid)) {
		t.Fatalf("the lease is held by %q, neither controller", holder)
	}
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := run.wait(t)
	if r.code != 0 || !strings.Contains(r.stdout, "6 TERMINATED, 0 ERROR") {
		t.Fatalf("tunejet run: want 6 TERMINATED:\n%s", r)
	}
	if other.exited() {
		t.Fatalf("the standby exited:\n%s", other.stderr)
	}
	evs := replay(t, f.srv, f.exp)
	created, sources := map[string]int{}, map[string]bool{}
	for _, ev := range evs {
		if ev.Writer == events.WriterController {
			sources[ev.Source] = true
		}
		if p, ok := ev.Data.(*events.TrialCreated); ok {
			created[p.TrialID]++
		}
	}
	if len(created) != 6 {
		t.Errorf("%d trials created, want 6", len(created))
	}
	for id, n := range created {
		if n != 1 {
			t.Errorf("trial %s created %d times", id, n)
		}
	}
	if len(sources) != 2 {
		t.Errorf("controller events came from %v; want both controllers (the standby took over)", sources)
	}
	for id, tl := range trials(evs) {
		if len(tl.completed) != 1 {
			t.Errorf("trial %s completed %d times", id, len(tl.completed))
		}
	}
}
