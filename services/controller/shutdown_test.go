package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/services/controller"
)

// TestShutdownRecordsTheInterruptionAfterTheLeaseLapsed: an embedded
// stack's controller whose lease lapsed before it stopped (its renewals
// came late, as on a loaded machine) and that nobody took over still
// records experiment.interrupted, so a restore finds the run interrupted
// rather than led by a controller that is gone.
func TestShutdownRecordsTheInterruptionAfterTheLeaseLapsed(t *testing.T) {
	const exp = "lapsed"
	srv := bustest.Start(t)
	b := srv.Bus("test")
	// A tick longer than the test: once the trial is scheduled nothing
	// wakes the controller, so nothing renews its lease.
	c := controller.New(srv.Bus("controller"), controller.Config{Tick: time.Hour, InterruptOnShutdown: true})
	// t.Context ends the controller if the test fails before it stops it.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	submit(t, b, gridSpec(exp, 1, 1, t.TempDir()))
	waitForCount(t, b, exp, events.TypeTrialScheduled, 1)
	bustest.Eventually(t, 5*bus.LeaseTTL, "the controller's lease to lapse", func() bool {
		holder, err := b.LeaseHolder(t.Context(), exp)
		return err == nil && holder == ""
	})

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("controller: %v", err)
	}
	if n := count(bustest.Log(t, b, exp), events.TypeExperimentInterrupted); n != 1 {
		t.Fatalf("%d experiment.interrupted events after the controller stopped; want 1", n)
	}
}
