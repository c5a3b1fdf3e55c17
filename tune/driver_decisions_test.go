package tune_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/tune"
)

// TestDriverStopperAndSearcherDecide: with a spec whose driver section
// names a stopper and a searcher, the controller asks the driver for each
// new trial's config and whether each result stops its trial: the trials
// run the driver's configs over the param space's constants, a trial stops
// at the result the driver's stopper stopped, FINISHED ends the search
// before num_samples, and every answer is a driver.answered event in the
// log before the decision it makes.
func TestDriverStopperAndSearcherDecide(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	d := startFakeDriver(t, 0, false, func(m tune.DriverMessage) map[string]any {
		mu.Lock()
		asked = append(asked, m.Key)
		mu.Unlock()
		switch m.Method {
		case "suggest":
			if *m.Index == 3 {
				return map[string]any{"finished": true}
			}
			return map[string]any{"config": map[string]any{"x": float64(*m.Index)}}
		case "stop":
			it, _ := m.Result["training_iteration"].(float64)
			return map[string]any{"stop": strings.HasSuffix(m.TrialID, "_00001") && it == 2}
		}
		return nil
	})
	spec := tune.Spec{
		Name: "driven", ParamSpace: map[string]any{"lr": 0.5},
		TuneConfig: tune.TuneConfig{NumSamples: 10, MaxConcurrentTrials: 1, Metric: "score", Mode: "max", WaitForDecisions: true},
		RunConfig:  storage(t),
		Driver:     &events.DriverSpec{Stopper: "StopOneAtTwo", Searcher: "Counting"},
	}
	g := fitDriven(t, d, steps(4), spec, 1)
	got := map[float64]int{}
	for _, r := range g.Results() {
		if r.Config["lr"] != 0.5 {
			t.Errorf("trial %s: config %v lacks the param space's constant lr 0.5", r.TrialID, r.Config)
		}
		it, _ := r.Metrics["training_iteration"].(float64)
		got[r.Config["x"].(float64)] = int(it)
	}
	if want := map[float64]int{0: 4, 1: 2, 2: 4}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("trials by x: last iteration %v; want %v (x=1 stopped at 2, FINISHED at index 3)", got, want)
	}
	// Each answer is in the log, before what it decided: the driver has
	// them relayed.
	acked, _ := d.seen(t)
	var answered []string
	answeredAt := map[string]uint64{}
	for _, m := range acked {
		switch m.Type {
		case "driver.answered":
			var p events.DriverAnswered
			if err := json.Unmarshal(m.Data, &p); err != nil {
				t.Fatal(err)
			}
			answered = append(answered, p.Key)
			answeredAt[p.Key] = m.Seq
			if p.By != "FakeDriver" {
				t.Errorf("%s: by %q; want the driver's object", p.Key, p.By)
			}
		case "trial.created":
			var p events.TrialCreated
			if err := json.Unmarshal(m.Data, &p); err != nil {
				t.Fatal(err)
			}
			if at, ok := answeredAt[fmt.Sprint("suggest/", p.Index)]; !ok || at > m.Seq {
				t.Errorf("trial %s created at %d before its suggestion was logged (%v)", p.TrialID, m.Seq, ok)
			}
		}
	}
	var stopped string
	for _, r := range g.Results() {
		if r.Config["x"] == 1.0 {
			stopped = r.TrialID
		}
	}
	for _, key := range []string{"suggest/0", "suggest/1", "suggest/2", "suggest/3", "stop/" + stopped + "/2"} {
		if !slices.Contains(answered, key) {
			t.Errorf("no driver.answered %s in the log; have %v", key, answered)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != len(answered) {
		t.Errorf("the driver was asked %d questions, the log answers %d: %v vs %v", len(asked), len(answered), asked, answered)
	}
}

// TestDriverSamplesFrom: sample_from values come from the driver, asked
// with the config drawn so far (Ray's spec.config view).
func TestDriverSamplesFrom(t *testing.T) {
	d := startFakeDriver(t, 0, false, func(m tune.DriverMessage) map[string]any {
		if m.Method != "sample" || m.Config["wd"] != nil {
			return nil
		}
		config := map[string]any{}
		for k, v := range m.Config {
			config[k] = v
		}
		config["wd"] = m.Config["x"].(float64) * 2
		return map[string]any{"config": config}
	})
	spec := tune.Spec{
		Name: "sampled", ParamSpace: map[string]any{"x": map[string]any{"grid_search": []any{1.0, 2.0, 3.0}}, "wd": map[string]any{"sample_from": "<lambda>"}},
		TuneConfig: tune.TuneConfig{NumSamples: 1}, RunConfig: storage(t), Driver: &events.DriverSpec{},
	}
	g := fitDriven(t, d, steps(1), spec, 2)
	if g.Len() != 3 {
		t.Fatalf("%d trials; want the grid's 3", g.Len())
	}
	for _, r := range g.Results() {
		if x, wd := r.Config["x"].(float64), r.Config["wd"]; wd != 2*x {
			t.Errorf("trial %s: config %v; want wd = 2x from the driver", r.TrialID, r.Config)
		}
	}
}

// fitDriven runs spec with trainable on the embedded stack, d its driver.
func fitDriven(t *testing.T, d *fakeDriver, trainable tune.Trainable, spec tune.Spec, slots int) *tune.ResultGrid {
	t.Helper()
	tuner, err := tune.NewTuner(trainable, tune.WithTrainableName("steps"), tune.WithSpec(spec),
		tune.WithStoreDir(t.TempDir()), tune.WithRunnerSlots(slots), d.option())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), fitDeadline)
	defer cancel()
	g, err := tuner.Fit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
