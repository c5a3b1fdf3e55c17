package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
)

// With search_alg external, Decide creates a trial only from the config the
// reconciler got for it, records it as any suggestion (searcher_seq, the
// points to evaluate over it), and asks for a trial only when it would
// create one.
func TestDecideCreatesTrialsFromTheExternalSearchersConfigs(t *testing.T) {
	h := newHistory(t, func(sp *events.ExperimentSpec) {
		sp.ParamSpace = map[string]any{"x": map[string]any{"uniform": []any{0.0, 10.0}}, "k": "const"}
		sp.TuneConfig.NumSamples, sp.TuneConfig.MaxConcurrentTrials = 3, 2
		sp.TuneConfig.Metric, sp.TuneConfig.Mode, sp.TuneConfig.SearchAlg = "loss", "min", "external"
		sp.TuneConfig.SearchAlgConfig = map[string]any{"subject": "my.searcher"}
		sp.TuneConfig.PointsToEvaluate = []map[string]any{{"x": 1.5}}
	})
	if acts := h.step(); describe(acts[0]) != "started run=1 seed=42 trials=3 prefix=abcde storage=/results" {
		t.Fatalf("start %v", describeAll(acts))
	}
	if !wantsTrial(h.st, h.inputs()) {
		t.Fatal("no trial wanted at the start")
	}
	if acts := h.step(); len(acts) != 0 {
		t.Fatalf("created %v without the searcher's config", describeAll(acts))
	}
	sg := &Suggestion{Index: 0, Config: map[string]any{"x": 4.0, "k": "const"}, Seq: 2}
	h.in.Suggestion = &Suggestion{Index: 1, Config: sg.Config, Seq: 2}
	if acts := h.step(); len(acts) != 0 {
		t.Fatalf("created %v from the config of another index", describeAll(acts))
	}
	h.in.Suggestion = sg
	acts := h.step()
	if diff := cmp.Diff(createdAndScheduled(0), describeAll(acts)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	c := acts[0].Payload.(*events.TrialCreated)
	if c.SearcherSeq != 2 || c.Config["x"] != 1.5 || c.ExperimentTag != "0_x=1.5000" {
		t.Errorf("trial 0: seq %d, config %v, tag %q; want seq 2 and the point over the config", c.SearcherSeq, c.Config, c.ExperimentTag)
	}
	if sg.Config["x"] != 4.0 {
		t.Errorf("the point changed the inputs' config: %v", sg.Config)
	}
	h.in.Suggestion = &Suggestion{Index: 1, Config: map[string]any{"x": 7.0, "k": "const"}, Seq: 5}
	if acts := h.step(); len(acts) != 2 || h.trial(1).Config["x"] != 7.0 {
		t.Fatalf("trial 1: %v, config %v", describeAll(acts), h.trial(1).Config)
	}
	if wantsTrial(h.st, h.inputs()) {
		t.Fatal("a trial wanted with max_concurrent_trials 2 in flight")
	}
	h.run(0, 1)
	h.finish("finished", 0)
	if !wantsTrial(h.st, h.inputs()) {
		t.Fatal("no trial wanted once a slot is free")
	}
}
