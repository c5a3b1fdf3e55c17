package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/tuning"
)

// history builds an experiment's state the way the controller sees it: by
// folding events that went through the wire encoding, in log order.
type history struct {
	t     testing.TB
	st    *state.Experiment
	space *search.Space
	seq   uint64
	now   time.Time // the time of the last event
	at    time.Time // when set, the time Decide runs at
	in    Inputs    // the rest of Decide's inputs
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fiveX is a grid of five points: five trials per sample.
var fiveX = map[string]any{"x": map[string]any{"grid_search": []any{1.0, 2.0, 3.0, 4.0, 5.0}}}

// newHistory submits an experiment "exp" with the spec as changed by mod.
// Defaults: five grid points, one sample, max_concurrent_trials 2.
func newHistory(t testing.TB, mod func(*events.ExperimentSpec)) *history {
	t.Helper()
	sp := events.ExperimentSpec{
		Name: "exp", Trainable: events.Trainable{Name: "fn"}, ParamSpace: fiveX,
		TuneConfig: events.TuneConfig{NumSamples: 1, MaxConcurrentTrials: 2},
	}
	if mod != nil {
		mod(&sp)
	}
	space, err := search.ParseSpace(sp.ParamSpace)
	if err != nil {
		t.Fatal(err)
	}
	h := &history{t: t, st: state.New("exp"), space: space, now: t0}
	h.in = Inputs{Space: space, NewSeed: 42, NewPrefix: "abcde", StoragePath: "/results"}
	h.add(events.WriterClient, &events.ExperimentSubmitted{Spec: sp})
	return h
}

// add folds one event, encoded and decoded as it travels through the log.
func (h *history) add(w events.Writer, p events.Payload) {
	h.t.Helper()
	h.seq++
	h.now = h.now.Add(time.Second)
	ev := events.New(h.st.Name, w, "test", p)
	ev.Time = h.now
	m, err := events.Encode(ev)
	if err != nil {
		h.t.Fatalf("encode %s: %v", ev.Type(), err)
	}
	d, err := events.Decode(m.Subject, m.Header, m.Data)
	if err != nil {
		h.t.Fatalf("decode %s: %v", ev.Type(), err)
	}
	d.Seq = h.seq
	h.st, _, _ = state.Fold(context.Background(), h.st, d, nil)
}

func (h *history) inputs() Inputs {
	in := h.in
	in.Now = h.now
	if !h.at.IsZero() {
		in.Now = h.at
	}
	return in
}

// step decides and folds the decisions, as the controller does.
func (h *history) step() []Action {
	h.t.Helper()
	acts := Decide(h.st, h.inputs())
	for _, a := range acts {
		h.add(events.WriterController, a.Payload)
	}
	return acts
}

// launch starts the experiment and creates the first trials.
func (h *history) launch() {
	h.t.Helper()
	h.step()
	h.step()
}

// afterStart sets the decision time to the experiment's start plus d.
func (h *history) afterStart(d time.Duration) { h.at = h.st.StartTime.Add(d) }

func id(index int) string { return search.TrialID("abcde", index) }

func (h *history) trial(index int) *state.Trial {
	h.t.Helper()
	t := h.st.Trials[id(index)]
	if t == nil {
		h.t.Fatalf("trial %d was not created", index)
	}
	return t
}

// run starts the next attempt of trials on a runner.
func (h *history) run(indexes ...int) {
	for _, i := range indexes {
		h.add(events.WriterRunner, &events.TrialStarted{TrialID: id(i), Attempt: h.trial(i).Attempt + 1, Runner: "r1"})
	}
}

// finish ends the current attempt of trials TERMINATED.
func (h *history) finish(reason string, indexes ...int) {
	for _, i := range indexes {
		h.add(events.WriterRunner, &events.TrialCompleted{TrialID: id(i), Attempt: h.trial(i).Attempt, Status: events.StatusTerminated, Reason: reason})
	}
}

// fail records a counted failure of a trial's current attempt.
func (h *history) fail(index int, final bool, msg string) {
	h.add(events.WriterRunner, &events.TrialFailed{TrialID: id(index), Attempt: h.trial(index).Attempt, Cause: events.CauseError, Error: msg, Final: final, Counted: true})
}

// preempt records that a trial's runner handed its current attempt back.
func (h *history) preempt(index int, counted bool) {
	h.add(events.WriterRunner, &events.TrialFailed{TrialID: id(index), Attempt: h.trial(index).Attempt, Cause: events.CausePreempted, Error: "preempted", Counted: counted})
}

// describe renders a decision compactly for comparison.
func describe(a Action) string {
	switch p := a.Payload.(type) {
	case *events.ExperimentStarted:
		return fmt.Sprintf("started run=%d seed=%d trials=%d prefix=%s storage=%s", p.Run, p.Seed, p.NumTrials, p.TrialIDPrefix, p.StoragePath)
	case *events.TrialCreated:
		return fmt.Sprintf("created %s index=%d", p.TrialID, p.Index)
	case *events.TrialScheduled:
		return "scheduled " + p.TrialID
	case *events.TrialStopRequested:
		return fmt.Sprintf("stop %s %s", p.TrialID, p.Reason)
	case *events.TrialCompleted:
		return fmt.Sprintf("end %s %s %s", p.TrialID, p.Status, p.Reason)
	case *events.TrialDecided:
		return fmt.Sprintf("decided %d %s %s", p.Ordinal, p.TrialID, p.Action)
	case *events.ExperimentCompleted:
		if p.Error != "" {
			return fmt.Sprintf("completed %s error=%q", p.Reason, p.Error)
		}
		return "completed " + p.Reason
	}
	return fmt.Sprintf("%T", a.Payload)
}

func describeAll(acts []Action) []string {
	var out []string
	for _, a := range acts {
		out = append(out, describe(a))
	}
	return out
}

func createdAndScheduled(indexes ...int) []string {
	var out []string
	for _, i := range indexes {
		out = append(out, fmt.Sprintf("created %s index=%d", id(i), i), "scheduled "+id(i))
	}
	return out
}

func stops(reason string, indexes ...int) []string {
	var out []string
	for _, i := range indexes {
		out = append(out, fmt.Sprintf("stop %s %s", id(i), reason))
	}
	return out
}

func withSpec(f func(s *events.ExperimentSpec)) func(*events.ExperimentSpec) { return f }

func TestDecide(t *testing.T) {
	seven := int64(7)
	budget := withSpec(func(s *events.ExperimentSpec) {
		s.TuneConfig.TimeBudgetS = 10
		s.TuneConfig.MaxConcurrentTrials = 3
	})
	failFast := func(ff events.FailFast) func(*events.ExperimentSpec) {
		return func(s *events.ExperimentSpec) {
			s.RunConfig.FailureConfig.FailFast = ff
			s.TuneConfig.MaxConcurrentTrials = 3
		}
	}
	// threeRunning starts the experiment with trials 0, 1, 2 running.
	threeRunning := func(h *history) { h.launch(); h.run(0, 1, 2) }

	tests := []struct {
		name  string
		spec  func(*events.ExperimentSpec)
		setup func(h *history)
		want  []string
	}{
		// Starting.
		{"a submitted experiment starts, with a new seed", nil, nil,
			[]string{"started run=1 seed=42 trials=5 prefix=abcde storage=/results"}},
		{"the spec's seed wins", func(s *events.ExperimentSpec) { s.TuneConfig.Seed = &seven }, nil,
			[]string{"started run=1 seed=7 trials=5 prefix=abcde storage=/results"}},
		{"num_trials is grid times samples", func(s *events.ExperimentSpec) { s.TuneConfig.NumSamples = 3 }, nil,
			[]string{"started run=1 seed=42 trials=15 prefix=abcde storage=/results"}},
		{"num_samples -1 is unbounded", func(s *events.ExperimentSpec) { s.TuneConfig.NumSamples = -1 }, nil,
			[]string{"started run=1 seed=42 trials=-1 prefix=abcde storage=/results"}},
		{"the spec's storage_path wins", func(s *events.ExperimentSpec) { s.RunConfig.StoragePath = "/nfs/x" }, nil,
			[]string{"started run=1 seed=42 trials=5 prefix=abcde storage=/nfs/x"}},

		// Creating trials.
		{"a started experiment is not started again; trials fill max_concurrent_trials in index order", nil,
			func(h *history) { h.step() },
			createdAndScheduled(0, 1)},
		{"scheduled trials that have not started count as in flight", nil,
			func(h *history) { h.launch() },
			nil},
		{"running trials fill the window", nil,
			func(h *history) { h.launch(); h.run(0, 1) },
			nil},
		{"a finished trial frees one slot", nil,
			func(h *history) { h.launch(); h.run(0, 1); h.finish("finished", 0) },
			createdAndScheduled(2)},
		{"a retried trial keeps its slot", nil,
			func(h *history) { h.launch(); h.run(0, 1); h.fail(0, false, "boom") },
			nil},
		{"MaxPending caps when max_concurrent_trials is unset", func(s *events.ExperimentSpec) { s.TuneConfig.MaxConcurrentTrials = 0 },
			func(h *history) { h.in.MaxPending = 3; h.step() },
			createdAndScheduled(0, 1, 2)},
		{"max_concurrent_trials wins over MaxPending", nil,
			func(h *history) { h.in.MaxPending = 4; h.step() },
			createdAndScheduled(0, 1)},
		{"an exhausted search creates nothing more", func(s *events.ExperimentSpec) { s.TuneConfig.MaxConcurrentTrials = 5 },
			func(h *history) { h.launch(); h.run(0, 1, 2, 3, 4); h.finish("finished", 0, 1, 2, 3) },
			nil},
		{"the experiment completes when every trial finished and the search is done", func(s *events.ExperimentSpec) { s.TuneConfig.MaxConcurrentTrials = 5 },
			func(h *history) { h.launch(); h.run(0, 1, 2, 3, 4); h.finish("finished", 0, 1, 2, 3, 4) },
			[]string{"completed finished"}},
		{"errored trials count as finished", func(s *events.ExperimentSpec) { s.TuneConfig.MaxConcurrentTrials = 5 },
			func(h *history) {
				h.launch()
				h.run(0, 1, 2, 3, 4)
				h.fail(2, true, "boom")
				h.finish("finished", 0, 1, 3, 4)
			},
			[]string{"completed finished"}},
		{"not complete while the search has trials left", nil,
			func(h *history) {
				h.launch()
				h.run(0, 1)
				h.finish("finished", 0, 1)
				h.step()
				h.run(2, 3)
				h.finish("finished", 2, 3)
			},
			createdAndScheduled(4)},
		{"num_samples -1 keeps creating", func(s *events.ExperimentSpec) { s.TuneConfig.NumSamples = -1; s.ParamSpace = nil },
			func(h *history) {
				h.step()
				for round := 0; round < 3; round++ {
					h.step()
					h.run(2*round, 2*round+1)
					h.finish("finished", 2*round, 2*round+1)
				}
			},
			createdAndScheduled(6, 7)},

		// Time budget.
		{"before the time budget runs out, trials are created", budget,
			func(h *history) {
				h.launch()
				h.run(0, 1, 2)
				h.finish("finished", 0)
				h.afterStart(9999 * time.Millisecond)
			},
			createdAndScheduled(3)},
		{"time budget expiry stops every unfinished trial and creates none", budget,
			func(h *history) { h.launch(); h.run(0, 1); h.finish("finished", 0); h.afterStart(10 * time.Second) },
			stops("time_budget", 1, 2)},
		{"after the stops, wait for running trials to end", budget,
			func(h *history) {
				h.launch()
				h.run(0, 1)
				h.finish("finished", 0)
				h.afterStart(10 * time.Second)
				h.step()
			},
			nil},
		{"then complete with reason time_budget", budget,
			func(h *history) {
				h.launch()
				h.run(0, 1)
				h.finish("finished", 0)
				h.afterStart(10 * time.Second)
				h.step()
				h.finish("time_budget", 1)
			},
			[]string{"completed time_budget"}},

		// fail_fast.
		{"fail_fast true stops the others after the first ERROR", failFast(events.FailFastOn),
			func(h *history) { threeRunning(h); h.fail(1, true, "boom") },
			stops("fail_fast", 0, 2)},
		{"fail_fast ignores a failure that will be retried", failFast(events.FailFastOn),
			func(h *history) { threeRunning(h); h.fail(1, false, "boom") },
			nil},
		{"fail_fast true completes with reason fail_fast", failFast(events.FailFastOn),
			func(h *history) { threeRunning(h); h.fail(1, true, "boom"); h.step(); h.finish("fail_fast", 0, 2) },
			[]string{"completed fail_fast"}},
		{"fail_fast raise carries the trial's error", failFast(events.FailFastRaise),
			func(h *history) {
				threeRunning(h)
				h.fail(1, true, "ValueError: boom")
				h.step()
				h.finish("fail_fast", 0, 2)
			},
			[]string{`completed fail_fast error="ValueError: boom"`}},
		{"without fail_fast an ERROR trial frees its slot", failFast(events.FailFastOff),
			func(h *history) { threeRunning(h); h.fail(1, true, "boom") },
			createdAndScheduled(3)},

		// Stop requests.
		{"a client stop request stops every unfinished trial", failFast(events.FailFastOff),
			func(h *history) {
				threeRunning(h)
				h.finish("finished", 0)
				h.step() // trial 3, scheduled, not started
				h.add(events.WriterClient, &events.ExperimentStopRequested{Reason: "user"})
			},
			stops("stopped", 1, 2, 3)},
		{"a stopped experiment completes with reason stopped", failFast(events.FailFastOff),
			func(h *history) {
				threeRunning(h)
				h.add(events.WriterClient, &events.ExperimentStopRequested{Reason: "user"})
				h.step()
				h.finish("stopped", 0, 1, 2)
			},
			[]string{"completed stopped"}},

		// Ended experiments.
		{"a completed experiment decides nothing", nil,
			func(h *history) {
				h.launch()
				h.run(0)
				h.add(events.WriterController, &events.ExperimentCompleted{Reason: "finished"})
			},
			nil},
		{"an interrupted experiment decides nothing", nil,
			func(h *history) {
				h.launch()
				h.run(0)
				h.add(events.WriterController, &events.ExperimentInterrupted{Reason: "shutdown"})
			},
			nil},
		{"an interrupted experiment is not completed by its time budget", budget,
			func(h *history) {
				h.step()
				h.add(events.WriterController, &events.ExperimentInterrupted{Reason: "shutdown"})
				h.afterStart(time.Hour)
			},
			nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory(t, tc.spec)
			if tc.setup != nil {
				tc.setup(h)
			}
			got := describeAll(Decide(h.st, h.inputs()))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideWithoutASubmission(t *testing.T) {
	if acts := Decide(state.New("exp"), Inputs{Now: t0, NewSeed: 1, NewPrefix: "abcde"}); acts != nil {
		t.Fatalf("Decide on an experiment nobody submitted = %v, want nothing", describeAll(acts))
	}
}

func TestDecideDefaultMaxPending(t *testing.T) {
	h := newHistory(t, func(s *events.ExperimentSpec) {
		s.TuneConfig.MaxConcurrentTrials = 0
		s.TuneConfig.NumSamples = -1
	})
	h.step()
	acts := h.step()
	if got := len(acts) / 2; got != DefaultMaxPending {
		t.Fatalf("created %d trials with neither max_concurrent_trials nor MaxPending, want DefaultMaxPending (%d)", got, DefaultMaxPending)
	}
	if acts := Decide(h.st, h.inputs()); len(acts) != 0 {
		t.Fatalf("created more trials with %d in flight: %v", DefaultMaxPending, describeAll(acts)[:2])
	}
}

// TestDecideTrialWork checks what a created trial and its work carry.
func TestDecideTrialWork(t *testing.T) {
	h := newHistory(t, func(s *events.ExperimentSpec) {
		s.ParamSpace = map[string]any{"lr": map[string]any{"uniform": []any{0.0, 1.0}}, "layers": map[string]any{"grid_search": []any{1.0, 2.0}}}
		s.RunConfig.Stop = map[string]float64{"training_iteration": 5}
		s.RunConfig.FailureConfig.MaxFailures = 2
	})
	h.step()
	acts := h.step()
	if len(acts) != 4 {
		t.Fatalf("got %v, want two trials created and scheduled", describeAll(acts))
	}
	for i := 0; i < 2; i++ {
		c := acts[2*i].Payload.(*events.TrialCreated)
		w := acts[2*i+1].Payload.(*events.TrialScheduled)
		config, tag := h.space.Trial(i, 42)
		if !cmp.Equal(c.Config, config) || c.ExperimentTag != tag {
			t.Errorf("trial %d: config %v tag %q; want the search's %v %q for seed 42", i, c.Config, c.ExperimentTag, config, tag)
		}
		if c.TrialName != "fn_"+id(i) || !strings.HasPrefix(c.DirName, "fn_"+id(i)+"_"+tag) {
			t.Errorf("trial %d: name %q dir %q", i, c.TrialName, c.DirName)
		}
		if w.TrialID != c.TrialID || w.TrialName != c.TrialName || w.DirName != c.DirName || !cmp.Equal(w.Config, c.Config) {
			t.Errorf("trial %d: the work %+v does not match the trial %+v", i, w, c)
		}
		if w.Trainable.Name != "fn" || w.MaxFailures != 2 || w.HeartbeatTimeoutS != events.DefaultHeartbeatTimeoutS || w.AttemptBase != 0 ||
			!cmp.Equal(w.Stop, map[string]float64{"training_iteration": 5}) {
			t.Errorf("trial %d: work %+v lacks the spec's trainable, failure config or stop criteria", i, w)
		}
	}
}

// TestDecideIsDeterministic: the same state gives the same decision ids,
// whatever the clock and the random inputs say, so a repeated decision is
// de-duplicated by JetStream.
func TestDecideIsDeterministic(t *testing.T) {
	states := map[string]func(h *history){
		"pending":   func(h *history) {},
		"creating":  func(h *history) { h.step() },
		"refilling": func(h *history) { h.launch(); h.run(0, 1); h.finish("finished", 0) },
		"completing": func(h *history) {
			h.launch()
			h.run(0, 1)
			h.finish("finished", 0, 1)
			h.step()
			h.run(2)
			h.finish("finished", 2)
		},
		"stopping": func(h *history) {
			h.launch()
			h.run(0)
			h.add(events.WriterClient, &events.ExperimentStopRequested{})
		},
	}
	for name, setup := range states {
		t.Run(name, func(t *testing.T) {
			h := newHistory(t, func(s *events.ExperimentSpec) {
				s.ParamSpace = map[string]any{"x": map[string]any{"grid_search": []any{1.0, 2.0, 3.0}}}
			})
			setup(h)
			first := Decide(h.st, h.inputs())
			if len(first) == 0 {
				t.Fatal("the state decides nothing; the case tests nothing")
			}
			other := h.inputs()
			other.Now = other.Now.Add(time.Hour)
			other.NewSeed, other.NewPrefix = 99, "fffff"
			for _, in := range []Inputs{h.inputs(), other} {
				again := Decide(h.st, in)
				if diff := cmp.Diff(ids(first), ids(again)); diff != "" {
					t.Fatalf("ids differ between two decisions on the same state (-first +again):\n%s", diff)
				}
			}
			seen := map[string]bool{}
			for _, id := range ids(first) {
				if seen[id] {
					t.Fatalf("id %q is used twice in one decision: %v", id, ids(first))
				}
				seen[id] = true
			}
		})
	}
}

func ids(acts []Action) []string {
	var out []string
	for _, a := range acts {
		out = append(out, a.ID)
	}
	return out
}

// TestDecideIDsDoNotCollide: JetStream's dedupe window spans the whole
// stream, so the decisions of different experiments and runs need
// different ids even when names and run numbers run together.
func TestDecideIDsDoNotCollide(t *testing.T) {
	completed := func(name string, run int) string {
		st := state.New(name)
		h := &history{t: t, st: st, now: t0}
		h.add(events.WriterClient, &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
			Name: name, Trainable: events.Trainable{Name: "fn"}, TuneConfig: events.TuneConfig{NumSamples: 1},
		}})
		h.add(events.WriterController, &events.ExperimentStarted{Run: run, Session: "2026-01-02_03-04-05", TrialIDPrefix: "abcde", NumTrials: 0, StoragePath: "/r"})
		acts := Decide(st, Inputs{Now: h.now})
		if len(acts) != 1 || describe(acts[0]) != "completed finished" {
			t.Fatalf("%s run %d: got %v, want completed finished", name, run, describeAll(acts))
		}
		return acts[0].ID
	}
	a, b := completed("e", 11), completed("e1", 1)
	if a == b {
		t.Fatalf("experiment e run 11 and experiment e1 run 1 complete with the same event id %q", a)
	}
	if completed("e", 1) == completed("e", 2) {
		t.Fatal("two runs of one experiment complete with the same event id")
	}
}

// TestDecideReschedules: trials whose runner handed them back are
// scheduled again in creation order, and one whose failures used up
// max_failures ends ERROR in its place; after a restore the resumed
// trials are scheduled in creation order while the window has room.
func TestDecideReschedules(t *testing.T) {
	t.Run("handed back", func(t *testing.T) {
		h := newHistory(t, func(s *events.ExperimentSpec) { s.TuneConfig.MaxConcurrentTrials = 5 })
		h.launch()
		h.run(0, 1, 2, 3, 4)
		h.preempt(3, false)
		h.preempt(1, true) // max_failures 0: used up
		h.preempt(0, false)
		want := []string{"scheduled " + id(0), "end " + id(1) + " ERROR max_failures", "scheduled " + id(3)}
		if diff := cmp.Diff(want, describeAll(Decide(h.st, h.inputs()))); diff != "" {
			t.Fatalf("Decide (-want +got):\n%s", diff)
		}
	})
	t.Run("returned by runners that cannot hold it", func(t *testing.T) {
		// No attempt is made, so only the hand-backs tell the new work
		// apart: each is a new decision, not a repeat the log drops.
		h := newHistory(t, nil)
		h.launch()
		seen := map[string]bool{}
		for n := range 3 {
			tr := h.trial(0)
			h.add(events.WriterRunner, &events.TrialReturned{TrialID: tr.ID, Attempt: tr.Attempt + 1, WorkSeq: tr.WorkSeq, Runner: "cpu", Reason: "needs gpu=1"})
			acts := h.step()
			if diff := cmp.Diff([]string{"scheduled " + id(0)}, describeAll(acts)); diff != "" {
				t.Fatalf("after hand-back %d (-want +got):\n%s", n+1, diff)
			}
			if seen[acts[0].ID] {
				t.Fatalf("hand-back %d: the new work repeats the id %q of earlier work", n+1, acts[0].ID)
			}
			seen[acts[0].ID] = true
			if w := acts[0].Payload.(*events.TrialScheduled); w.AttemptBase != 0 {
				t.Fatalf("hand-back %d: the new work counts attempts from %d; want 0 (none was made)", n+1, w.AttemptBase)
			}
		}
	})
	t.Run("returned while no live runner holds it", func(t *testing.T) {
		// Scheduled before any runner registered; handed back by the CPU
		// runner that came: it waits PENDING, unscheduled, and says why.
		h := newHistory(t, func(s *events.ExperimentSpec) {
			s.Trainable.Resources = map[string]events.ResourceAmount{"gpu": {Value: 1}}
			s.TuneConfig.MaxConcurrentTrials = 1
		})
		h.launch()
		tr := h.trial(0)
		if !tr.Scheduled {
			t.Fatal("with no runner registered the trial was not scheduled")
		}
		h.in.Runners = []events.Resources{{"cpu": 4}}
		h.add(events.WriterRunner, &events.TrialReturned{TrialID: tr.ID, Attempt: 1, WorkSeq: tr.WorkSeq, Runner: "cpu", Reason: "needs gpu=1"})
		if acts := h.step(); len(acts) != 0 {
			t.Fatalf("decided %v; want nothing while no live runner holds the trial", describeAll(acts))
		}
		tr = h.trial(0)
		want := "needs gpu=1; the largest live runner has gpu=0"
		if got := Unfit(h.st.Spec, tr, h.in.Runners); tr.Status != events.StatusPending || tr.Scheduled || got != want {
			t.Fatalf("the trial is %s (scheduled %v), waiting because %q; want PENDING, unscheduled, because %q", tr.Status, tr.Scheduled, got, want)
		}
	})
	t.Run("the new work carries the failures left", func(t *testing.T) {
		// A counted failure, then the retry's delivery handed back: the new
		// message's deliveries count from 1 again, so it must say that one
		// more failure ends the trial, not max_failures (2) more.
		h := newHistory(t, func(s *events.ExperimentSpec) { s.RunConfig.FailureConfig.MaxFailures = 2 })
		h.launch()
		h.run(0)
		h.fail(0, false, "boom")
		tr := h.trial(0)
		h.add(events.WriterRunner, &events.TrialReturned{TrialID: tr.ID, Attempt: 2, WorkSeq: tr.WorkSeq, Runner: "cpu", Reason: "needs gpu=1"})
		acts := h.step()
		if len(acts) != 1 {
			t.Fatalf("decided %v; want the trial scheduled again", describeAll(acts))
		}
		if w, ok := acts[0].Payload.(*events.TrialScheduled); !ok || w.MaxFailures != 1 || w.AttemptBase != 1 {
			t.Fatalf("the new work %+v; want max_failures 1 (2 less the one failure), attempts on from 1", acts[0].Payload)
		}
	})
	t.Run("the new work carries the runners' last word", func(t *testing.T) {
		// A runner that finds nothing newer about the trial in the log
		// resumes from the work's checkpoint without reading the history.
		h := newHistory(t, nil)
		h.launch()
		if w := h.trial(0); w.RunnerSeq != 0 {
			t.Fatalf("a trial no runner wrote about has RunnerSeq %d", w.RunnerSeq)
		}
		h.run(0)
		h.preempt(0, false)
		last := h.seq // the runner's trial.failed
		acts := h.step()
		if len(acts) != 1 {
			t.Fatalf("decided %v; want the trial scheduled again", describeAll(acts))
		}
		if w, ok := acts[0].Payload.(*events.TrialScheduled); !ok || w.RunnerSeq != last {
			t.Fatalf("the new work %+v; want runner_seq %d, the runner's trial.failed", acts[0].Payload, last)
		}
	})
	t.Run("resumed", func(t *testing.T) {
		h := newHistory(t, func(s *events.ExperimentSpec) { s.TuneConfig.MaxConcurrentTrials = 5 })
		h.launch()
		h.run(0, 1, 2, 3, 4)
		h.finish("finished", 2)
		h.add(events.WriterController, &events.ExperimentInterrupted{Reason: "shutdown"})
		// The restore resumes every unfinished trial, in a window of 2.
		data, err := h.st.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		restored, err := state.Load(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range restored.Trials {
			if !tr.Finished() {
				tr.Status, tr.Scheduled, tr.FailuresAtRestore = events.StatusPending, false, tr.NumFailures
			}
		}
		restored.Status = state.ExperimentPending
		restored.Spec.TuneConfig.MaxConcurrentTrials = 2
		load := func(context.Context, *events.ExperimentRestored) (*state.Experiment, error) { return restored, nil }
		h.seq++
		ev := events.New("exp", events.WriterRestorer, "test", &events.ExperimentRestored{Source: "log", Object: "restored/run-2"})
		ev.Seq = h.seq
		if h.st, _, err = state.Fold(t.Context(), h.st, ev, load); err != nil {
			t.Fatal(err)
		}
		h.step() // run 2 starts
		if diff := cmp.Diff([]string{"scheduled " + id(0), "scheduled " + id(1)}, describeAll(h.step())); diff != "" {
			t.Fatalf("first decision of the restored run (-want +got):\n%s", diff)
		}
		h.run(0, 1)
		h.finish("finished", 0)
		if diff := cmp.Diff([]string{"scheduled " + id(3)}, describeAll(h.step())); diff != "" {
			t.Fatalf("after trial 0 finished (-want +got):\n%s", diff)
		}
	})
}

// BenchmarkDecideScale is one batch of the controller's work — fold a
// runner's event, read the trials by status (the gauges), Decide, fold
// the decision — on an experiment of 1,000 trials and on one of 10,000,
// and reports how much a batch at 10,000 costs against one at 1,000
// (x_batch_at_1000). That is
// also the ratio of the controller's cost per trial over a whole
// experiment: ~1 when a batch costs the same whatever the trials, ~10 when
// it walks them all.
//
// Each batch hands a running trial back (trial.failed, preempted): Decide
// schedules it again and the runner starts it, so the experiment keeps
// its size, 16 trials in flight and the others TERMINATED.
//
//	go test -run '^$' -bench BenchmarkDecideScale -benchtime 2s ./services/controller
//
// On the 2-core development machine, with every batch walking all trials
// three times (counts, in flight, to reschedule): 0.16-0.20 ms a batch at
// 1,000 trials, 2.7-2.9 ms at 10,000, x_batch_at_1000 17.5-18.5. With the
// fold keeping those counts (state's tally): 2.4-2.5 µs at 1,000,
// 2.3-2.8 µs at 10,000, x_batch_at_1000 0.95-1.16.
func BenchmarkDecideScale(b *testing.B) {
	perBatch := map[int]time.Duration{}
	sizes := []int{1000, 10000}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("trials=%d", n), func(b *testing.B) {
			st, in := runningExperiment(b, n, 16)
			running := st.Order[n-16:]
			seq := st.LastSeq
			apply := func(w events.Writer, p events.Payload) {
				seq++
				ev := events.New(st.Name, w, "bench", p)
				ev.Seq, ev.Time = seq, in.Now
				st, _, _ = state.Fold(b.Context(), st, ev, nil)
			}
			for i := 0; b.Loop(); i++ {
				tr := st.Trials[running[i%len(running)]]
				apply(events.WriterRunner, &events.TrialFailed{TrialID: tr.ID, Attempt: tr.Attempt, Cause: events.CausePreempted, Error: "preempted"})
				_ = st.Counts()
				acts := Decide(st, in)
				if len(acts) != 1 {
					b.Fatalf("decided %v, want the preempted trial scheduled again", describeAll(acts))
				}
				apply(events.WriterController, acts[0].Payload)
				apply(events.WriterRunner, &events.TrialStarted{TrialID: tr.ID, Attempt: tr.Attempt + 1, Runner: "r1"})
			}
			perBatch[n] = b.Elapsed() / time.Duration(b.N)
			if base := perBatch[sizes[0]]; n != sizes[0] && base > 0 {
				b.ReportMetric(float64(perBatch[n])/float64(base), "x_batch_at_1000")
			}
		})
	}
}

// runningExperiment is the state of an experiment of n trials, the last
// inFlight of them running and the others TERMINATED, folded from its
// events, with Decide's inputs.
func runningExperiment(b *testing.B, n, inFlight int) (*state.Experiment, Inputs) {
	b.Helper()
	space, err := search.ParseSpace(nil)
	if err != nil {
		b.Fatal(err)
	}
	in := Inputs{Now: t0, Space: space, NewSeed: 42, NewPrefix: "abcde", StoragePath: "/results"}
	st := state.New("exp")
	var seq uint64
	apply := func(w events.Writer, p events.Payload) {
		seq++
		ev := events.New(st.Name, w, "bench", p)
		ev.Seq, ev.Time = seq, t0
		st, _, _ = state.Fold(b.Context(), st, ev, nil)
	}
	apply(events.WriterClient, &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
		Name: "exp", Trainable: events.Trainable{Name: "fn"},
		TuneConfig: events.TuneConfig{NumSamples: n, MaxConcurrentTrials: inFlight},
	}})
	apply(events.WriterController, Decide(st, in)[0].Payload)
	for i := range n {
		for _, a := range trialActions(st, in, newSearcher(st, in), i) {
			apply(events.WriterController, a.Payload)
		}
		tr := search.TrialID(st.TrialIDPrefix, i)
		apply(events.WriterRunner, &events.TrialStarted{TrialID: tr, Attempt: 1, Runner: "r1"})
		if i < n-inFlight {
			apply(events.WriterRunner, &events.TrialCompleted{TrialID: tr, Attempt: 1, Status: events.StatusTerminated, Reason: "finished"})
		}
	}
	if got := st.InFlight(); got != inFlight || len(st.Trials) != n {
		b.Fatalf("%d trials, %d in flight; want %d, %d", len(st.Trials), got, n, inFlight)
	}
	return st, in
}

// The scheduler's decisions, made in the fold, go on the log before
// anything acts on them; the stop they decide follows once the fold holds
// them, with the decision's reason, and a trial the scheduler stopped is
// not scheduled again.
func TestDecisionsArePublishedBeforeTheStopTheyDecide(t *testing.T) {
	h := newHistory(t, func(sp *events.ExperimentSpec) {
		sp.TuneConfig.Metric, sp.TuneConfig.Mode, sp.TuneConfig.Scheduler = "loss", "min", "asha"
		sp.TuneConfig.SchedulerConfig = map[string]any{"grace_period": 1.0, "reduction_factor": 2.0, "max_t": 4.0}
	})
	h.launch()
	h.run(0, 1)
	report := func(i int, loss float64) {
		h.add(events.WriterRunner, &events.TrialReported{TrialID: id(i), Attempt: 1, Result: map[string]any{"training_iteration": 1.0, "loss": loss}})
	}
	report(0, 0.5)
	report(1, 0.9) // worse than trial 0 at rung 1: stopped
	acts := h.step()
	if diff := cmp.Diff([]string{"decided 1 " + id(0) + " continue", "decided 2 " + id(1) + " stop"}, describeAll(acts)); diff != "" {
		t.Fatalf("first step (-want +got):\n%s", diff)
	}
	acts = h.step()
	if len(acts) != 1 || !strings.HasPrefix(describe(acts[0]), "stop "+id(1)+" scheduler: ") {
		t.Fatalf("second step %v, want the stop of %s with the scheduler's reason", describeAll(acts), id(1))
	}
	if acts = h.step(); len(acts) != 0 {
		t.Fatalf("third step %v, want nothing: the stop is requested", describeAll(acts))
	}
}

// With search_alg tpe, the controller asks TPE for each new trial's config
// from the trials so far, and records what the suggestion saw; the points
// to evaluate come first. The same state gives the same suggestion (a
// restored controller suggests what the interrupted one would have).
func TestTPESuggestsFromTheTrialsSoFar(t *testing.T) {
	spec := func(sp *events.ExperimentSpec) {
		sp.ParamSpace = map[string]any{"x": map[string]any{"uniform": []any{-5.0, 5.0}}, "k": "const"}
		sp.TuneConfig.NumSamples, sp.TuneConfig.MaxConcurrentTrials = 14, 1
		sp.TuneConfig.Metric, sp.TuneConfig.Mode, sp.TuneConfig.SearchAlg = "loss", "min", "tpe"
		sp.TuneConfig.SearchAlgConfig = map[string]any{"n_startup_trials": 4.0}
		sp.TuneConfig.PointsToEvaluate = []map[string]any{{"x": 1.5}}
	}
	h := newHistory(t, spec)
	set, err := tuning.Parse(h.st.Spec)
	if err != nil {
		t.Fatal(err)
	}
	sampler, err := set.Sampler(h.space)
	if err != nil || sampler == nil {
		t.Fatalf("Searcher: %v, %v", sampler, err)
	}
	h.in.Searcher = sampler
	h.launch()
	for i := 0; i < 14; i++ {
		tr := h.trial(i)
		x := tr.Config["x"].(float64)
		if i == 0 && x != 1.5 {
			t.Fatalf("trial 0 x=%v, want the point to evaluate, 1.5", x)
		}
		if x < -5 || x > 5 || tr.Config["k"] != "const" {
			t.Fatalf("trial %d config %v outside the space", i, tr.Config)
		}
		h.run(i)
		h.add(events.WriterRunner, &events.TrialReported{TrialID: id(i), Attempt: 1, Result: map[string]any{"training_iteration": 1.0, "loss": (x - 2) * (x - 2)}})
		h.finish("finished", i)
		if i == 13 {
			break
		}
		before := h.st.LastSeq
		again := Decide(h.st, h.inputs()) // a controller that restarted here
		acts := h.step()
		if diff := cmp.Diff(describeAll(again), describeAll(acts)); diff != "" || cmp.Diff(acts[0].Payload, again[0].Payload) != "" {
			t.Fatalf("step %d: the same state gave another suggestion", i)
		}
		if c := acts[0].Payload.(*events.TrialCreated); c.SearcherSeq != before {
			t.Fatalf("trial %d saw seq %d, want %d", c.Index, c.SearcherSeq, before)
		}
	}
	// After the random start, TPE looks near the minimum at x=2.
	near := 0
	for i := 8; i < 14; i++ {
		if x := h.trial(i).Config["x"].(float64); x > 0 && x < 4 {
			near++
		}
	}
	if near < 3 {
		t.Fatalf("%d of the last 6 suggestions within 2 of the minimum, want at least 3", near)
	}
}

// With tune_config.reproducible, trial k's suggestion learns from the
// trials numbered up to k − max_concurrent_trials alone, and trial k waits
// until those have finished: trials that finish in another order give the
// same configs. Without it, they give others.
func TestReproducibleSearchIgnoresTheOrderTrialsFinishIn(t *testing.T) {
	const n, window = 10, 3
	configs := func(reproducible bool, order func(running []int) int) (xs []float64, waited bool) {
		spec := func(sp *events.ExperimentSpec) {
			sp.ParamSpace = map[string]any{"x": map[string]any{"uniform": []any{-5.0, 5.0}}}
			sp.TuneConfig.NumSamples, sp.TuneConfig.MaxConcurrentTrials = n, window
			sp.TuneConfig.Metric, sp.TuneConfig.Mode, sp.TuneConfig.SearchAlg = "loss", "min", "tpe"
			sp.TuneConfig.SearchAlgConfig = map[string]any{"n_startup_trials": 2.0}
			sp.TuneConfig.Reproducible = reproducible
		}
		h := newHistory(t, spec)
		set, err := tuning.Parse(h.st.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if h.in.Searcher, err = set.Sampler(h.space); err != nil {
			t.Fatal(err)
		}
		h.launch()
		done := map[int]bool{}
		for len(done) < n {
			var running []int
			for i := range n {
				if tr := h.st.Trials[id(i)]; tr != nil && !done[i] {
					running = append(running, i)
				}
			}
			if len(running) == 0 {
				t.Fatalf("no trial in flight after %d finished", len(done))
			}
			i := order(running)
			x := h.trial(i).Config["x"].(float64)
			h.run(i)
			h.add(events.WriterRunner, &events.TrialReported{TrialID: id(i), Attempt: 1, Result: map[string]any{"training_iteration": 1.0, "loss": (x - 2) * (x - 2)}})
			h.finish("finished", i)
			done[i] = true
			before := len(h.st.Trials)
			h.step()
			if created := len(h.st.Trials) - before; len(running)-1+created < window && len(h.st.Trials) < n {
				waited = true // the window had room, and a trial waited for its history
			}
		}
		for i := range n {
			xs = append(xs, h.trial(i).Config["x"].(float64))
		}
		return xs, waited
	}
	first := func(running []int) int { return running[0] }
	last := func(running []int) int { return running[len(running)-1] }
	inOrder, _ := configs(true, first)
	reversed, waited := configs(true, last)
	if !waited {
		t.Errorf("finishing the newest trial first never made a trial wait for its history")
	}
	if diff := cmp.Diff(inOrder, reversed); diff != "" {
		t.Errorf("reproducible: the configs depend on the order trials finish in (-oldest first +newest first):\n%s", diff)
	}
	free1, _ := configs(false, first)
	free2, _ := configs(false, last)
	if cmp.Equal(free1, free2) {
		t.Errorf("without reproducible the two orders gave the same configs %v: the test shows nothing", free1)
	}
}
