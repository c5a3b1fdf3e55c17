package runner

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/session"
)

// A runner that starts reads the experiments' history from the log's
// start. It pulls the work of the runs still going only: not of a run
// that completed, nor of one a restored run replaced (whose work
// consumer, by the same name, is the restored run's: a pull of the old
// run could take the new run's work).
func TestARunnerPullsOnlyTheRunsStillGoing(t *testing.T) {
	srv := bustest.Start(t)
	b := srv.Bus("controller")
	publishTo := func(exp string, p events.Payload) {
		if _, err := b.Publish(t.Context(), b.Event(exp, events.WriterController, p)); err != nil {
			t.Fatal(err)
		}
	}
	started := func(exp string, run int) {
		publishTo(exp, &events.ExperimentStarted{Run: run, Session: fmt.Sprintf("2026-01-02_03-04-%02d", run),
			Seed: 1, TrialIDPrefix: "abcde", NumTrials: 1, StoragePath: "/tmp/x"})
	}
	started("done", 1)
	publishTo("done", &events.ExperimentCompleted{Reason: "finished"})
	started("restored", 1)
	started("restored", 2)
	started("going", 1)

	s := New(srv.Bus("runner"), Config{Name: "r", CPUs: 1, WorkDir: t.TempDir(), Trainables: map[string]session.Func{}})
	var mu sync.Mutex
	var pulls []string
	s.hooks.pulling = func(exp string, run int) {
		mu.Lock()
		defer mu.Unlock()
		pulls = append(pulls, fmt.Sprintf("%s/%d", exp, run))
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the runner stopped with %v", err)
		}
	})

	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(pulls)
	}
	// A run started after the runner caught up is pulled too; once it is,
	// the runner has handed on everything before it.
	bustest.Eventually(t, 30*time.Second, "the running run's pull", func() bool { return slices.Contains(got(), "going/1") })
	started("later", 1)
	bustest.Eventually(t, 30*time.Second, "the later run's pull", func() bool { return slices.Contains(got(), "later/1") })
	if want := []string{"restored/2", "going/1", "later/1"}; !slices.Equal(got(), want) {
		t.Errorf("pulls %v, want %v: only the runs still going", got(), want)
	}
}
