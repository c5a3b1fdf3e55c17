package controller

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// Before the controller has read the runner registry it does not decide:
// every trial would look as if some runner held it (no runner known reads
// as none registered), and a 1-GPU trial's work would go out to CPU-only
// runners, which never take it and take none of the experiment's work
// behind it. Once the registry is read, showing one CPU-only runner, the
// trial is created but not scheduled: it waits PENDING for a runner that
// holds it.
func TestNoSchedulingBeforeTheRegistryIsRead(t *testing.T) {
	ctx := t.Context()
	srv := bustest.Start(t)
	b := srv.Bus("controller-1")
	if err := b.ProvisionBuckets(ctx); err != nil {
		t.Fatal(err)
	}
	const exp = "gpuonly"
	sp := events.ExperimentSpec{
		Name: exp, Trainable: events.Trainable{Name: "fn", Resources: map[string]events.ResourceAmount{"gpu": {Value: 1}}},
		ParamSpace: map[string]any{"x": 1.0}, TuneConfig: events.TuneConfig{NumSamples: 1},
	}
	if _, err := b.Publish(ctx, b.Event(exp, events.WriterClient, &events.ExperimentSubmitted{Spec: sp})); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, b.Event(exp, events.WriterController, &events.ExperimentStarted{
		Run: 1, Session: "2026-12-02_06-00-00", Seed: 1, TrialIDPrefix: "abcde", NumTrials: 1, StoragePath: t.TempDir(),
	})); err != nil {
		t.Fatal(err)
	}
	s := New(b, Config{})
	s.log = zerolog.New(zerolog.NewTestWriter(t))
	r := newReconciler(s, exp)
	for _, ev := range bustest.Log(t, b, exp) {
		r.apply(ctx, ev)
	}

	r.reconcile(ctx)
	if n := countTrialEvents(bustest.Log(t, b, exp)); n != 0 {
		t.Fatalf("decided %d trial events before the registry was read; want none", n)
	}

	s.live.set(map[string]*watchedRunner{"cpu": {info: bus.RunnerInfo{Name: "cpu", Capacity: events.Resources{"cpu": 4}}}})
	r.reconcile(ctx)
	evs := bustest.Log(t, b, exp)
	created, scheduled := 0, 0
	for _, ev := range evs {
		switch ev.Data.(type) {
		case *events.TrialCreated:
			created++
		case *events.TrialScheduled:
			scheduled++
		}
	}
	if created != 1 || scheduled != 0 {
		t.Fatalf("with one CPU-only runner read: %d trials created, %d scheduled; want 1 created, waiting unscheduled", created, scheduled)
	}
}

func countTrialEvents(evs []*events.Event) int {
	n := 0
	for _, ev := range evs {
		if ev.Trial() != "" {
			n++
		}
	}
	return n
}
