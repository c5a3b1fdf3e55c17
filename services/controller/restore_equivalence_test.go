package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/services/controller"
	"github.com/tunejet/tunejet/services/restorer"
)

// The crash-at-random-points equivalence test of the tuner: every decision
// is an event and the tuner's state is a fold, so an experiment whose
// controller is killed at any point, or that is restored from the log at
// any point, must decide exactly what the uninterrupted experiment decided.
//
// The test plays the runner. It answers each trial.scheduled with
// trial.started and a fixed sequence of results per trial (lossAt, a
// function of the trial's config and iteration), and ends a trial
// TERMINATED with the reason of a stop request, as the real runner does.
// It acts only when the controller has nothing left to do — Decide, on the
// test's own fold of the log, returns nothing — and then takes one step
// chosen from that fold alone (play.step), so the order of the log's
// events is fixed by the script, never by timing: "the same later results"
// is true by construction.
//
// A cut is made when the test has folded the cut's number of events: the
// controller is cancelled (it may have published an event or two more by
// then, which only moves the cut), and a new controller is started; in the
// restore variants the restorer (its Handle, in process) first restores
// the experiment from the log with resume_unfinished, as `tunejet restore`
// does, and the trials that were running resume. In variant "restore" the
// scripted trainable stages a checkpoint with every result, as the runner
// does (trial.checkpointed, then trial.reported), so a resumed trial goes
// on after its last result. In variant "restore-from-1" it keeps none: a
// resumed trial reports again from iteration 1, with the same values,
// every iteration it reported before the restore; it reports those first,
// then goes on in the uninterrupted run's order.
//
// "The same" means: the trial.decided events, in log order, are equal byte
// for byte in ordinal, trial, maker, action, reason and detail (the
// decision's inputs), and the trial.created events in index and config
// (TPE's suggestions). Trial ids are compared by index (each experiment
// draws its own id prefix), and result_seq and searcher_seq are left out:
// they are log positions, which a cut shifts. The iterations a resumed
// trial reports again were judged before the restore; they are not new
// results, so the same decisions means no decision is made about them a
// second time (a second median judgement would count the iteration twice
// in the trial's running mean, and shift every later ordinal).
func TestTunerDecidesTheSameAfterACrash(t *testing.T) {
	for _, c := range equivalenceCases {
		t.Run(c.name, func(t *testing.T) {
			srv := bustest.Start(t)
			want := newPlay(t, srv, c, c.name+"-uninterrupted", uninterrupted, nil).run()
			if c.searcher == "" {
				requireStops(t, want)
			}
			h := fnv.New64a()
			_, _ = h.Write([]byte(c.name))
			rng := rand.New(rand.NewPCG(equivalenceSeed, h.Sum64()))
			for _, v := range []variant{kill, restoreFromCheckpoint, restoreFrom1} {
				if v == restoreFrom1 && c.checkpoints {
					continue // its trainable always checkpoints
				}
				if v != kill && c.slots > 0 {
					// A restore schedules every unfinished trial again, in
					// creation order: with fewer slots than trials, other
					// trials than before the cut hold the slots, and the
					// script's later results come in another order than the
					// uninterrupted run's. Only the kill variant keeps it.
					continue
				}
				resumed := 0
				for i := range replays[v] {
					cuts := cutPoints(rng, want.events, equivalenceCutsPerReplay)
					t.Run(fmt.Sprintf("%s-%d", v, i), func(t *testing.T) {
						got := newPlay(t, srv, c, fmt.Sprintf("%s-%s-%d", c.name, v, i), v, cuts).run()
						resumed += got.resumed
						where := fmt.Sprintf("seed %d, cuts after events %v", equivalenceSeed, cuts)
						if diff := cmp.Diff(want.decisions, got.decisions); diff != "" {
							t.Errorf("%s: the decisions differ from the uninterrupted run's (-uninterrupted +%s):\n%s", where, v, diff)
						}
						if diff := cmp.Diff(want.created, got.created); diff != "" {
							t.Errorf("%s: the trials created differ from the uninterrupted run's (-uninterrupted +%s):\n%s", where, v, diff)
						}
					})
				}
				if v != kill && resumed == 0 {
					t.Errorf("%s: no restore resumed a running trial: the cuts tested little", v)
				}
			}
		})
	}
}

// requireStops fails the test when the uninterrupted run stopped, paused
// or exploited no trial: the script would test little.
func requireStops(t *testing.T, want outcome) {
	t.Helper()
	acts := func(d string) bool {
		return strings.Contains(d, `"action":"stop"`) || strings.Contains(d, `"action":"pause"`) || strings.Contains(d, `"action":"exploit"`)
	}
	if !slices.ContainsFunc(want.decisions, acts) {
		t.Fatalf("the uninterrupted run stopped, paused and exploited no trial: the script tests little; decisions %v", want.decisions)
	}
}

// A variant is how a replay of the script is interrupted at its cuts.
type variant string

const (
	uninterrupted variant = "uninterrupted"
	// kill cancels the controller and starts a new one.
	kill variant = "kill"
	// restoreFromCheckpoint kills the controller and restores the
	// experiment from the log; the scripted trainable checkpoints with
	// every result, so a resumed trial goes on after its last result.
	restoreFromCheckpoint variant = "restore"
	// restoreFrom1 is restoreFromCheckpoint with a trainable that keeps no
	// checkpoint: a resumed trial reports again from iteration 1.
	restoreFrom1 variant = "restore-from-1"
)

// replays is how many times each variant replays the script, each time
// cut at equivalenceCutsPerReplay random points: 27 cuts per case, 21 of
// them by a kill or a restore from the last result.
var replays = map[variant]int{kill: 4, restoreFromCheckpoint: 3, restoreFrom1: 2}

const (
	// equivalenceSeed seeds the cut points; a failure names it.
	equivalenceSeed = 12
	// equivalenceCutsPerReplay is how many times a replay is cut.
	equivalenceCutsPerReplay = 3
)

// An equivalenceCase is one tuner setting and the script's size.
type equivalenceCase struct {
	name     string
	trials   int    // num_samples
	iters    int    // the results a trial reports when nothing stops it
	searcher string // search_alg, "" for random
	// checkpoints: the scripted trainable stages a checkpoint with every
	// result in every variant (a pausable trainable; PBT exploits only a
	// trial with a checkpoint), and the variant that keeps none is skipped.
	checkpoints bool
	// slots, when not 0, is how many trials the script runs at once: the
	// others wait PENDING or PAUSED, which the median rule and PBT pause
	// running trials for. Such a case is replayed with kills only (see
	// the test).
	slots int
	tune  func(*events.ExperimentSpec)
}

var equivalenceCases = []equivalenceCase{
	{name: "asha", trials: 8, iters: 8, tune: func(sp *events.ExperimentSpec) {
		sp.TuneConfig.Scheduler = "asha"
		sp.TuneConfig.SchedulerConfig = map[string]any{"grace_period": 1.0, "reduction_factor": 2.0, "max_t": 8.0}
	}},
	{name: "median", trials: 8, iters: 6, tune: func(sp *events.ExperimentSpec) {
		sp.TuneConfig.Scheduler = "median_stopping_rule"
		sp.TuneConfig.SchedulerConfig = map[string]any{
			"time_attr": "training_iteration", "grace_period": 2.0, "min_samples_required": 2.0, "hard_stop": true,
		}
	}},
	{name: "trial-plateau", trials: 6, iters: 10, tune: func(sp *events.ExperimentSpec) {
		sp.RunConfig.Stoppers = map[string]any{"type": "trial_plateau", "metric": "loss", "std": 0.05, "num_results": 3.0, "grace_period": 3.0}
	}},
	{name: "tpe", trials: 10, iters: 3, searcher: "tpe", tune: func(sp *events.ExperimentSpec) {
		sp.TuneConfig.SearchAlgConfig = map[string]any{"n_startup_trials": 3.0}
	}},
	{name: "hyperband", trials: 9, iters: 9, checkpoints: true, tune: func(sp *events.ExperimentSpec) {
		sp.TuneConfig.Scheduler = "hyperband"
		sp.TuneConfig.SchedulerConfig = map[string]any{"max_t": 9.0, "reduction_factor": 3.0}
	}},
	{name: "median-pause", trials: 6, iters: 6, checkpoints: true, slots: 2, tune: func(sp *events.ExperimentSpec) {
		sp.TuneConfig.MaxConcurrentTrials = 4
		sp.TuneConfig.Scheduler = "median_stopping_rule"
		sp.TuneConfig.SchedulerConfig = map[string]any{
			"time_attr": "training_iteration", "grace_period": 2.0, "min_samples_required": 2.0, "hard_stop": false,
		}
	}},
	{name: "pbt", trials: 4, iters: 12, checkpoints: true, tune: func(sp *events.ExperimentSpec) {
		sp.TuneConfig.MaxConcurrentTrials = 4
		sp.TuneConfig.Scheduler = "pbt"
		sp.TuneConfig.SchedulerConfig = map[string]any{
			"time_attr": "training_iteration", "perturbation_interval": 3.0, "quantile_fraction": 0.25,
			"hyperparam_mutations": map[string]any{"x": map[string]any{"uniform": []any{-4.0, 4.0}}},
		}
	}},
}

// lossAt is the result a trial reports at iteration i: it falls with i
// towards its config's value, faster for x near 0, so the trials pass,
// fail and plateau at different rungs and iterations.
func lossAt(config map[string]any, i int) float64 {
	x, _ := config["x"].(float64)
	return (x-1)*(x-1) + (1+math.Abs(x))/float64(i)
}

// cutPoints draws n distinct cut points among the first events-1 events
// of the uninterrupted run (a cut after the last one would change
// nothing), ascending.
func cutPoints(rng *rand.Rand, events, n int) []int {
	var cuts []int
	for len(cuts) < min(n, events-1) {
		if k := 1 + rng.IntN(events-1); !slices.Contains(cuts, k) {
			cuts = append(cuts, k)
		}
	}
	slices.Sort(cuts)
	return cuts
}

// outcome is what a run decided, in canonical JSON, trial ids by index.
type outcome struct {
	decisions []string
	created   []string
	events    int // the experiment's events in the log
	resumed   int // trials started again after a restore
}

// play runs one experiment to its end: the controller, and the test as
// the runner.
type play struct {
	t       *testing.T
	srv     *bustest.Server
	b       *bus.Bus // the runner's
	c       equivalenceCase
	exp     string
	storage string
	v       variant
	cuts    []int // after how many folded events to cut, ascending
	// ext is the external searcher of search_alg external, replaced by
	// one that lost its memory at each cut; nil for the native searchers.
	ext *suggester
	// marks are what the test's fold held at each cut.
	marks []cutMark

	stopController func()
	controllers    int
	restorer       *restorer.Service
	checkpoint     string // the directory every checkpoint stages

	evs     chan *events.Event
	st      *state.Experiment
	space   *search.Space
	log     []*events.Event
	lastSeq uint64 // the runner's last event

	reported map[string]int // per trial: the last iteration its current attempt reported
	high     map[string]int // per trial: the last iteration it ever reported
}

func newPlay(t *testing.T, srv *bustest.Server, c equivalenceCase, exp string, v variant, cuts []int) *play {
	p := &play{
		t: t, srv: srv, b: srv.Bus("script-" + exp), c: c, exp: exp, storage: t.TempDir(), v: v, cuts: cuts,
		evs: make(chan *events.Event, 4096), st: state.New(exp),
		reported: map[string]int{}, high: map[string]int{},
	}
	if v == restoreFromCheckpoint || c.checkpoints {
		p.checkpoint = t.TempDir()
		if err := os.WriteFile(filepath.Join(p.checkpoint, "weights"), []byte("w"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (p *play) spec() events.ExperimentSpec {
	seed := int64(2026)
	sp := events.ExperimentSpec{
		Name: p.exp, Trainable: events.Trainable{Name: "fn"},
		ParamSpace: map[string]any{"x": map[string]any{"uniform": []any{-4.0, 4.0}}},
		TuneConfig: events.TuneConfig{
			NumSamples: p.c.trials, MaxConcurrentTrials: 2, Metric: "loss", Mode: "min", Seed: &seed,
			SearchAlg: p.c.searcher,
		},
		RunConfig: events.RunConfig{StoragePath: p.storage},
	}
	p.c.tune(&sp)
	if p.ext != nil {
		sp.TuneConfig.SearchAlgConfig = map[string]any{"subject": p.ext.subject, "timeout_s": externalTimeout.Seconds()}
	}
	return sp
}

func (p *play) run() outcome {
	ctx, cancel := context.WithCancel(p.t.Context())
	watched := make(chan struct{})
	defer func() { cancel(); <-watched }()
	go func() {
		defer close(watched)
		_ = p.b.Watch(ctx, events.ExperimentSubjects(p.exp), 0, bus.Handler{Event: func(ev *events.Event) {
			select {
			case p.evs <- ev:
			case <-ctx.Done():
			}
		}})
	}()
	spec := p.spec()
	space, err := search.ParseSpace(spec.ParamSpace)
	if err != nil {
		p.t.Fatal(err)
	}
	p.space = space
	p.startController()
	defer func() { p.stopController() }()
	submit(p.t, p.b, spec)
	for p.settle() {
		p.step()
	}
	if len(p.cuts) > 0 {
		p.t.Fatalf("%s: completed after %d events, before the cuts %v", p.exp, len(p.log), p.cuts)
	}
	return p.outcome()
}

// startController runs a new controller on its own connection.
func (p *play) startController() {
	p.controllers++
	name := fmt.Sprintf("controller-%s-%d", p.exp, p.controllers)
	c := controller.New(p.srv.Bus(name), controller.Config{Tick: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(p.t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	p.stopController = func() {
		cancel()
		// One killed while it starts returns its context's error.
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			p.t.Errorf("controller %s: %v", name, err)
		}
	}
}

// settle folds the log until the controller has nothing left to do after
// the runner's last event, and reports whether the experiment goes on.
func (p *play) settle() bool {
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	for {
		select {
		case ev := <-p.evs:
			p.fold(ev)
			continue
		default:
		}
		if p.st.Status == state.ExperimentCompleted {
			return false
		}
		if p.st.LastSeq >= p.lastSeq && p.quiet() {
			return true
		}
		select {
		case ev := <-p.evs:
			p.fold(ev)
		case <-timeout.C:
			p.t.Fatalf("%s: no event for %v after event %d (%s); trials: %s", p.exp, wait, len(p.log), p.st.Status, p.describe())
		}
	}
}

// quiet reports whether the controller has nothing to do: Decide, on the
// log so far, decides nothing. (Without a searcher Decide draws new trials
// from the space instead of asking TPE; whether it creates any is the
// same. With an external searcher it is given a config for the next
// trial, as if the searcher had answered: the controller is not quiet
// while it waits for one.)
func (p *play) quiet() bool {
	if p.st.Spec == nil || p.st.Status == state.ExperimentPending {
		return false
	}
	in := controller.Inputs{Now: time.Now(), Space: p.space}
	if p.ext != nil {
		in.Suggestion = &controller.Suggestion{Index: p.st.NextIndex, Config: map[string]any{"x": 0.0}}
	}
	return len(controller.Decide(p.st, in)) == 0
}

func (p *play) fold(ev *events.Event) {
	st, _, err := state.Fold(p.t.Context(), p.st, ev, restorestate.Loader(p.b, p.exp))
	if err != nil {
		p.t.Fatalf("%s: fold event %d: %v", p.exp, ev.Seq, err)
	}
	p.st = st
	p.log = append(p.log, ev)
	if len(p.cuts) > 0 && len(p.log) == p.cuts[0] {
		p.cuts = p.cuts[1:]
		p.cut()
	}
}

// cut kills the controller, replaces the external searcher with one that
// lost its memory, restores the experiment from the log in the restore
// variants, and starts a new controller.
func (p *play) cut() {
	p.marks = append(p.marks, p.mark())
	p.stopController()
	if p.ext != nil {
		p.ext.replace(p.t)
	}
	if p.v == restoreFromCheckpoint || p.v == restoreFrom1 {
		if p.restorer == nil {
			p.restorer = restorer.New(p.srv.Bus("restorer-"+p.exp), restorer.Config{})
		}
		rep := p.restorer.Handle(p.t.Context(), api.RestoreRequest{
			Path: p.storage + "/" + p.exp, Resume: restore.FromFlags(true, false, false),
		}, false)
		if !rep.OK {
			p.t.Fatalf("%s: restore after event %d: %s", p.exp, len(p.log), rep.Error)
		}
	}
	p.startController()
}

// step takes the runner's next step, chosen from the log so far: a
// running trial whose stop was requested ends TERMINATED with the
// request's reason; else scheduled work starts; else a running trial that
// reported all its iterations ends, finished; else a running trial
// reports its next result — one that resumed after a restore first, until
// it has reported again what it reported before, else the one with the
// fewest results, the earliest created on a tie.
func (p *play) step() {
	trials := p.st.TrialList()
	running := 0
	for _, t := range trials {
		if t.Status == events.StatusRunning && t.StopRequested {
			p.publish(&events.TrialCompleted{TrialID: t.ID, Attempt: t.Attempt, Status: events.StatusTerminated, Reason: t.StopReason})
			return
		}
		if t.Status == events.StatusRunning && t.PauseRequested {
			p.publish(&events.TrialPaused{TrialID: t.ID, Attempt: t.Attempt, Reason: "paused"})
			return
		}
		if t.Status == events.StatusRunning {
			running++
		}
	}
	for _, t := range trials {
		if (t.Status == events.StatusPending || t.Status == events.StatusPaused) && t.Scheduled && (p.c.slots == 0 || running < p.c.slots) {
			started := &events.TrialStarted{TrialID: t.ID, Attempt: max(t.Attempt, t.AttemptBase) + 1, Runner: "script", WorkSeq: t.WorkSeq}
			p.reported[t.ID] = 0
			if r := t.ResumeFrom; r != nil {
				p.reported[t.ID], started.RestoredFrom = r.Checkpoint.Iteration, r.Source+"/"+r.Checkpoint.Name
			} else if c := t.LatestCheckpoint(); c != nil {
				p.reported[t.ID], started.RestoredFrom = c.Iteration, c.Name
			}
			p.publish(started)
			return
		}
	}
	var next *state.Trial
	for _, t := range trials {
		if t.Status != events.StatusRunning {
			continue
		}
		if p.reported[t.ID] >= p.c.iters {
			p.publish(&events.TrialCompleted{TrialID: t.ID, Attempt: t.Attempt, Status: events.StatusTerminated, Reason: "finished"})
			return
		}
		if p.reported[t.ID] < p.high[t.ID] {
			next = t
			break
		}
		if next == nil || p.reported[t.ID] < p.reported[next.ID] {
			next = t
		}
	}
	if next == nil {
		p.t.Fatalf("%s: the controller is idle and no trial runs; trials: %s", p.exp, p.describe())
	}
	i := p.reported[next.ID] + 1
	p.reported[next.ID], p.high[next.ID] = i, max(p.high[next.ID], i)
	result := map[string]any{"training_iteration": i, "loss": lossAt(next.Config, i)}
	if p.checkpoint != "" {
		p.checkpointed(next, result)
	}
	p.publish(&events.TrialReported{TrialID: next.ID, Attempt: next.Attempt, Result: result})
}

// checkpointed stages a checkpoint of a result and publishes
// trial.checkpointed with the result in it, as the runner does before it
// publishes the result's trial.reported (then a repeat).
func (p *play) checkpointed(t *state.Trial, result map[string]any) {
	obs, err := p.b.Checkpoints(p.t.Context(), p.exp)
	if err != nil {
		p.t.Fatal(err)
	}
	name := ckpt.Name(t.NextCheckpoint)
	object := ckpt.AttemptObjectName(t.ID, t.Attempt, name)
	staged, err := ckpt.Stage(p.t.Context(), obs, object, p.checkpoint)
	if err != nil {
		p.t.Fatalf("%s: stage %s: %v", p.exp, object, err)
	}
	metrics := maps.Clone(result)
	metrics["checkpoint_dir_name"] = name
	p.publish(&events.TrialCheckpointed{TrialID: t.ID, Attempt: t.Attempt, Checkpoint: events.CheckpointRef{
		Name: name, Index: t.NextCheckpoint, Object: object, Size: staged.Size, Digest: staged.Digest,
		Iteration: result["training_iteration"].(int), Metrics: metrics,
	}})
}

func (p *play) publish(payload events.Payload) {
	seq, err := p.b.Publish(p.t.Context(), p.b.Event(p.exp, events.WriterRunner, payload))
	if err != nil {
		p.t.Fatalf("%s: publish %T: %v", p.exp, payload, err)
	}
	p.lastSeq = seq
}

func (p *play) describe() string {
	var b strings.Builder
	for _, t := range p.st.TrialList() {
		fmt.Fprintf(&b, "\n  %s %s scheduled=%v stop_requested=%v attempt=%d iteration=%d reported=%d/%d", t.ID, t.Status, t.Scheduled, t.StopRequested, t.Attempt, t.Iteration, p.reported[t.ID], p.high[t.ID])
	}
	return b.String()
}

// outcome reads the run's decisions and created trials from the log.
func (p *play) outcome() outcome {
	prefix := p.st.TrialIDPrefix + "_"
	canonical := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			p.t.Fatal(err)
		}
		return strings.ReplaceAll(string(b), prefix, "trial_")
	}
	type decision struct {
		Ordinal int            `json:"ordinal"`
		Trial   string         `json:"trial"`
		By      string         `json:"by"`
		Action  string         `json:"action"`
		Reason  string         `json:"reason"`
		Detail  map[string]any `json:"detail"`
	}
	type created struct {
		Index  int            `json:"index"`
		Config map[string]any `json:"config"`
	}
	o := outcome{events: len(p.log)}
	for _, ev := range p.log {
		switch d := ev.Data.(type) {
		case *events.TrialDecided:
			o.decisions = append(o.decisions, canonical(decision{d.Ordinal, d.TrialID, d.By, d.Action, d.Reason, d.Detail}))
		case *events.TrialCreated:
			o.created = append(o.created, canonical(created{d.Index, d.Config}))
		case *events.TrialStarted:
			if d.Attempt > 1 {
				o.resumed++
			}
		}
	}
	return o
}
