package controller

import (
	"context"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// A controller decides nothing before its liveness watch has read the
// runner registry (it would schedule work no live runner can hold). When
// that read comes after the submission's events, the experiment starts as
// soon as it does, not at the next tick: with a tick of an hour, as an
// embedded stack's test has, it would not start at all.
func TestAnExperimentStartsOnceTheRunnerRegistryIsRead(t *testing.T) {
	const exp = "late_registry"
	srv := bustest.Start(t)
	b := srv.Bus("client")
	held := make(chan struct{})
	c := New(srv.Bus("controller"), Config{Tick: time.Hour})
	c.livenessHeld = held
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	sp := events.ExperimentSpec{
		Name: exp, Trainable: events.Trainable{Name: "fn"},
		ParamSpace: map[string]any{"x": map[string]any{"grid_search": []any{1.0}}},
		TuneConfig: events.TuneConfig{NumSamples: 1},
		RunConfig:  events.RunConfig{StoragePath: t.TempDir()},
	}
	if _, err := b.Publish(t.Context(), b.Event(exp, events.WriterClient, &events.ExperimentSubmitted{Spec: sp})); err != nil {
		t.Fatal(err)
	}
	// The controller has taken the experiment's lease: it has folded the
	// submission and found the registry unread.
	bustest.Eventually(t, 30*time.Second, "the controller to lead the experiment", func() bool {
		holder, err := b.LeaseHolder(t.Context(), exp)
		return err == nil && holder != ""
	})
	close(held)
	bustest.Eventually(t, 30*time.Second, "the trial's work", func() bool {
		for _, ev := range bustest.Log(t, b, exp) {
			if _, ok := ev.Data.(*events.TrialScheduled); ok {
				return true
			}
		}
		return false
	})
}
