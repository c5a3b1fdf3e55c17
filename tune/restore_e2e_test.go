package tune_test

// End-to-end restore tests (issue 5): a crash with trials in every status,
// the grid total after an interruption, and restores from an S3 bucket and
// from a moved experiment folder with the NATS store gone.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/session"
	"github.com/tunejet/tunejet/internal/state"
	store "github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
	"github.com/tunejet/tunejet/services/controller"
	"github.com/tunejet/tunejet/services/restorer"
	"github.com/tunejet/tunejet/services/runner"
	"github.com/tunejet/tunejet/services/syncer"
	"github.com/tunejet/tunejet/tune"
)

// e2eWait bounds every poll of these tests.
const e2eWait = time.Minute

// stoppable is a deployment whose services can be stopped the way the
// embedded stack stops them on Ctrl-C — the controller records the
// interruption, the runner hands its trials back, the syncer goes last —
// and started again on the same nats-server, whose log survives.
type stoppable struct {
	*deployment
	slots               int
	fns                 map[string]session.Func
	stopFront, stopSync context.CancelFunc
	front, back         *sync.WaitGroup
}

func startStoppable(t *testing.T, slots int, fns map[string]tune.Trainable) *stoppable {
	t.Helper()
	srv := bustest.Start(t)
	d := &stoppable{deployment: &deployment{srv: srv, bus: srv.Bus("test")}, slots: slots, fns: map[string]session.Func{}}
	for k, v := range fns {
		d.fns[k] = v
	}
	d.startServices(t)
	return d
}

// startServices starts a controller, a runner, the syncer and the
// restorer on the deployment's server.
func (d *stoppable) startServices(t *testing.T) {
	t.Helper()
	frontCtx, stopFront := context.WithCancel(context.Background())
	syncCtx, stopSync := context.WithCancel(context.Background())
	front, back := &sync.WaitGroup{}, &sync.WaitGroup{}
	run := func(wg *sync.WaitGroup, ctx context.Context, name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	run(front, frontCtx, "controller", controller.New(d.srv.Bus("controller"), controller.Config{InterruptOnShutdown: true}).Run)
	run(front, frontCtx, "runner", runner.New(d.srv.Bus("runner"), runner.Config{Slots: d.slots, Trainables: d.fns, WorkDir: t.TempDir()}).Run)
	run(front, frontCtx, "restorer", restorer.New(d.srv.Bus("restorer"), restorer.Config{}).Run)
	run(back, syncCtx, "syncer", syncer.New(d.srv.Bus("syncer"), syncer.Config{WorkDir: t.TempDir()}).Run)
	d.stopFront, d.stopSync, d.front, d.back = stopFront, stopSync, front, back
	// Registered after the services' connections, so it runs before they
	// are closed.
	t.Cleanup(d.stopServices)
}

// stopServices stops the controller, runner and restorer, then the syncer
// once it has written what they published. The server keeps running.
func (d *stoppable) stopServices() {
	if d.stopFront == nil {
		return
	}
	d.stopFront()
	d.front.Wait()
	d.stopSync()
	d.back.Wait()
	d.stopFront = nil
}

// fitInBackground runs Fit until it returns or cancel is called.
func fitInBackground(t *testing.T, tuner *tune.Tuner) (cancel func(), wait func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := tuner.Fit(ctx)
		done <- err
	}()
	t.Cleanup(cancel)
	return cancel, func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(e2eWait):
			t.Fatalf("Fit did not return within %v of its context's end", e2eWait)
			return nil
		}
	}
}

// poll calls cond every 20 ms until it holds, failing the test after
// e2eWait.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(e2eWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", e2eWait, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// foldLog folds an experiment's log as every reader of it does.
func foldLog(t *testing.T, d *deployment, evs []*events.Event, exp string) *state.Experiment {
	t.Helper()
	st := state.New(exp)
	for _, ev := range evs {
		next, _, err := state.Fold(t.Context(), st, ev, restorestate.Loader(d.bus, st.Name))
		if err != nil {
			t.Fatalf("fold event %d (%s): %v", ev.Seq, ev.Type(), err)
		}
		st = next
	}
	return st
}

// lastRestoredSeq is the log sequence of the last experiment.restored.
func lastRestoredSeq(t *testing.T, evs []*events.Event) uint64 {
	t.Helper()
	var seq uint64
	for _, ev := range evs {
		if _, ok := ev.Data.(*events.ExperimentRestored); ok {
			seq = ev.Seq
		}
	}
	if seq == 0 {
		t.Fatal("the log holds no experiment.restored")
	}
	return seq
}

// startsAfter returns the trial.started events after seq, by trial.
func startsAfter(evs []*events.Event, seq uint64) map[string][]*events.TrialStarted {
	out := map[string][]*events.TrialStarted{}
	for _, ev := range evs {
		if p, ok := ev.Data.(*events.TrialStarted); ok && ev.Seq > seq {
			out[p.TrialID] = append(out[p.TrialID], p)
		}
	}
	return out
}

// stepFrom reads the step saved in the trial's checkpoint, 0 without one.
func stepFrom(ctx context.Context) (int, error) {
	dir, err := tune.GetCheckpoint(ctx)
	if err != nil || dir == "" {
		return 0, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "step"))
	if err != nil {
		return 0, err
	}
	var step int
	err = json.Unmarshal(b, &step)
	return step, err
}

// reportStep reports step with a checkpoint that holds it.
func reportStep(ctx context.Context, step int) error {
	dir, err := os.MkdirTemp("", "ckpt")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b, _ := json.Marshal(step)
	if err := os.WriteFile(filepath.Join(dir, "step"), b, 0o644); err != nil {
		return err
	}
	return tune.Report(ctx, map[string]any{"step": step}, tune.WithCheckpoint(dir))
}

func xOf(config map[string]any) int {
	x, _ := config["x"].(float64)
	return int(x)
}

// trialsByX indexes a state's trials by their config's x.
func trialsByX(st *state.Experiment) map[int]*state.Trial {
	out := map[int]*state.Trial{}
	for _, tr := range st.TrialList() {
		out[xOf(tr.Config)] = tr
	}
	return out
}

func resultsByX(g *tune.ResultGrid) map[int]tune.Result {
	out := map[int]tune.Result{}
	for _, r := range g.Results() {
		out[xOf(r.Config)] = r
	}
	return out
}

// everyStatus reports three steps with a checkpoint each. On the first run
// (firstRun set) the trial with x=1 fails after step 1 and the trial with
// x=2 blocks after step 2 until its context ends (the interruption).
func everyStatus(firstRun *atomic.Bool) tune.Trainable {
	return func(ctx context.Context, config map[string]any) error {
		step, err := stepFrom(ctx)
		if err != nil {
			return err
		}
		for step < 3 {
			step++
			if err := reportStep(ctx, step); err != nil {
				return err
			}
			if !firstRun.Load() {
				continue
			}
			switch x := xOf(config); {
			case x == 1 && step == 1:
				return errors.New("x=1 fails on the first run")
			case x == 2 && step == 2:
				<-ctx.Done()
				return ctx.Err()
			}
		}
		return nil
	}
}

// TestRestoreCrashWithEveryStatus: an experiment interrupted while its
// trials are TERMINATED (x=0), ERROR (x=1), RUNNING (x=2) and PENDING
// (x=3: one runner slot, max_concurrent_trials 2) is restored with Ray's
// default flags, and with resume_unfinished=false and resume_errored.
func TestRestoreCrashWithEveryStatus(t *testing.T) {
	tests := []struct {
		name string
		opts []tune.Option
		// pendingNeverRuns: x=3 must have no trial.started in the log.
		pendingNeverRuns bool
		// check runs on the restored results, the log after
		// experiment.restored and the state at the interruption.
		check func(t *testing.T, g *tune.ResultGrid, after map[string][]*events.TrialStarted, before map[int]*state.Trial)
	}{
		{"default flags", nil, false, func(t *testing.T, g *tune.ResultGrid, after map[string][]*events.TrialStarted, before map[int]*state.Trial) {
			if g.NumErrors() != 1 || g.NumTerminated() != 3 {
				t.Errorf("restored: %d ERROR, %d TERMINATED; want exactly 1 error (x=1) and 3 TERMINATED", g.NumErrors(), g.NumTerminated())
			}
			res := resultsByX(g)
			if res[1].Status != events.StatusError || res[1].TrialID != before[1].ID {
				t.Errorf("x=1: %s (trial %s); want it still ERROR (trial %s)", res[1].Status, res[1].TrialID, before[1].ID)
			}
			for _, x := range []int{0, 1} {
				if s := after[before[x].ID]; len(s) != 0 {
					t.Errorf("x=%d (%s) started again after the restore: %+v; want it left alone", x, before[x].Status, s)
				}
			}
			if s := after[before[2].ID]; len(s) != 1 || s[0].RestoredFrom != before[2].LatestCheckpoint().Name {
				t.Errorf("x=2 (RUNNING) after the restore: started %+v; want once, from %s", s, before[2].LatestCheckpoint().Name)
			}
			if s := after[before[3].ID]; len(s) != 1 || s[0].RestoredFrom != "" {
				t.Errorf("x=3 (PENDING) after the restore: started %+v; want once, from scratch", s)
			}
			for _, x := range []int{0, 2, 3} {
				if r := res[x]; r.Status != events.StatusTerminated || r.Metrics["training_iteration"] != 3.0 || r.Metrics["step"] != 3.0 {
					t.Errorf("x=%d: %s at iteration %v step %v; want TERMINATED at 3", x, r.Status, r.Metrics["training_iteration"], r.Metrics["step"])
				}
			}
		}},
		{"resume_unfinished=false with resume_errored", []tune.Option{tune.WithResumeUnfinished(false), tune.WithResumeErrored()}, true, func(t *testing.T, g *tune.ResultGrid, after map[string][]*events.TrialStarted, before map[int]*state.Trial) {
			if g.NumErrors() != 0 || g.NumTerminated() != 4 {
				t.Errorf("restored: %d ERROR, %d TERMINATED; want 0 and 4", g.NumErrors(), g.NumTerminated())
			}
			res := resultsByX(g)
			for x, was := range map[int]string{0: "TERMINATED", 2: "RUNNING", 3: "PENDING"} {
				if s := after[before[x].ID]; len(s) != 0 {
					t.Errorf("x=%d (%s when interrupted) started after the restore: %+v; want it not run", x, was, s)
				}
			}
			if r := res[2]; r.Status != events.StatusTerminated || r.Metrics["training_iteration"] != 2.0 {
				t.Errorf("x=2 (RUNNING): %s at iteration %v; want TERMINATED at its iteration 2", r.Status, r.Metrics["training_iteration"])
			}
			if r := res[3]; r.Status != events.StatusTerminated || r.Metrics["training_iteration"] != nil {
				t.Errorf("x=3 (PENDING): %s with result %v; want TERMINATED without ever running", r.Status, r.Metrics)
			}
			r := res[1]
			if r.TrialID != before[1].ID || r.Status != events.StatusTerminated || r.Metrics["training_iteration"] != 3.0 || r.Metrics["step"] != 3.0 {
				t.Errorf("x=1 (ERROR): trial %s %s at iteration %v step %v; want trial %s resumed to TERMINATED at 3",
					r.TrialID, r.Status, r.Metrics["training_iteration"], r.Metrics["step"], before[1].ID)
			}
			if r.NumFailures != 1 {
				t.Errorf("x=1: %d failures; want its 1 failure kept", r.NumFailures)
			}
			if s := after[before[1].ID]; len(s) != 1 || s[0].RestoredFrom != before[1].LatestCheckpoint().Name {
				t.Errorf("x=1 after the restore: started %+v; want once, from its checkpoint %s", s, before[1].LatestCheckpoint().Name)
			}
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var firstRun atomic.Bool
			firstRun.Store(true)
			d := startStoppable(t, 1, map[string]tune.Trainable{"everyStatus": everyStatus(&firstRun)})
			rc := storage(t)
			name := fmt.Sprintf("every_status%d", i)
			tuner, err := tune.NewTuner("everyStatus", tune.WithName(name), tune.WithRunConfig(rc), d.nats(),
				tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(0, 1, 2, 3)}),
				tune.WithTuneConfig(tune.TuneConfig{MaxConcurrentTrials: 2}))
			if err != nil {
				t.Fatal(err)
			}
			cancel, wait := fitInBackground(t, tuner)
			poll(t, "trials TERMINATED, ERROR, RUNNING and PENDING at once", func() bool {
				by := trialsByX(foldLog(t, d.deployment, d.events(t, name), name))
				return len(by) == 4 && by[0].Status == events.StatusTerminated && by[1].Status == events.StatusError &&
					by[2].Status == events.StatusRunning && len(by[2].Checkpoints) == 2 && by[3].Status == events.StatusPending
			})
			d.stopServices()
			cancel()
			if err := wait(); !errors.Is(err, tune.ErrInterrupted) {
				t.Fatalf("Fit after the interruption: %v; want ErrInterrupted", err)
			}
			st := foldLog(t, d.deployment, d.events(t, name), name)
			if st.Status != state.ExperimentInterrupted {
				t.Fatalf("experiment %s after stopping the services; want %s", st.Status, state.ExperimentInterrupted)
			}
			before := trialsByX(st)
			if before[2].Finished() || before[3].Status != events.StatusPending || before[1].LatestCheckpoint() == nil {
				t.Fatalf("state at the interruption: x=2 %s, x=3 %s, x=1 checkpoints %v; want x=2 unfinished, x=3 PENDING, x=1 with a checkpoint",
					before[2].Status, before[3].Status, before[1].Checkpoints)
			}

			firstRun.Store(false)
			d.startServices(t)
			restored, err := tune.Restore(t.Context(), filepath.Join(rc.StoragePath, name), "everyStatus", append(tc.opts, d.nats())...)
			if err != nil {
				t.Fatal(err)
			}
			g, err := restored.Fit(t.Context())
			if err != nil {
				t.Fatalf("Fit of the restored experiment: %v", err)
			}
			if g.Len() != 4 {
				t.Fatalf("restored: %d trials, want 4", g.Len())
			}
			evs := d.events(t, name)
			after := startsAfter(evs, lastRestoredSeq(t, evs))
			tc.check(t, g, after, before)
			if tc.pendingNeverRuns {
				for _, ev := range evs {
					if p, ok := ev.Data.(*events.TrialStarted); ok && p.TrialID == before[3].ID {
						t.Errorf("x=3 (PENDING) started at seq %d; it must never run", ev.Seq)
					}
				}
			}
		})
	}
}

// gridHeld reports two steps with a checkpoint each; on the first run
// (hold set) every trial after the 16th blocks after its first step until
// its context ends. With max_concurrent_trials 4, the first run then stops
// creating trials at exactly 20: 16 TERMINATED and 4 RUNNING.
func gridHeld(hold *atomic.Bool, started *atomic.Int32) tune.Trainable {
	return func(ctx context.Context, config map[string]any) error {
		n := started.Add(1)
		step, err := stepFrom(ctx)
		if err != nil {
			return err
		}
		for step < 2 {
			step++
			if err := reportStep(ctx, step); err != nil {
				return err
			}
			if hold.Load() && n > 16 {
				<-ctx.Done()
				return ctx.Err()
			}
		}
		return nil
	}
}

// TestRestoreGridTotal: a 3×3 grid with num_samples 3 interrupted after
// 20 of its trials were created ends, restored, with exactly 27 trials,
// each grid value 9 times, each pair 3 times, no trial id twice, and never
// more than max_concurrent_trials running during the restored run.
func TestRestoreGridTotal(t *testing.T) {
	var hold atomic.Bool
	var started atomic.Int32
	hold.Store(true)
	d := startStoppable(t, 8, map[string]tune.Trainable{"gridHeld": gridHeld(&hold, &started)})
	rc := storage(t)
	const name = "grid_total"
	tuner, err := tune.NewTuner("gridHeld", tune.WithName(name), tune.WithRunConfig(rc), d.nats(),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1, 2, 3), "y": tune.GridSearch("a", "b", "c")}),
		tune.WithTuneConfig(tune.TuneConfig{NumSamples: 3, MaxConcurrentTrials: 4}))
	if err != nil {
		t.Fatal(err)
	}
	cancel, wait := fitInBackground(t, tuner)
	created := func(evs []*events.Event) int {
		n := 0
		for _, ev := range evs {
			if _, ok := ev.Data.(*events.TrialCreated); ok {
				n++
			}
		}
		return n
	}
	poll(t, "20 trials created, 4 of them held RUNNING", func() bool {
		evs := d.events(t, name)
		c := foldLog(t, d.deployment, evs, name).Counts()
		return created(evs) == 20 && c[events.StatusTerminated] == 16 && c[events.StatusRunning] == 4
	})
	d.stopServices()
	cancel()
	if err := wait(); !errors.Is(err, tune.ErrInterrupted) {
		t.Fatalf("Fit after the interruption: %v; want ErrInterrupted", err)
	}
	if n := created(d.events(t, name)); n != 20 {
		t.Fatalf("%d trials created when interrupted, want 20", n)
	}

	hold.Store(false)
	d.startServices(t)
	restored, err := tune.Restore(t.Context(), filepath.Join(rc.StoragePath, name), "gridHeld", d.nats())
	if err != nil {
		t.Fatal(err)
	}
	g, err := restored.Fit(t.Context())
	if err != nil {
		t.Fatalf("Fit of the restored experiment: %v", err)
	}
	if g.Len() != 27 || g.NumTerminated() != 27 {
		t.Fatalf("restored: %d trials, %d TERMINATED; want 27 and 27", g.Len(), g.NumTerminated())
	}
	ids := map[string]bool{}
	perKey := map[string]int{}
	perPair := map[string]int{}
	for _, r := range g.Results() {
		if ids[r.TrialID] {
			t.Errorf("trial id %s appears twice in the results", r.TrialID)
		}
		ids[r.TrialID] = true
		perKey[fmt.Sprint("x=", r.Config["x"])]++
		perKey[fmt.Sprint("y=", r.Config["y"])]++
		perPair[fmt.Sprint(r.Config["x"], r.Config["y"])]++
		if r.Metrics["training_iteration"] != 2.0 {
			t.Errorf("trial %s ended at iteration %v, want 2", r.TrialID, r.Metrics["training_iteration"])
		}
	}
	for _, v := range []string{"x=1", "x=2", "x=3", "y=a", "y=b", "y=c"} {
		if perKey[v] != 9 {
			t.Errorf("grid value %s: %d trials, want 9 (all: %v)", v, perKey[v], perKey)
		}
	}
	if len(perPair) != 9 {
		t.Errorf("%d distinct grid points, want 9: %v", len(perPair), perPair)
	}
	for k, n := range perPair {
		if n != 3 {
			t.Errorf("grid point %s: %d trials, want 3", k, n)
		}
	}

	evs := d.events(t, name)
	createdIDs := map[string]int{}
	for _, ev := range evs {
		if p, ok := ev.Data.(*events.TrialCreated); ok {
			createdIDs[p.TrialID]++
		}
	}
	if len(createdIDs) != 27 || created(evs) != 27 {
		t.Errorf("the log created %d trials with %d distinct ids; want 27 and 27", created(evs), len(createdIDs))
	}
	running, peak := map[string]bool{}, 0
	for _, ev := range evs {
		if ev.Seq <= lastRestoredSeq(t, evs) {
			continue
		}
		switch ev.Data.(type) {
		case *events.TrialStarted:
			running[ev.Trial()] = true
		case *events.TrialCompleted, *events.TrialFailed:
			delete(running, ev.Trial())
		}
		peak = max(peak, len(running))
	}
	if peak > 4 {
		t.Errorf("%d trials ran at once after the restore; max_concurrent_trials is 4 (ray#40652)", peak)
	}
}

// failsFirst reports two steps with a checkpoint each, after some
// simulated work; on the first run (first set) it fails after step 1.
func failsFirst(first *atomic.Bool) tune.Trainable {
	return func(ctx context.Context, config map[string]any) error {
		step, err := stepFrom(ctx)
		if err != nil {
			return err
		}
		for step < 2 {
			step++
			time.Sleep(50 * time.Millisecond) // simulated training work
			if err := reportStep(ctx, step); err != nil {
				return err
			}
			if first.Load() {
				return errors.New("fails on the first run")
			}
		}
		return nil
	}
}

// TestRestoreKeepsMaxConcurrentTrials (ray#40652): six errored trials
// resumed at once with resume_errored, on a runner with eight slots, run
// at most max_concurrent_trials (2) at a time.
func TestRestoreKeepsMaxConcurrentTrials(t *testing.T) {
	var first atomic.Bool
	first.Store(true)
	d := startDeployment(t, 8, map[string]tune.Trainable{"failsFirst": failsFirst(&first)})
	rc := storage(t)
	const name = "restore_concurrency"
	g := d.fit(t, "failsFirst", tune.WithName(name), tune.WithRunConfig(rc),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1, 2, 3, 4, 5, 6)}),
		tune.WithTuneConfig(tune.TuneConfig{MaxConcurrentTrials: 2}))
	if g.NumErrors() != 6 {
		t.Fatalf("first run: %d errors, want 6", g.NumErrors())
	}
	first.Store(false)
	tuner, err := tune.Restore(t.Context(), filepath.Join(rc.StoragePath, name), "failsFirst", tune.WithResumeErrored(), d.nats())
	if err != nil {
		t.Fatal(err)
	}
	if g, err = tuner.Fit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if g.NumTerminated() != 6 {
		t.Fatalf("restored: %d TERMINATED, want 6", g.NumTerminated())
	}
	evs := d.events(t, name)
	seq := lastRestoredSeq(t, evs)
	running, peak, starts := map[string]bool{}, 0, 0
	for _, ev := range evs {
		if ev.Seq <= seq {
			continue
		}
		switch ev.Data.(type) {
		case *events.TrialStarted:
			running[ev.Trial()] = true
			starts++
		case *events.TrialCompleted, *events.TrialFailed:
			delete(running, ev.Trial())
		}
		peak = max(peak, len(running))
	}
	if starts != 6 || peak > 2 {
		t.Errorf("after the restore: %d starts, at most %d trials running at once; want 6 starts, never more than 2", starts, peak)
	}
}

// gate reports three steps with a checkpoint each. While hold is set, the
// trial with x=1 blocks after step 2 until its context ends. A trial that
// starts from a checkpoint records the step it resumed at in resumed.
func gate(hold *atomic.Bool, resumed *sync.Map) tune.Trainable {
	return func(ctx context.Context, config map[string]any) error {
		step, err := stepFrom(ctx)
		if err != nil {
			return err
		}
		if step > 0 {
			resumed.Store(xOf(config), step)
		}
		for step < 3 {
			step++
			if err := reportStep(ctx, step); err != nil {
				return err
			}
			if hold.Load() && xOf(config) == 1 && step == 2 {
				<-ctx.Done()
				return ctx.Err()
			}
		}
		return nil
	}
}

// storedState reads the newest experiment_state-*.json of an experiment
// directory (a path or URL); ok is false while there is none.
func storedState(t *testing.T, expPath string) (st *state.Experiment, key string, ok bool) {
	t.Helper()
	b, err := store.OpenBucket(t.Context(), expPath)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	key, err = store.NewestStateKey(t.Context(), b)
	if err != nil {
		return nil, "", false
	}
	data, err := store.ReadAll(t.Context(), b, key)
	if err != nil {
		t.Fatal(err)
	}
	st, err = state.Load(data)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return st, key, true
}

// interruptGate runs the gate experiment on the embedded stack (its NATS
// store in a temp dir) until x=0 has finished and x=1's second checkpoint
// is persisted in storage, then cancels Fit as Ctrl-C does. It returns the
// trainable and the stored state after the interruption.
func interruptGate(t *testing.T, storagePath, name string) (tune.Trainable, *sync.Map, *state.Experiment) {
	t.Helper()
	var hold atomic.Bool
	hold.Store(true)
	resumed := &sync.Map{}
	fn := gate(&hold, resumed)
	tuner, err := tune.NewTuner(fn, tune.WithTrainableName("gate"), tune.WithName(name),
		tune.WithStoreDir(t.TempDir()), tune.WithRunnerSlots(2),
		tune.WithRunConfig(tune.RunConfig{StoragePath: storagePath, SyncConfig: tune.SyncConfig{SyncPeriodS: 0.1}}),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(0, 1)}))
	if err != nil {
		t.Fatal(err)
	}
	cancel, wait := fitInBackground(t, tuner)
	expPath := store.Join(storagePath, name)
	poll(t, "x=0 TERMINATED and x=1's second checkpoint persisted", func() bool {
		st, _, ok := storedState(t, expPath)
		if !ok {
			return false
		}
		by := trialsByX(st)
		return by[0] != nil && by[0].Status == events.StatusTerminated && by[1] != nil &&
			by[1].Status == events.StatusRunning && by[1].Persisted["checkpoint_000001"]
	})
	cancel()
	if err := wait(); !errors.Is(err, tune.ErrInterrupted) {
		t.Fatalf("Fit after Ctrl-C: %v; want ErrInterrupted", err)
	}
	hold.Store(false)
	st, _, ok := storedState(t, expPath)
	if !ok {
		t.Fatal("no experiment state stored after the interruption")
	}
	if st.Status != state.ExperimentInterrupted {
		t.Errorf("stored experiment status %s after Ctrl-C, want %s", st.Status, state.ExperimentInterrupted)
	}
	if c := trialsByX(st)[1].LatestCheckpoint(); c == nil || c.Name != "checkpoint_000001" {
		t.Fatalf("stored x=1's latest checkpoint %+v, want checkpoint_000001", c)
	}
	return fn, resumed, st
}

// restoreGateFresh restores the gate experiment at expPath on an embedded
// stack with a new, empty NATS store — the old one is gone, so the stored
// snapshot is the only source — and checks what both have in common.
func restoreGateFresh(t *testing.T, expPath string, fn tune.Trainable, resumed *sync.Map, before *state.Experiment) *tune.ResultGrid {
	t.Helper()
	storeDir := t.TempDir()
	can, err := tune.CanRestore(t.Context(), expPath, tune.WithStoreDir(storeDir))
	if err != nil || !can.OK || can.Source != "snapshot" || !strings.HasPrefix(can.Snapshot, "experiment_state-") {
		t.Fatalf("CanRestore(%s) with the NATS store gone: %+v, %v; want OK from a stored experiment_state file", expPath, can, err)
	}
	tuner, err := tune.Restore(t.Context(), expPath, fn, tune.WithTrainableName("gate"), tune.WithStoreDir(storeDir), tune.WithRunnerSlots(2))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := tuner.GetResults(t.Context())
	if err != nil {
		t.Fatalf("GetResults before Fit: %v", err)
	}
	if stored.ExperimentPath != expPath || stored.Len() != 2 {
		t.Errorf("GetResults before Fit: %d trials at %s; want 2 at %s", stored.Len(), stored.ExperimentPath, expPath)
	}
	g, err := tuner.Fit(t.Context())
	if err != nil {
		t.Fatalf("Fit of the restored experiment: %v", err)
	}
	if g.Len() != 2 || g.NumTerminated() != 2 {
		t.Fatalf("restored: %d trials, %d TERMINATED; want 2, 2", g.Len(), g.NumTerminated())
	}
	if g.ExperimentPath != expPath {
		t.Errorf("ExperimentPath = %q, want the restore path %q", g.ExperimentPath, expPath)
	}
	want := trialsByX(before)
	for x, r := range resultsByX(g) {
		if r.TrialID != want[x].ID {
			t.Errorf("x=%d: trial %s, want the same trial %s", x, r.TrialID, want[x].ID)
		}
		if r.Metrics["training_iteration"] != 3.0 || r.Metrics["step"] != 3.0 {
			t.Errorf("x=%d: iteration %v step %v, want 3 and 3", x, r.Metrics["training_iteration"], r.Metrics["step"])
		}
		if !strings.HasPrefix(r.Path, strings.Split(expPath, "?")[0]+"/") {
			t.Errorf("x=%d: Path %q is not under %s", x, r.Path, expPath)
		}
		if r.Checkpoint == nil || !strings.HasPrefix(r.Checkpoint.Path, strings.Split(r.Path, "?")[0]+"/") {
			t.Errorf("x=%d: checkpoint %+v is not under the trial's path %s", x, r.Checkpoint, r.Path)
		}
	}
	if v, ok := resumed.Load(1); !ok || v != 2 {
		t.Errorf("x=1 resumed at step %v (ok %v), want 2: from its persisted checkpoint_000001", v, ok)
	}
	if v, ok := resumed.Load(0); ok {
		t.Errorf("x=0 (TERMINATED) ran again, resuming at step %v", v)
	}
	return g
}

// TestRestoreMovedFolder: the experiment folder is moved elsewhere after
// Ctrl-C and the NATS store is gone; restoring from the new place uses the
// stored snapshot, and the results and every new file are at the new
// place.
func TestRestoreMovedFolder(t *testing.T) {
	const name = "moved"
	oldRoot := t.TempDir()
	fn, resumed, before := interruptGate(t, oldRoot, name)
	newRoot := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.MkdirAll(newRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(oldRoot, name), filepath.Join(newRoot, name)); err != nil {
		t.Fatal(err)
	}
	states := func() []string {
		s, _ := filepath.Glob(filepath.Join(newRoot, name, "experiment_state-*.json"))
		sort.Strings(s)
		return s
	}
	statesBefore := states()
	expPath := filepath.Join(newRoot, name)
	g := restoreGateFresh(t, expPath, fn, resumed, before)

	if _, err := os.Stat(filepath.Join(oldRoot, name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old experiment folder is back after the restore (%v); new files must go to the new place", err)
	}
	if got := states(); len(got) != len(statesBefore)+1 {
		t.Errorf("experiment_state files at the new place: %v before, %v after; want one more for the restored run", statesBefore, got)
	}
	r := resultsByX(g)[1]
	if r.Checkpoint == nil || r.Checkpoint.Name != "checkpoint_000002" {
		t.Fatalf("x=1's latest checkpoint %+v, want checkpoint_000002 (numbering continues)", r.Checkpoint)
	}
	b, err := os.ReadFile(filepath.Join(r.Checkpoint.Path, "step"))
	if err != nil || strings.TrimSpace(string(b)) != "3" {
		t.Errorf("%s/step: %q, %v; want the restored run's step 3 at the new place", r.Checkpoint.Path, b, err)
	}
	rows := readLines(t, filepath.Join(r.Path, "result.json"))
	var last map[string]any
	if err := json.Unmarshal([]byte(rows[len(rows)-1]), &last); err != nil || last["training_iteration"] != 3.0 {
		t.Errorf("x=1's result.json at the new place ends with %s (%v); want the restored run's iteration 3", rows[len(rows)-1], err)
	}
	moved, err := tune.LoadResults(t.Context(), expPath)
	if err != nil {
		t.Fatalf("LoadResults at the new place: %v", err)
	}
	if moved.NumTerminated() != 2 {
		t.Errorf("LoadResults at the new place: %d TERMINATED, want 2 (the restored run's state)", moved.NumTerminated())
	}
	for _, r := range moved.Results() {
		if !strings.HasPrefix(r.Path, expPath+string(filepath.Separator)) {
			t.Errorf("LoadResults: trial %s at %s, want under %s", r.TrialID, r.Path, expPath)
		}
	}
}

// TestRestoreFromS3 interrupts an experiment stored in S3 (gofakes3 on
// loopback) and restores it from its s3:// URL with the NATS store gone:
// the snapshot and x=1's checkpoint come back from the bucket.
func TestRestoreFromS3(t *testing.T) {
	const name = "s3_restore"
	sp := storagetest.S3(t)
	fn, resumed, before := interruptGate(t, sp, name)
	expPath := store.Join(sp, name)
	g := restoreGateFresh(t, expPath, fn, resumed, before)

	b, err := store.OpenBucket(t.Context(), expPath)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var states []string
	it := b.List(&blob.ListOptions{Prefix: "experiment_state-", Delimiter: "/"})
	for {
		obj, err := it.Next(t.Context())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, obj.Key)
	}
	if len(states) != 2 {
		t.Errorf("experiment_state files in the bucket: %v; want 2 (the first run's and the restored run's)", states)
	}
	r := resultsByX(g)[1]
	dir := path.Base(strings.Split(r.Path, "?")[0])
	read := func(key string) string {
		data, err := b.ReadAll(t.Context(), key)
		if err != nil {
			t.Fatalf("read %s from the bucket: %v", key, err)
		}
		return string(data)
	}
	if got := strings.TrimSpace(read(dir + "/checkpoint_000002/step")); got != "3" {
		t.Errorf("x=1's checkpoint_000002/step in the bucket: %q, want 3", got)
	}
	rows := strings.Split(strings.TrimSuffix(read(dir+"/result.json"), "\n"), "\n")
	var last map[string]any
	if err := json.Unmarshal([]byte(rows[len(rows)-1]), &last); err != nil || last["training_iteration"] != 3.0 {
		t.Errorf("x=1's result.json in the bucket ends with %s (%v); want iteration 3", rows[len(rows)-1], err)
	}
}
