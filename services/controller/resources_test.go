package controller_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/session"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/state/statetest"
	"github.com/tunejet/tunejet/services/controller"
	"github.com/tunejet/tunejet/services/runner"
)

// ledger books what the trainables of every runner hold while they run,
// from inside the trainables: the runner holds an attempt's capacity from
// before its trainable starts until after it returns, so a trainable's
// view overlapping beyond a runner's capacity is a runner overbooked.
type ledger struct {
	mu       sync.Mutex
	caps     map[string]events.Resources // runner → capacity
	workDirs map[string]string           // runner → its work directory
	held     map[string]events.Resources // runner → what its trainables hold now
	gpu      map[string]float64          // device id → share held now
	problems []string
	visible  map[string][]string // trial → the GPU ids it saw
}

func newLedger() *ledger {
	return &ledger{
		caps: map[string]events.Resources{}, workDirs: map[string]string{}, held: map[string]events.Resources{},
		gpu: map[string]float64{}, visible: map[string][]string{},
	}
}

// runnerOf finds the runner of a trial directory.
func (l *ledger) runnerOf(dir string) string {
	for name, wd := range l.workDirs {
		if strings.HasPrefix(dir, wd+string(filepath.Separator)) {
			return name
		}
	}
	return ""
}

// book adds (sign 1) or takes off (-1) what the attempt in ctx holds.
func (l *ledger) book(ctx context.Context, sign float64) {
	s, err := session.From(ctx)
	if err != nil {
		panic(err)
	}
	r, ok := session.ResourcesFrom(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	info := s.Info()
	if !ok {
		l.problems = append(l.problems, info.TrialID+": no resources in the trainable's context")
		return
	}
	name := l.runnerOf(info.TrialDir)
	if sign > 0 {
		l.visible[info.TrialID] = r.GPUIDs
	}
	h := l.held[name]
	if h == nil {
		h = events.Resources{}
		l.held[name] = h
	}
	for k, v := range r.Amounts {
		h[k] += sign * v
	}
	if short := h.Short(l.caps[name]); short != "" {
		l.problems = append(l.problems, fmt.Sprintf("runner %s holds %s, more %s than its %s", name, h, short, l.caps[name]))
	}
	gpu := r.Amounts[events.ResourceGPU]
	share := gpu
	if gpu >= 1 {
		share = 1
	}
	if (gpu > 0 && len(r.GPUIDs) != max(1, int(gpu))) || (gpu == 0 && len(r.GPUIDs) > 0) {
		l.problems = append(l.problems, fmt.Sprintf("%s: gpu=%v got devices %v", info.TrialID, gpu, r.GPUIDs))
	}
	for _, id := range r.GPUIDs {
		l.gpu[id] += sign * share
		if l.gpu[id] > 1+1e-9 {
			l.problems = append(l.problems, fmt.Sprintf("device %s booked %v", id, l.gpu[id]))
		}
	}
}

// trainable reports once, after a little work, booking what it holds
// meanwhile.
func (l *ledger) trainable(ctx context.Context, _ map[string]any) error {
	l.book(ctx, 1)
	defer l.book(ctx, -1)
	s, err := session.From(ctx)
	if err != nil {
		return err
	}
	t := time.NewTimer(50 * time.Millisecond) // the work: long enough for trials to overlap
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	_, err = s.Report(ctx, map[string]any{"loss": 1.0}, "")
	return err
}

// startSizedRunner runs a runner of the given capacity with the ledger's
// trainable as "fn".
func startSizedRunner(t *testing.T, srv *bustest.Server, l *ledger, cfg runner.Config) {
	t.Helper()
	nc, err := nats.Connect(srv.URL(), nats.Name(cfg.Name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b, err := bus.New(nc, "runner/"+cfg.Name, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	cfg.WorkDir, cfg.StopGrace = t.TempDir(), time.Second
	cfg.Trainables = map[string]session.Func{"fn": l.trainable}
	caps := events.Resources{events.ResourceCPU: cfg.CPUs}
	if n := max(cfg.GPUs, len(cfg.GPUIDs)); n > 0 {
		caps[events.ResourceGPU] = float64(n)
	}
	l.mu.Lock()
	l.caps[cfg.Name], l.workDirs[cfg.Name] = caps, cfg.WorkDir
	l.mu.Unlock()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = runner.New(b, cfg).Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	bustest.Eventually(t, wait, "runner "+cfg.Name+" in the registry", func() bool {
		runners, ok, err := b.LiveRunners(t.Context())
		return err == nil && ok && slices.ContainsFunc(runners, func(r bus.RunnerInfo) bool { return r.Name == cfg.Name })
	})
}

// resourceSpec is an experiment of the ledger's trainable whose trials ask
// for the resources their config names.
func resourceSpec(name string, res map[string]events.ResourceAmount, space map[string]any) events.ExperimentSpec {
	return events.ExperimentSpec{
		Name: name, Trainable: events.Trainable{Name: "fn", Resources: res}, ParamSpace: space,
		TuneConfig: events.TuneConfig{NumSamples: 1},
	}
}

// checkLogCapacity replays the log: at no point do the attempts a runner
// has started and not ended hold more than caps, by the shapes of their
// work. It returns the runner of each trial's attempts.
func checkLogCapacity(t *testing.T, evs []*events.Event, caps map[string]events.Resources) map[string][]string {
	t.Helper()
	shapes := map[string]events.Resources{} // trial → its work's shape
	on := map[string]string{}               // trial → the runner running it
	held := map[string]events.Resources{}
	ran := map[string][]string{}
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.TrialScheduled:
			shapes[p.TrialID] = p.Shape()
		case *events.TrialStarted:
			on[p.TrialID] = p.Runner
			ran[p.TrialID] = append(ran[p.TrialID], p.Runner)
			h := held[p.Runner]
			if h == nil {
				h = events.Resources{}
				held[p.Runner] = h
			}
			for k, v := range shapes[p.TrialID] {
				h[k] += v
			}
			if short := h.Short(caps[p.Runner]); short != "" {
				t.Errorf("log seq %d: runner %s holds %s, more %s than its %s", ev.Seq, p.Runner, h, short, caps[p.Runner])
			}
		case *events.TrialCompleted, *events.TrialFailed, *events.TrialPaused:
			id := trialOf(ev)
			if r, ok := on[id]; ok {
				for k, v := range shapes[id] {
					held[r][k] -= v
				}
				delete(on, id)
			}
		}
	}
	return ran
}

func trialOf(ev *events.Event) string {
	switch p := ev.Data.(type) {
	case *events.TrialCompleted:
		return p.TrialID
	case *events.TrialFailed:
		return p.TrialID
	case *events.TrialPaused:
		return p.TrialID
	}
	return ""
}

// TestMixedGPUExperiment: 1-GPU, half-GPU and CPU-only trials (a grid
// read through {config: gpus}) over two runners with fake GPUs, 2 and 1.
// Every trial ends TERMINATED; the log shows no runner running more than
// its capacity, and the trainables see their GPUs: a whole one to
// themselves, halves sharing a device, none for CPU-only trials, and no
// device ever booked beyond 1.
func TestMixedGPUExperiment(t *testing.T) {
	srv := bustest.Start(t)
	startController(t, srv, "controller-1")
	client := srv.Bus("client")
	l := newLedger()
	startSizedRunner(t, srv, l, runner.Config{Name: "big", CPUs: 3, GPUIDs: []string{"big-0", "big-1"}})
	startSizedRunner(t, srv, l, runner.Config{Name: "small", CPUs: 2, GPUs: 1})
	sp := resourceSpec("mixedgpu", map[string]events.ResourceAmount{"gpu": {Config: "gpus"}}, map[string]any{
		"gpus": map[string]any{"grid_search": []any{1.0, 0.5, 0.0}},
		"rep":  map[string]any{"grid_search": []any{1.0, 2.0, 3.0, 4.0}},
	})
	submit(t, client, sp)
	if c := completion(t, client, sp.Name); c.Reason != "finished" {
		t.Fatalf("experiment completed %+v", c)
	}
	evs := bustest.Log(t, client, sp.Name)
	caps := map[string]events.Resources{"big": {"cpu": 3, "gpu": 2}, "small": {"cpu": 2, "gpu": 1}}
	ran := checkLogCapacity(t, evs, caps)
	terminated, byShape := 0, map[float64]int{}
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.TrialCompleted:
			if p.Status != events.StatusTerminated {
				t.Errorf("trial %s ended %s (%s)", p.TrialID, p.Status, p.Reason)
			}
			terminated++
		case *events.TrialScheduled:
			byShape[p.Shape()[events.ResourceGPU]]++
		}
	}
	if terminated != 12 || byShape[1] != 4 || byShape[0.5] != 4 || byShape[0] != 4 {
		t.Fatalf("%d trials TERMINATED, work by GPU amount %v; want 12, 4 of each", terminated, byShape)
	}
	for id, runners := range ran {
		if len(runners) != 1 {
			t.Errorf("trial %s started on %v; want one attempt (no work handed back)", id, runners)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.problems {
		t.Error(p)
	}
	if len(l.visible) != 12 {
		t.Fatalf("%d trainables booked; want 12", len(l.visible))
	}
}

// TestTrialBiggerThanEveryRunnerWaitsPending: a trial asking for 2 GPUs
// while the only runner has 1 is created but not scheduled: it stays
// PENDING, with the reason, while the other trial runs; once a runner
// with 2 GPUs registers it runs there.
func TestTrialBiggerThanEveryRunnerWaitsPending(t *testing.T) {
	srv := bustest.Start(t)
	startController(t, srv, "controller-1")
	client := srv.Bus("client")
	l := newLedger()
	startSizedRunner(t, srv, l, runner.Config{Name: "one-gpu", CPUs: 2, GPUs: 1})
	sp := resourceSpec("toobig", map[string]events.ResourceAmount{"gpu": {Config: "gpus"}}, map[string]any{
		"gpus": map[string]any{"grid_search": []any{2.0, 0.0}},
	})
	submit(t, client, sp)
	var big *state.Trial
	var st *state.Experiment
	bustest.Eventually(t, wait, "the CPU trial to end while the 2-GPU one waits", func() bool {
		st = statetest.FoldLog(t, client, sp.Name)
		big = nil
		for _, tr := range st.TrialList() {
			if tr.Config["gpus"] == 2.0 {
				big = tr
			}
		}
		return st.Counts()[events.StatusTerminated] == 1 && big != nil
	})
	if big.Status != events.StatusPending || big.Scheduled {
		t.Fatalf("the 2-GPU trial is %s (scheduled %v); want PENDING, not scheduled", big.Status, big.Scheduled)
	}
	runners, _, err := client.LiveRunners(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := "needs gpu=2; the largest live runner has gpu=1"
	if got := controller.Unfit(st.Spec, big, bus.Totals(runners)); got != want {
		t.Fatalf("why it waits: %q, want %q", got, want)
	}
	startSizedRunner(t, srv, l, runner.Config{Name: "two-gpu", CPUs: 1, GPUs: 2})
	if c := completion(t, client, sp.Name); c.Reason != "finished" {
		t.Fatalf("experiment completed %+v", c)
	}
	ran := checkLogCapacity(t, bustest.Log(t, client, sp.Name), map[string]events.Resources{
		"one-gpu": {"cpu": 2, "gpu": 1}, "two-gpu": {"cpu": 1, "gpu": 2},
	})
	if got := ran[big.ID]; len(got) != 1 || got[0] != "two-gpu" {
		t.Fatalf("the 2-GPU trial ran on %v; want two-gpu once", got)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.problems {
		t.Error(p)
	}
}

// TestLargeTrialNotStarvedBySmallOnes: on a runner with 2 CPUs, a 2-CPU
// trial is scheduled fourth among 1-CPU trials (a grid over cpu through
// {config: cpus}). Small trials keep coming after it, and two of them fit
// the runner at once, but none scheduled after the large one starts before
// it: the runner takes work only when its free capacity holds the largest
// outstanding shape, and work comes oldest first. The large trial runs in
// its first attempt (its work was not handed back).
func TestLargeTrialNotStarvedBySmallOnes(t *testing.T) {
	srv := bustest.Start(t)
	startController(t, srv, "controller-1")
	client := srv.Bus("client")
	l := newLedger()
	startSizedRunner(t, srv, l, runner.Config{Name: "r", CPUs: 2})
	sp := resourceSpec("starve", map[string]events.ResourceAmount{"cpu": {Config: "cpus"}}, map[string]any{
		"cpus": map[string]any{"grid_search": []any{1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0}},
	})
	submit(t, client, sp)
	if c := completion(t, client, sp.Name); c.Reason != "finished" {
		t.Fatalf("experiment completed %+v", c)
	}
	evs := bustest.Log(t, client, sp.Name)
	checkLogCapacity(t, evs, map[string]events.Resources{"r": {"cpu": 2}})
	order := map[string]int{} // trial → its work's place in the log
	var started []string
	var large string
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.TrialScheduled:
			order[p.TrialID] = len(order)
			if p.Shape()[events.ResourceCPU] == 2 {
				large = p.TrialID
			}
		case *events.TrialStarted:
			started = append(started, p.TrialID)
			if p.TrialID == large && p.Attempt != 1 {
				t.Errorf("the large trial started in attempt %d; want 1", p.Attempt)
			}
		}
	}
	if large == "" || len(started) != 8 {
		t.Fatalf("large trial %q, %d starts; want one large trial and 8 starts", large, len(started))
	}
	for i, id := range started {
		if id == large {
			break
		}
		if order[id] > order[large] {
			t.Fatalf("start %d: trial %s, scheduled after the large trial %s, started before it (starts %v)", i+1, id, large, started)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.problems {
		t.Error(p)
	}
}
