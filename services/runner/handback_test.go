package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/session"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/state/statetest"
	"github.com/tunejet/tunejet/services/controller"
)

const handBackWait = 30 * time.Second

// TestWorkARunnerCannotHoldIsHandedBackFree: a CPU-only runner takes a
// trial's work that needs a GPU (its gate read the experiment before the
// work was scheduled: the hook holds it there until the work is in the
// log, and the GPU runner waits until the CPU runner has the work). It
// hands the work back without spending an attempt: with max_failures 0
// the trial still runs, on the GPU runner, in attempt 1, and ends
// TERMINATED with no failure counted.
func TestWorkARunnerCannotHoldIsHandedBackFree(t *testing.T) {
	srv := bustest.Start(t)
	ctl := controller.New(srv.Bus("controller"), controller.Config{Tick: 20 * time.Millisecond})
	client := srv.Bus("client")
	const exp = "handback"

	release := make(chan struct{}) // the GPU trial's work is in the log
	cpuTook := make(chan struct{}) // the CPU runner has the work
	var stale, took sync.Once
	cpu := New(srv.Bus("runner/cpu"), Config{Name: "cpu", CPUs: 2, WorkDir: t.TempDir(), StopGrace: time.Second,
		Trainables: map[string]session.Func{"fn": reportOnce}})
	cpu.hooks.admit = func(ctx context.Context, _ string, shape events.Resources) events.Resources {
		stale.Do(func() {
			select { // the gate read no work yet; admit as if the work came after
			case <-release:
			case <-ctx.Done():
			}
			shape = events.DefaultShape()
		})
		return shape
	}
	cpu.hooks.took = func(string, *events.TrialScheduled) { took.Do(func() { close(cpuTook) }) }
	gpu := New(srv.Bus("runner/gpu"), Config{Name: "gpu", CPUs: 2, GPUs: 1, WorkDir: t.TempDir(), StopGrace: time.Second,
		Trainables: map[string]session.Func{"fn": reportOnce}})
	gpu.hooks.admit = func(ctx context.Context, _ string, shape events.Resources) events.Resources {
		select {
		case <-cpuTook:
		case <-ctx.Done():
		}
		return shape
	}

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{ctl.Run, cpu.Run, gpu.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	bustest.CheckFor(t, handBackWait, func() error {
		runners, ok, err := client.LiveRunners(t.Context())
		if err != nil || !ok {
			return fmt.Errorf("no runner registry (%w)", err)
		}
		if len(runners) != 2 {
			err = fmt.Errorf("%d runners in the registry, want both", len(runners))
		}
		return err
	})

	sp := events.ExperimentSpec{
		Name: exp, Trainable: events.Trainable{Name: "fn", Resources: map[string]events.ResourceAmount{"gpu": {Value: 1}}},
		ParamSpace: map[string]any{"x": 1.0}, TuneConfig: events.TuneConfig{NumSamples: 1},
	}
	if _, err := client.Publish(t.Context(), client.Event(exp, events.WriterClient, &events.ExperimentSubmitted{Spec: sp})); err != nil {
		t.Fatal(err)
	}
	bustest.CheckFor(t, handBackWait, func() error {
		seq, err := client.LastSeq(t.Context(), events.TypeSubjects(exp, events.WriterController, events.TypeTrialScheduled))
		if err == nil && seq == 0 {
			err = errors.New("the GPU trial's work is not in the log yet")
		}
		return err
	})
	close(release)

	var st *state.Experiment
	bustest.Eventually(t, handBackWait, "the experiment to complete", func() bool {
		st = statetest.FoldLog(t, client, exp)
		return st.Done()
	})
	trials := st.TrialList()
	if len(trials) != 1 {
		t.Fatalf("%d trials; want 1", len(trials))
	}
	tr := trials[0]
	if tr.Status != events.StatusTerminated || tr.Attempt != 1 || tr.NumFailures != 0 || tr.Runner != "gpu" {
		t.Fatalf("the trial is %s (%s: %s) after attempt %d on %q with %d failures; want TERMINATED after attempt 1 on gpu, none failed",
			tr.Status, tr.EndReason, tr.LastError, tr.Attempt, tr.Runner, tr.NumFailures)
	}
	returned := 0
	for _, ev := range bustest.Log(t, client, exp) {
		switch p := ev.Data.(type) {
		case *events.TrialReturned:
			returned++
			if p.Runner != "cpu" || p.Attempt != 1 || p.WorkSeq == 0 || p.Reason == "" {
				t.Errorf("hand-back %+v; want runner cpu, attempt 1, its work and a reason", p)
			}
		case *events.TrialStarted:
			if p.Runner != "gpu" {
				t.Errorf("runner %s started attempt %d; only gpu can hold the trial", p.Runner, p.Attempt)
			}
		}
	}
	if returned != 1 {
		t.Fatalf("%d trial.returned events; want the CPU runner's one", returned)
	}
}

// reportOnce is a trainable that reports one result.
func reportOnce(ctx context.Context, _ map[string]any) error {
	s, err := session.From(ctx)
	if err != nil {
		return err
	}
	_, err = s.Report(ctx, map[string]any{"loss": 1.0}, "")
	return err
}

// Work a runner handed back and did not end (it died between the two) is
// handed out again: the runner that gets it finds the hand-back and drops
// the work without starting the trial, so the trial's new work, which the
// controller schedules, is the only one to run.
func TestReturnedWorkHandedOutAgainIsDropped(t *testing.T) {
	ctx := t.Context()
	srv := bustest.Start(t)
	b := srv.Bus("runner")
	s := New(b, Config{Name: "gpu", WorkDir: t.TempDir(), Trainables: map[string]session.Func{"fn": reportOnce}})
	work := &events.TrialScheduled{TrialID: "t1", TrialName: "train_t1", DirName: "train_t1", HeartbeatTimeoutS: 30,
		Config: map[string]any{}, Trainable: events.Trainable{Name: "fn"}}
	if err := b.EnsureWorkConsumer(ctx, "exp", bus.WorkConfig{AckWait: work.HeartbeatTimeoutS}); err != nil {
		t.Fatal(err)
	}
	seq, err := b.Publish(ctx, b.Event("exp", events.WriterController, work))
	if err != nil {
		t.Fatal(err)
	}
	publish(t, b, events.WriterRunner, &events.TrialReturned{TrialID: "t1", Attempt: 1, WorkSeq: seq, Runner: "cpu", Reason: "needs gpu=1; runner cpu has gpu=0"})
	msg := nextWork(t, b)
	b.Settle(ctx, msg, s.runAttempt(ctx, "exp", msg))
	var got []string
	if err := b.Replay(ctx, events.WriterSubjects("exp", events.WriterRunner), func(ev *events.Event) {
		got = append(got, describeEvent(ev)...)
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{events.TypeTrialReturned}; !slices.Equal(got, want) {
		t.Errorf("the runner events %v, want only the hand-back: the returned work must not start the trial", got)
	}
	cons, err := bustest.WorkConsumer(ctx, srv.JetStream(), "exp")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 {
		t.Errorf("%d work messages wait for an ack, want 0: the returned work is settled", info.NumAckPending)
	}
}

// Work that waits for capacity when its runner stops (its experiment's
// run ended, or SIGTERM) is handed back, not left to the ack wait: that
// would spend one of the trial's max_failures + 1 deliveries, and with
// max_failures 0 end it ERROR without it ever running.
func TestWorkWaitingForCapacityIsHandedBackWhenTheRunnerStops(t *testing.T) {
	srv := bustest.Start(t)
	b := srv.Bus("runner")
	s := New(b, Config{Name: "r", CPUs: 2, WorkDir: t.TempDir(), Trainables: map[string]session.Func{"fn": reportOnce}})
	s.pool = newPool(events.Resources{events.ResourceCPU: 2}, nil)
	if _, ok := s.pool.take(events.DefaultShape()); !ok { // a trial running here holds one CPU
		t.Fatal("cannot take the running trial's CPU")
	}
	gr, ok := s.pool.take(events.DefaultShape()) // the gate's hold: it read no work yet
	if !ok {
		t.Fatal("cannot take the gate's hold")
	}
	work := &events.TrialScheduled{TrialID: "t1", TrialName: "train_t1", DirName: "train_t1", HeartbeatTimeoutS: 30,
		Config: map[string]any{}, Trainable: events.Trainable{Name: "fn"}, Resources: events.Resources{events.ResourceCPU: 2}}
	if err := b.EnsureWorkConsumer(t.Context(), "exp", bus.WorkConfig{AckWait: work.HeartbeatTimeoutS}); err != nil {
		t.Fatal(err)
	}
	seq, err := b.Publish(t.Context(), b.Event("exp", events.WriterController, work))
	if err != nil {
		t.Fatal(err)
	}
	msg := nextWork(t, b)
	msg.Hold = &hold{p: s.pool, g: gr}
	stopped, stop := context.WithCancel(t.Context())
	stop() // the runner stops as the work waits for its second CPU
	_, err = s.fit(stopped, "exp", msg, work)
	b.Settle(t.Context(), msg, err)

	var returned []*events.TrialReturned
	if err := b.Replay(t.Context(), events.WriterSubjects("exp", events.WriterRunner), func(ev *events.Event) {
		if p, ok := ev.Data.(*events.TrialReturned); ok {
			returned = append(returned, p)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(returned) != 1 || returned[0].WorkSeq != seq || returned[0].Attempt != 1 {
		t.Errorf("hand-backs %+v; want one of the work at %d, attempt 1", returned, seq)
	}
	cons, err := bustest.WorkConsumer(t.Context(), srv.JetStream(), "exp")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 {
		t.Errorf("%d work messages wait for an ack, want 0: the work is settled as handed back", info.NumAckPending)
	}
}
