package main

import (
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
)

// TestExplainNamesTheDriversObjects: explain says which of the driver's
// objects suggested the trial's config and what its stopper was asked and
// answered about each result.
func TestExplainNamesTheDriversObjects(t *testing.T) {
	zero := 0
	x := &explanation{
		Experiment: "e", Source: fromLog, TrialID: "abc_00000", TrialName: "fn_abc_00000", Config: map[string]any{"x": 1.0},
		SearchAlg: "random", Status: events.StatusTerminated, EndReason: "stopper: MyStopper stopped the trial at training_iteration 3",
		Driver: []events.DriverAnswered{
			{DriverQuestion: events.DriverQuestion{Key: "suggest/0", Method: events.DriverSuggest, Through: 7, TrialID: "abc_00000", Index: &zero},
				By: "MySearcher", Answer: events.DriverAnswer{Config: map[string]any{"x": 1.0}}},
			{DriverQuestion: events.DriverQuestion{Key: "stop/abc_00000/1", Method: events.DriverStop, TrialID: "abc_00000", Result: map[string]any{"training_iteration": 1.0}},
				By: "MyStopper"},
			{DriverQuestion: events.DriverQuestion{Key: "stop/abc_00000/2", Method: events.DriverStop, TrialID: "abc_00000", Result: map[string]any{"training_iteration": 2.0}},
				By: "MyStopper"},
			{DriverQuestion: events.DriverQuestion{Key: "stop/abc_00000/3", Method: events.DriverStop, TrialID: "abc_00000", Result: map[string]any{"training_iteration": 3.0}},
				By: "MyStopper", Answer: events.DriverAnswer{Stop: true}},
		},
		Decisions: []events.TrialDecided{{TrialID: "abc_00000", Ordinal: 1, By: events.DecidedByStopper, Action: "stop", Reason: "MyStopper stopped the trial at training_iteration 3"}},
	}
	var b strings.Builder
	if err := x.print(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	words := strings.Join(strings.Fields(out), " ") // the columns' padding aside
	for _, want := range []string{
		"suggested by MySearcher, the driver's searcher, from the log up to seq 7",
		"asked MyStopper goes on at training_iteration 1 to 2 (2 results) asked MyStopper stop at training_iteration 3",
		"stopped by #1",
	} {
		if !strings.Contains(words, want) {
			t.Errorf("explain does not say %q:\n%s", want, out)
		}
	}
}

// A model-based searcher's trial says which searcher suggested it and from
// how much of the log; tpe and bayesopt (also by its short name gp) alike.
func TestExplainNamesTheSearcherOfAConfig(t *testing.T) {
	for _, alg := range []string{"tpe", "bayesopt", "gp"} {
		var out strings.Builder
		x := &explanation{Experiment: "exp", Source: fromLog, TrialID: "t1", TrialName: "train_t1",
			Config: map[string]any{"x": 1.5}, SearchAlg: alg, SearcherSeq: 42}
		if err := x.print(&out); err != nil {
			t.Fatal(err)
		}
		if want := `config {"x":1.5}, suggested by ` + alg + " from the log up to seq 42"; !strings.Contains(out.String(), want) {
			t.Errorf("search_alg %s: explain does not say %q:\n%s", alg, want, out.String())
		}
	}
}
