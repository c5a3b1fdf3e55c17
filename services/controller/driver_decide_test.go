package controller

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/tuning"
)

// answer folds the driver's answer to the question nextQuestion asks now.
func (h *history) answer(want bool, a events.DriverAnswer) {
	h.t.Helper()
	q, ok := nextQuestion(h.st, h.space, want)
	if !ok {
		h.t.Fatal("no question for the driver")
	}
	h.add(events.WriterController, &events.DriverAnswered{DriverQuestion: q, Answer: a, By: "MyObject"})
}

// TestDriverStopperJudgesBeforeTheScheduler: a result waits for the
// driver's stopper, in the state (and so in a snapshot of it) until the log
// holds the answer; no answer, no decision; a stop answer is the
// stopper's decision, named after the object.
func TestDriverStopperJudgesBeforeTheScheduler(t *testing.T) {
	h := newHistory(t, func(s *events.ExperimentSpec) {
		s.Driver = &events.DriverSpec{Stopper: "MyStopper"}
		s.TuneConfig.WaitForDecisions = true
	})
	h.launch()
	h.run(0)
	report := func(it float64) {
		h.add(events.WriterRunner, &events.TrialReported{TrialID: id(0), Attempt: 1, Result: map[string]any{"training_iteration": it, "loss": 1 / it}})
	}
	report(1)
	if got := h.st.DriverWait(); !strings.Contains(got, "1 result(s) for MyStopper to judge") {
		t.Errorf("DriverWait = %q; want it to count the result waiting for MyStopper", got)
	}
	// A snapshot keeps the question.
	b, err := json.Marshal(h.st)
	if err != nil {
		t.Fatal(err)
	}
	var back state.Experiment
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if asks := back.DriverAsks(); len(asks) != 1 || asks[0].Key != "stop/"+id(0)+"/1" {
		t.Fatalf("the snapshot's questions: %+v", asks)
	}
	for range 3 {
		if acts := describeAll(h.step()); slices.ContainsFunc(acts, func(s string) bool { return strings.HasPrefix(s, "stop ") }) {
			t.Fatalf("a stop before the driver answered: %v", acts)
		}
	}
	h.answer(false, events.DriverAnswer{})
	if len(h.st.DriverAsks()) != 0 || h.st.DriverWait() != "" {
		t.Fatalf("answered, still waiting: %+v", h.st.DriverAsks())
	}
	report(2)
	h.answer(false, events.DriverAnswer{Stop: true})
	acts := describeAll(h.step())
	if !slices.Contains(acts, "decided 1 "+id(0)+" stop") {
		t.Fatalf("after the stop answer: %v; want the stopper's decision", acts)
	}
	acts = describeAll(h.step())
	want := "stop " + id(0) + " stopper: MyObject stopped the trial at training_iteration 2"
	if !slices.Contains(acts, want) {
		t.Fatalf("then: %v; want %q", acts, want)
	}
}

// TestDriverSearcherSuggests: no trial is created before the log holds the
// driver's config for it; the config goes over the param space's
// constants; FINISHED ends the search at its index.
func TestDriverSearcherSuggests(t *testing.T) {
	h := newHistory(t, func(s *events.ExperimentSpec) {
		s.Driver = &events.DriverSpec{Searcher: "MySearcher"}
		s.ParamSpace = map[string]any{"lr": 0.1, "nested": map[string]any{"a": 1.0}}
		s.TuneConfig.NumSamples = 5
	})
	h.launch()
	if len(h.st.Trials) != 0 {
		t.Fatalf("trials created before any suggestion: %v", h.st.Order)
	}
	if got := h.st.DriverWait(); !strings.Contains(got, "the config of trial 0 from MySearcher") {
		t.Errorf("DriverWait = %q", got)
	}
	h.answer(true, events.DriverAnswer{Config: map[string]any{"x": 3.0, "nested": map[string]any{"b": 2.0}}})
	h.step()
	got := h.trial(0).Config
	if got["x"] != 3.0 || got["lr"] != 0.1 || got["nested"].(map[string]any)["a"] != 1.0 || got["nested"].(map[string]any)["b"] != 2.0 {
		t.Errorf("trial 0's config %v; want the suggestion over the space's constants", got)
	}
	h.answer(true, events.DriverAnswer{Finished: true})
	if h.st.NumTrials != 1 {
		t.Fatalf("FINISHED at index 1: %d trials in the search; want 1", h.st.NumTrials)
	}
	h.run(0)
	h.finish("finished", 0)
	if acts := describeAll(h.step()); !slices.Contains(acts, "completed finished") {
		t.Errorf("after the only trial: %v; want the experiment completed", acts)
	}
}

// TestDriverSamplesFrom: a trial of a space with sample_from domains is
// created once the log holds the driver's values for them, asked with the
// config drawn so far (grid and random values set, sample_from null); the
// values go into the config and the tag.
func TestDriverSamplesFrom(t *testing.T) {
	h := newHistory(t, func(s *events.ExperimentSpec) {
		s.Driver = &events.DriverSpec{}
		s.ParamSpace = map[string]any{"x": map[string]any{"grid_search": []any{1.0, 2.0}}, "wd": map[string]any{"sample_from": "<lambda>"}}
	})
	h.launch()
	if len(h.st.Trials) != 0 {
		t.Fatalf("trials created before the driver's values: %v", h.st.Order)
	}
	if got := h.st.DriverWait(); !strings.Contains(got, "the sample_from values of trial 0") {
		t.Errorf("DriverWait = %q", got)
	}
	q, ok := nextQuestion(h.st, h.space, true)
	if !ok || q.Method != events.DriverSample || q.Config["x"] != 1.0 || q.Config["wd"] != nil {
		t.Fatalf("question %+v; want a sample of trial 0 with x drawn and wd null", q)
	}
	h.answer(true, events.DriverAnswer{Config: map[string]any{"x": 1.0, "wd": 0.5}})
	h.step()
	if c := h.trial(0).Config; c["wd"] != 0.5 || c["x"] != 1.0 {
		t.Errorf("trial 0's config %v; want wd 0.5 from the driver", c)
	}
	if tag := h.trial(0).Tag; tag != "0_wd=0.5000,x=1" {
		t.Errorf("tag %q", tag)
	}
}

// TestTPELearnsFromEvaluatedRewards: with Ray's evaluated_rewards, the
// points to evaluate are trials already run: none runs them, and TPE,
// past its startup trials with them, suggests near the best of them.
func TestTPELearnsFromEvaluatedRewards(t *testing.T) {
	h := newHistory(t, func(sp *events.ExperimentSpec) {
		sp.ParamSpace = map[string]any{"x": map[string]any{"uniform": []any{0.0, 1.0}}}
		sp.TuneConfig.NumSamples, sp.TuneConfig.MaxConcurrentTrials = 3, 1
		sp.TuneConfig.Metric, sp.TuneConfig.Mode, sp.TuneConfig.SearchAlg = "score", "max", "tpe"
		sp.TuneConfig.SearchAlgConfig = map[string]any{"n_startup_trials": 4.0, "evaluated_rewards": []any{0.1, 0.2, 0.9, 1.0}}
		sp.TuneConfig.PointsToEvaluate = []map[string]any{{"x": 0.05}, {"x": 0.1}, {"x": 0.9}, {"x": 0.95}}
	})
	set, err := tuning.Parse(h.st.Spec)
	if err != nil {
		t.Fatal(err)
	}
	tc, _ := set.TPE()
	if h.in.Searcher, err = set.Sampler(h.space); err != nil {
		t.Fatal(err)
	}
	if h.in.Evaluated, err = tc.Evaluated(h.space, h.st.Spec.ParamSpace, h.st.Spec.TuneConfig.PointsToEvaluate); err != nil || len(h.in.Evaluated) != 4 {
		t.Fatalf("Evaluated: %v, %v", h.in.Evaluated, err)
	}
	h.launch()
	x := h.trial(0).Config["x"].(float64)
	for _, p := range h.st.Spec.TuneConfig.PointsToEvaluate {
		if x == p["x"] {
			t.Fatalf("trial 0 runs the evaluated point x=%v", x)
		}
	}
	if x < 0.5 {
		t.Errorf("trial 0 x=%v; want TPE's suggestion near the evaluated best (0.9, 0.95), not a startup draw", x)
	}
	// Without the rewards the first trial is the first point.
	h2 := newHistory(t, func(sp *events.ExperimentSpec) {
		sp.ParamSpace = map[string]any{"x": map[string]any{"uniform": []any{0.0, 1.0}}}
		sp.TuneConfig.NumSamples, sp.TuneConfig.MaxConcurrentTrials = 3, 1
		sp.TuneConfig.Metric, sp.TuneConfig.Mode, sp.TuneConfig.SearchAlg = "score", "max", "tpe"
		sp.TuneConfig.PointsToEvaluate = []map[string]any{{"x": 0.05}}
	})
	set2, err := tuning.Parse(h2.st.Spec)
	if err != nil {
		t.Fatal(err)
	}
	h2.in.Searcher, _ = set2.Sampler(h2.space)
	h2.launch()
	if x := h2.trial(0).Config["x"]; x != 0.05 {
		t.Errorf("without evaluated_rewards trial 0 x=%v; want the point 0.05", x)
	}
}

// TestATrialWaitsForTheDriversAnswerBeforeItRunsAgain: a trial handed
// back (or left by a killed stack, for a restore) while its last result
// waits for the driver's stopper is not scheduled again before the
// answer: it would go on past the result the stopper stops it at.
func TestATrialWaitsForTheDriversAnswerBeforeItRunsAgain(t *testing.T) {
	h := newHistory(t, func(s *events.ExperimentSpec) {
		s.Driver = &events.DriverSpec{Stopper: "MyStopper"}
		s.TuneConfig.WaitForDecisions = true
		s.RunConfig.FailureConfig.MaxFailures = 3
		s.ParamSpace = map[string]any{"x": 1.0} // one trial: no other takes its place
	})
	h.launch()
	h.run(0)
	h.add(events.WriterRunner, &events.TrialReported{TrialID: id(0), Attempt: 1, Result: map[string]any{"training_iteration": 1.0, "loss": 1.0}})
	h.preempt(0, false)
	for range 3 {
		if acts := describeAll(h.step()); slices.Contains(acts, "scheduled "+id(0)) {
			t.Fatalf("scheduled again before the driver's stopper judged its result: %v", acts)
		}
	}
	h.answer(false, events.DriverAnswer{})
	var acts []string
	for range 2 {
		acts = append(acts, describeAll(h.step())...)
	}
	if !slices.Contains(acts, "scheduled "+id(0)) {
		t.Fatalf("after the answer: %v; want the trial scheduled again", acts)
	}
}
