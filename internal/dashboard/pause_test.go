package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/dashboard"
	"github.com/tunejet/tunejet/tune"
)

// resumed is a HyperBand experiment (max_t 9, reduction factor 3, 9 trials
// on 2 slots) whose trials were paused at their milestones, two of them
// resumed from their checkpoints, interrupted then by its stack's
// shutdown, and restored from the log to its end on a new stack over the
// same store.
type resumed struct {
	name    string
	expPath string
	// dash serves the log of the stack the restore ran on.
	dash string
	// trial is the trial that was paused, then resumed before the
	// interruption.
	trial string
}

// resumable reports loss = x / i with a checkpoint holding i at every
// iteration, going on from the checkpoint it resumes from, until it is
// stopped or paused. While hold is set, an attempt that resumed from a
// checkpoint waits for its context's end before its first report, so
// that the experiment cannot end before the test interrupts it.
func resumable(hold *atomic.Bool) tune.Trainable {
	return func(ctx context.Context, config map[string]any) error {
		x, _ := config["x"].(float64)
		var from struct{ I float64 }
		dir, err := tune.GetCheckpoint(ctx)
		if err != nil {
			return err
		}
		if dir != "" {
			b, err := os.ReadFile(filepath.Join(dir, "state.json"))
			if err != nil {
				return err
			}
			if err := json.Unmarshal(b, &from); err != nil {
				return err
			}
			if hold.Load() {
				<-ctx.Done()
				return ctx.Err()
			}
		}
		for i := from.I + 1; ; i++ {
			dir, err := os.MkdirTemp("", "ckpt")
			if err != nil {
				return err
			}
			b, _ := json.Marshal(map[string]float64{"I": i})
			if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o644); err != nil {
				return err
			}
			err = tune.Report(ctx, map[string]any{"loss": x / i}, tune.WithCheckpoint(dir))
			_ = os.RemoveAll(dir)
			if errors.Is(err, tune.ErrStopped) {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
}

// runResumed runs the experiment: on a first stack until the dashboard
// shows two trials on their second attempt (paused, then resumed and
// held), then the stack stops, which interrupts the experiment; a second
// stack on the same store restores it from the log and runs it to its end.
func runResumed(t *testing.T) *resumed {
	t.Helper()
	var hold atomic.Bool
	hold.Store(true)
	fn := resumable(&hold)
	fns := map[string]tune.Trainable{"resumable": fn}
	storeDir, storagePath := t.TempDir(), t.TempDir()
	e := &resumed{name: "paused"}
	e.expPath = filepath.Join(storagePath, e.name)

	first, err := tune.StartStack(t.Context(), tune.StackConfig{StoreDir: storeDir, Slots: 2, Trainables: fns, Listen: true})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	closeFirst := func() {
		if !closed {
			closed = true
			if err := first.Close(); err != nil {
				t.Errorf("the first stack: %v", err)
			}
		}
	}
	t.Cleanup(closeFirst)
	tuner, err := tune.NewTuner(fn, tune.WithNATS(first.NATSOptions()), tune.WithName(e.name), tune.WithTrainableName("resumable"),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)}),
		tune.WithTuneConfig(tune.TuneConfig{
			NumSamples: 1, Metric: "loss", Mode: "min", Scheduler: "hyperband",
			SchedulerConfig: map[string]any{"max_t": 9, "reduction_factor": 3},
		}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: storagePath}))
	if err != nil {
		t.Fatal(err)
	}
	fitCtx, cancelFit := context.WithCancel(context.Background())
	t.Cleanup(cancelFit)
	fitDone := make(chan error, 1)
	go func() { _, err := tuner.Fit(fitCtx); fitDone <- err }()

	// The first dashboard stops following the log before its stack stops.
	b := dashBus(t, first.NATSOptions().URL)
	watchCtx, stopWatch := context.WithCancel(dashCtx(t))
	url := serveDashboard(t, dashboard.New(watchCtx, b, dashboard.Config{Log: testLog(t)})).URL
	// Both slots end up held by resumed trials, HyperBand resuming more
	// than two here; nothing else runs then, and the stack stops a quiet
	// experiment.
	bustest.Eventually(t, 60*time.Second, "two trials paused, then resumed from their checkpoints and held", func() bool {
		var u experimentJSON
		if r := get(t, http.DefaultClient, url+"/api/experiments/"+e.name); r.code != http.StatusOK {
			return false
		} else if err := json.Unmarshal([]byte(r.body), &u); err != nil {
			t.Fatalf("the experiment's JSON: %v", err)
		}
		var held []string
		for _, row := range u.Trials {
			if row.Attempt >= 2 && row.NumFailures == 0 && row.Status == "RUNNING" {
				held = append(held, row.ID)
			}
		}
		if len(held) < 2 {
			return false
		}
		e.trial = held[0]
		return true
	})
	// Fit on a deployment leaves the experiment running when its context
	// ends; the controller's shutdown interrupts it.
	cancelFit()
	if err := <-fitDone; !errors.Is(err, tune.ErrInterrupted) {
		t.Fatalf("Fit after its context ended: %v; want ErrInterrupted", err)
	}
	stopWatch()
	closeFirst()

	// The restore runs on a stack over the same store whose controller
	// and runner start once the restorer has published the restored run,
	// as an embedded restore does: nothing carries on the interrupted run.
	hold.Store(false)
	second, err := tune.StartStack(t.Context(), tune.StackConfig{StoreDir: storeDir, Slots: 2, Trainables: fns, Listen: true, Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := second.Close(); err != nil {
			t.Errorf("the second stack: %v", err)
		}
	})
	b = dashBus(t, second.NATSOptions().URL) // closed after the dashboard's watches end
	e.dash = serveDashboard(t, dashboard.New(dashCtx(t), b, dashboard.Config{Log: testLog(t)})).URL
	var u experimentJSON
	getJSON(t, e.dash+"/api/experiments/"+e.name, &u)
	if u.Experiment.Status != "INTERRUPTED" {
		t.Fatalf("the experiment is %s after its stack stopped; want INTERRUPTED, recorded by the stopping controller", u.Experiment.Status)
	}
	restored, err := tune.Restore(t.Context(), e.expPath, "resumable", tune.WithNATS(second.NATSOptions()))
	if err != nil {
		t.Fatal(err)
	}
	type fit struct {
		g   *tune.ResultGrid
		err error
	}
	fitted := make(chan fit, 1)
	go func() { g, err := restored.Fit(t.Context()); fitted <- fit{g, err} }()
	bustest.Eventually(t, 30*time.Second, "the restored run on the log", func() bool {
		seq, err := b.LastSeq(t.Context(), events.TypeSubjects(e.name, events.WriterRestorer, events.TypeExperimentRestored))
		return err == nil && seq > 0
	})
	second.StartWorkers()
	f := <-fitted
	g, err := f.g, f.err
	if err != nil {
		t.Fatalf("Fit of the restored experiment: %v", err)
	}
	if g.Len() != 9 || g.NumTerminated() != 9 {
		t.Fatalf("restored: %d trials, %d TERMINATED; want 9 and 9", g.Len(), g.NumTerminated())
	}
	return e
}

// TestTimelineOfPausesAndRestores: the timeline of a trial that HyperBand
// paused and resumed tells, in log order, the scheduler's pause with its
// reason, the pause requested and done, the resume, the next attempt
// restored from its checkpoint, the experiment's interruption and restore,
// and the trial's end; the state file's timeline keeps the decisions.
func TestTimelineOfPausesAndRestores(t *testing.T) {
	e := runResumed(t)
	var d dashboard.TrialDetail
	getJSON(t, e.dash+"/api/experiments/"+e.name+"/trials/"+e.trial, &d)
	if d.TimelineSource != "log" || d.Trial.Status != "TERMINATED" {
		t.Fatalf("trial %s: %s, timeline from the %s; want TERMINATED, from the log", e.trial, d.Trial.Status, d.TimelineSource)
	}
	tl := d.Timeline
	var kinds []string
	for i, en := range tl {
		kinds = append(kinds, fmt.Sprintf("%d %s: %s", en.Seq, en.Kind, en.Text))
		if en.Seq == 0 || i > 0 && en.Seq <= tl[i-1].Seq {
			t.Errorf("entry %d (%s) has seq %d after %d; want the log's order", i, en.Kind, en.Seq, tl[max(i-1, 0)].Seq)
		}
	}
	defer func() {
		if t.Failed() {
			t.Logf("the timeline:\n%s", strings.Join(kinds, "\n"))
		}
	}()
	// find is the index of the first entry from i on of kind whose text
	// starts with prefix, or -1.
	find := func(from int, kind, prefix string) int {
		for i := max(from, 0); i < len(tl); i++ {
			if tl[i].Kind == kind && strings.HasPrefix(tl[i].Text, prefix) {
				return i
			}
		}
		return -1
	}
	if len(tl) == 0 || tl[0].Kind != "trial.created" {
		t.Fatalf("the timeline does not start with the trial's creation")
	}
	pause := find(0, "trial.decided", "scheduler decided pause: ")
	if pause < 0 || len(tl[pause].Text) <= len("scheduler decided pause: ") || tl[pause].Detail == nil {
		t.Fatal("no scheduler's pause with its reason and inputs")
	}
	reason := strings.TrimPrefix(tl[pause].Text, "scheduler decided pause: ")
	requested := find(pause, "trial.stop_requested", "pause requested: ")
	if requested < 0 || !strings.Contains(tl[requested].Text, reason) {
		t.Fatalf("no pause requested with the decision's reason %q after it", reason)
	}
	paused := find(requested, "trial.paused", "paused")
	if paused < 0 {
		t.Fatal("no trial.paused after the pause requested")
	}
	resume := find(paused, "trial.decided", "scheduler decided resume: ")
	if resume < 0 || len(tl[resume].Text) <= len("scheduler decided resume: ") {
		t.Fatal("no scheduler's resume with its reason after the pause")
	}
	started := find(resume, "trial.started", "attempt ")
	if started < 0 || tl[started].Attempt <= tl[paused].Attempt || !strings.Contains(tl[started].Text, ", restored from checkpoint_") {
		t.Fatalf("no later attempt restored from a checkpoint after the resume")
	}
	// The first stack's controller records the interruption as it stops.
	interrupted := find(0, "experiment.interrupted", "experiment interrupted: shutdown")
	if interrupted < 0 {
		t.Fatal("no experiment interrupted by the shutdown in the timeline of a trial created before it")
	}
	restored := find(interrupted, "experiment.restored", "experiment restored from the log")
	if restored < 0 {
		t.Fatal("no experiment restored from the log after its interruption in the timeline of a trial created before them")
	}
	if after := find(restored, "trial.started", "attempt "); after < 0 || !strings.Contains(tl[after].Text, ", restored from checkpoint_") {
		t.Error("no attempt restored from a checkpoint after the experiment's restore")
	}
	// Every trial's timeline says how it ended, those stopped while paused
	// too.
	var u experimentJSON
	getJSON(t, e.dash+"/api/experiments/"+e.name, &u)
	for _, row := range u.Trials {
		var o dashboard.TrialDetail
		getJSON(t, e.dash+"/api/experiments/"+e.name+"/trials/"+row.ID, &o)
		if end := lastOfTrial(o.Timeline); !strings.Contains(end.Text, row.Status) || row.Status != "TERMINATED" {
			t.Errorf("trial %s (%s) ends its timeline with %s %q; want its end, %s", row.ID, row.EndReason, end.Kind, end.Text, row.Status)
		}
	}

	// From the state file alone: the decisions, with their reasons.
	srv, err := dashboard.NewStorage(t.Context(), e.expPath, dashboard.Config{Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	var f dashboard.TrialDetail
	getJSON(t, serveDashboard(t, srv).URL+"/api/experiments/"+e.name+"/trials/"+e.trial, &f)
	var decided []string
	for _, en := range f.Timeline {
		if en.Kind == "trial.decided" {
			decided = append(decided, en.Text)
		}
	}
	if f.TimelineSource != "state file" || !slices.Contains(decided, tl[pause].Text) || !slices.Contains(decided, tl[resume].Text) {
		t.Errorf("the state file's timeline (from the %s) has decisions %q; want the log's %q and %q", f.TimelineSource, decided, tl[pause].Text, tl[resume].Text)
	}
	if end := f.Timeline[len(f.Timeline)-1]; end.Kind != "trial.completed" || !strings.Contains(end.Text, "TERMINATED") {
		t.Errorf("the state file's timeline ends with %s %q; want the trial's end", end.Kind, end.Text)
	}
}

// lastOfTrial is the last entry about the trial itself.
func lastOfTrial(tl []dashboard.Entry) dashboard.Entry {
	for i := len(tl) - 1; i >= 0; i-- {
		if !strings.HasPrefix(tl[i].Kind, "experiment.") {
			return tl[i]
		}
	}
	return dashboard.Entry{}
}
