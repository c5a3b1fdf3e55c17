package runner

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/session"
	"github.com/tunejet/tunejet/internal/state/statetest"
	"github.com/tunejet/tunejet/services/controller"
)

// TestAnIdleRunnerTakesWorkScheduledAfterItsEmptyFetch: trials run one at
// a time; the runner's fetch finds no work while the first runs, and the
// second's work reaches its gate after it took the first's and before it
// starts to wait for more (the hook holds it there). It takes that work at once, not at its next idle
// poll (an hour here): a wake-up the gate gave between the empty fetch
// and the wait is not lost.
func TestAnIdleRunnerTakesWorkScheduledAfterItsEmptyFetch(t *testing.T) {
	srv := bustest.Start(t)
	ctl := controller.New(srv.Bus("controller"), controller.Config{Tick: 20 * time.Millisecond})
	client := srv.Bus("client")
	const exp = "idle"
	r := New(srv.Bus("runner"), Config{Name: "r", CPUs: 2, WorkDir: t.TempDir(), StopGrace: time.Second,
		Trainables: map[string]session.Func{"fn": reportOnce}})
	r.hooks.idlePoll = time.Hour
	var once sync.Once
	var took atomic.Bool
	r.hooks.took = func(string, *events.TrialScheduled) { took.Store(true) }
	r.hooks.idle = func(g *gate) {
		if !took.Load() {
			return // the first trial's work is not taken yet
		}
		once.Do(func() { // the second trial's work is in the log, and the gate has read it
			bustest.CheckFor(t, handBackWait, func() error {
				var seqs []uint64
				for _, ev := range bustest.Log(t, client, exp) {
					if _, ok := ev.Data.(*events.TrialScheduled); ok {
						seqs = append(seqs, ev.Seq)
					}
				}
				g.mu.Lock()
				seen := g.seen
				g.mu.Unlock()
				if len(seqs) < 2 || seen < seqs[1] {
					return fmt.Errorf("gate at %d; trial work at %v", seen, seqs)
				}
				return nil
			})
		})
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{ctl.Run, r.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	sp := events.ExperimentSpec{
		Name: exp, Trainable: events.Trainable{Name: "fn"},
		ParamSpace: map[string]any{"x": map[string]any{"grid_search": []any{1.0, 2.0}}},
		TuneConfig: events.TuneConfig{NumSamples: 1, MaxConcurrentTrials: 1},
	}
	if _, err := client.Publish(t.Context(), client.Event(exp, events.WriterClient, &events.ExperimentSubmitted{Spec: sp})); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, handBackWait, "both trials to run, the second taken without an idle poll", func() bool {
		return statetest.FoldLog(t, client, exp).Done()
	})
}
