package sched

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/internal/settings"
)

const tol = 1e-9

func near(a, b float64) bool { return math.Abs(a-b) <= tol }

// result is a result with time_attr "t" and metric "m".
func result(trial string, t, m float64) Result {
	return Result{Trial: trial, Metrics: map[string]float64{"t": t, "m": m}}
}

func newASHA(t *testing.T, mutate func(*ASHAConfig)) *ASHA {
	t.Helper()
	cfg := DefaultASHAConfig()
	cfg.Objective = Objective{Metric: "m", Mode: Max}
	cfg.TimeAttr = "t"
	if mutate != nil {
		mutate(&cfg)
	}
	a, err := NewASHA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestASHAMilestones(t *testing.T) {
	tests := []struct {
		name            string
		grace, maxT, rf float64
		s               int
		want            []float64
	}{
		{"ray defaults", 1, 100, 4, 0, []float64{64, 16, 4, 1}},
		// numpy: log(1000)/log(10) = 3.0 -> 4 rungs; Go's math.Log gives
		// 2.9999999999999996 -> 3. The integer count matches numpy.
		{"max_t 1000 rf 10", 1, 1000, 10, 0, []float64{1000, 100, 10, 1}},
		{"max_t 81 rf 3", 1, 81, 3, 0, []float64{81, 27, 9, 3, 1}},
		{"bracket 1 starts a rung up", 1, 81, 3, 1, []float64{81, 27, 9, 3}},
		{"ray docstring bracket", 1, 10, 2, 0, []float64{8, 4, 2, 1}},
		{"grace 2", 2, 100, 3, 0, []float64{54, 18, 6, 2}},
		{"grace = max_t", 5, 5, 2, 0, []float64{5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ashaMilestones(tt.grace, tt.maxT, tt.rf, tt.s)
			if !slices.Equal(got, tt.want) {
				t.Errorf("milestones = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestASHARayDocstring replays the example in Ray's _Bracket docstring:
// _Bracket(min_t=1, max_t=10, rf=2, s=0).
func TestASHARayDocstring(t *testing.T) {
	a := newASHA(t, func(c *ASHAConfig) { c.MaxT, c.ReductionFactor = 10, 2 })
	for _, id := range []string{"t1", "t2", "t3"} {
		a.Add(id, nil)
	}
	steps := []struct {
		res  Result
		want Action
		cut  float64 // NaN: no cutoff
	}{
		{result("t1", 1, 2), Continue, math.NaN()}, // empty rung: recorded
		{result("t2", 1, 4), Continue, 2},          // 50th pct of [2] = 2; 4 >= 2
		{result("t3", 1, 1), Stop, 3},              // 50th pct of [2 4]: 2 + (4-2)*0.5 = 3; 1 < 3
	}
	for _, s := range steps {
		d := a.Result(s.res, Context{})[0]
		if d.Action != s.want {
			t.Fatalf("%s: action %s, want %s (%s)", s.res.Trial, d.Action, s.want, d.Reason)
		}
		if math.IsNaN(s.cut) != (d.Rung.Cutoff == nil) || (d.Rung.Cutoff != nil && !near(float64(*d.Rung.Cutoff), s.cut)) {
			t.Fatalf("%s: cutoff %v, want %v", s.res.Trial, d.Rung.Cutoff, s.cut)
		}
	}
	// Ray: b.cutoff(b._rungs[3][1]) == 2.0 once all three are recorded.
	rung := &a.st.Brackets[0].Rungs[3]
	if c := a.cutoff(rung, 0, 0, 1, 0); !near(float64(*c.Cutoff), 2) {
		t.Errorf("cutoff of [2 4 1] = %v, want 2", *c.Cutoff)
	}
}

// TestASHACutoffs checks the cutoff, numpy's linear-interpolation
// nanpercentile at (1-1/rf)*100 of the other trials' rewards, on fixed
// histories.
func TestASHACutoffs(t *testing.T) {
	tests := []struct {
		name   string
		rf     float64
		mode   Mode
		others []float64 // metrics already recorded at rung 1
		own    float64
		cutoff float64
		want   Action
	}{
		// 75th pct of [0.2 0.5 0.9]: index 2*0.75 = 1.5, fraction 0.5 >= 0.5 so
		// numpy takes b - (b-a)*(1-0.5) = 0.9 - 0.4*0.5 = 0.7.
		{"interpolated", 4, Max, []float64{0.5, 0.9, 0.2}, 0.6, 0.7, Stop},
		{"equal to cutoff passes", 4, Max, []float64{0.5, 0.9, 0.2}, 0.7, 0.7, Continue},
		// 75th pct of [0.1 0.3 0.4 0.8 1.0]: index 4*0.75 = 3 -> 0.8.
		{"on an element", 4, Max, []float64{1.0, 0.1, 0.8, 0.3, 0.4}, 0.79, 0.8, Stop},
		// min mode: rewards are -loss = [-0.2 -0.5 -0.9]; sorted
		// [-0.9 -0.5 -0.2], index 1.5 -> -0.2 - 0.3*0.5 = -0.35. Loss 0.3 gives
		// reward -0.3 >= -0.35: passes; loss 0.4 gives -0.4 < -0.35: stops.
		{"min mode passes", 4, Min, []float64{0.2, 0.5, 0.9}, 0.3, -0.35, Continue},
		{"min mode stops", 4, Min, []float64{0.2, 0.5, 0.9}, 0.4, -0.35, Stop},
		// rf 3: the 66.67th pct of [1 2 3 4]: index 3*(2/3) = 2 -> 3.
		{"rf 3", 3, Max, []float64{4, 1, 3, 2}, 2.9, 3, Stop},
		// rf 2: the median of [1 2 3 4]: index 1.5 -> 3 - 1*0.5 = 2.5.
		{"rf 2", 2, Max, []float64{4, 1, 3, 2}, 2.5, 2.5, Continue},
		// NaN rewards are left out: 75th pct of [1 3] = 1 + 2*0.75 = 2.5.
		{"NaN left out", 4, Max, []float64{1, math.NaN(), 3}, 2.4, 2.5, Stop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newASHA(t, func(c *ASHAConfig) { c.ReductionFactor, c.Mode, c.MaxT = tt.rf, tt.mode, 64 })
			for i, v := range tt.others {
				id := string(rune('a' + i))
				a.Add(id, nil)
				a.Result(result(id, 1, v), Context{})
			}
			a.Add("own", nil)
			d := a.Result(result("own", 1, tt.own), Context{})[0]
			if d.Action != tt.want || !near(float64(*d.Rung.Cutoff), tt.cutoff) {
				t.Errorf("got %s at cutoff %v, want %s at %v (%s)", d.Action, *d.Rung.Cutoff, tt.want, tt.cutoff, d.Reason)
			}
			if got := a.st.Brackets[0].Rungs[len(a.st.Brackets[0].Rungs)-1].Recorded["own"]; float64(got) != a.cfg.Mode.sign()*tt.own {
				t.Errorf("own reward recorded as %v, want %v", got, a.cfg.Mode.sign()*tt.own)
			}
		})
	}
}

// TestASHARungRecords follows one trial's records through rungs 1, 4 and
// 16 of max_t 64, rf 4, including a time_attr that jumps over rungs.
func TestASHARungRecords(t *testing.T) {
	type rec = map[string]Float
	a := newASHA(t, func(c *ASHAConfig) { c.MaxT = 64 }) // rungs 64 16 4 1
	for _, id := range []string{"a", "b", "c"} {
		a.Add(id, nil)
	}
	steps := []struct {
		res  Result
		want Action
		rung float64 // 0: no rung reached
	}{
		{result("a", 1, 10), Continue, 1},
		{result("a", 2, 11), Continue, 0},
		// b first reports at 5: the highest rung reached, 4, is judged (first
		// there) and rung 1 is left for later.
		{result("b", 5, 1), Continue, 4},
		// At 6, rung 4 is recorded, rung 1 is not: Ray goes down to it. Its
		// cutoff is the 75th pct of [10] = 10, and 2 < 10.
		{result("b", 6, 2), Stop, 1},
		{result("a", 4, 12), Continue, 4}, // cutoff 1 (b's value at 4)
		// 75th pct of [1 12]: index 0.75 >= 0.5, so 12 - 11*0.25 = 9.25; 3 < 9.25.
		{result("c", 4, 3), Stop, 4},
	}
	for i, s := range steps {
		d := a.Result(s.res, Context{})[0]
		if d.Action != s.want {
			t.Fatalf("step %d: %s, want %s (%s)", i, d.Action, s.want, d.Reason)
		}
		switch {
		case s.rung == 0 && d.Rung != nil:
			t.Fatalf("step %d: judged at rung %v, want none", i, d.Rung.Milestone)
		case s.rung != 0 && (d.Rung == nil || d.Rung.Milestone != s.rung):
			t.Fatalf("step %d: rung %+v, want milestone %v", i, d.Rung, s.rung)
		}
	}
	want := []rec{{}, {}, {"a": 12, "b": 1, "c": 3}, {"a": 10, "b": 2}}
	for i, r := range a.st.Brackets[0].Rungs {
		if !cmp.Equal(r.Recorded, want[i]) {
			t.Errorf("rung %v records %v, want %v", r.Milestone, r.Recorded, want[i])
		}
	}
}

// TestASHAStopLastTrials: at max_t the trial is stopped without a record;
// its completion then records the final result at the top rung.
func TestASHAStopLastTrials(t *testing.T) {
	a := newASHA(t, func(c *ASHAConfig) { c.MaxT, c.GracePeriod = 4, 4 }) // one rung: 4
	a.Add("a", nil)
	a.Add("b", nil)
	a.Result(result("a", 4, 1), Context{}) // stopped at max_t, not recorded
	if got := a.st.Brackets[0].Rungs[0].Recorded; len(got) != 0 {
		t.Fatalf("max_t stop recorded %v", got)
	}
	ds := a.Complete(result("a", 4, 1))
	if len(ds) != 1 || ds[0].Action != Record || ds[0].Rung.Milestone != 4 {
		t.Fatalf("complete = %+v, want one Record at 4", ds)
	}
	if d := a.Result(result("a", 5, 1), Context{})[0]; d.Action != Continue || d.Rung != nil {
		t.Errorf("a result after completion: %+v, want a plain Continue", d)
	}

	b := newASHA(t, func(c *ASHAConfig) { c.MaxT, c.StopLastTrials = 16, false }) // rungs 16 4 1
	b.Add("a", nil)
	b.Add("b", nil)
	b.Result(result("a", 1, 5), Context{})
	b.Result(result("b", 4, 1), Context{}) // first at 4
	// Without stop_last_trials a trial recorded at its highest reached rung
	// is not judged again, even at a lower unrecorded rung.
	if d := b.Result(result("b", 5, 0), Context{})[0]; d.Action != Continue || d.Rung != nil {
		t.Errorf("b at 5: %+v, want a plain Continue", d)
	}
	if d := b.Result(result("b", 20, 0), Context{})[0]; d.Action != Continue {
		t.Errorf("b past max_t: %s, want Continue without stop_last_trials", d.Action)
	}
}

// TestASHABrackets checks Ray's softmax bracket choice, drawn from the
// caller's generator.
func TestASHABrackets(t *testing.T) {
	a := newASHA(t, func(c *ASHAConfig) { c.Brackets = 2 }) // 4 and 3 rungs
	// p = e^0, e^-1 normalised: 1/(1+e^-1) = 0.7310585786300049.
	p0 := 1 / (1 + math.Exp(-1))
	for seed := range uint64(20) {
		u := rand.New(rand.NewPCG(seed, 1)).Float64()
		want := 0
		if u >= p0 {
			want = 1
		}
		id := string(rune('a' + seed))
		d := a.Add(id, rand.New(rand.NewPCG(seed, 1)))
		if d.Bracket.Bracket != want || !near(d.Bracket.Probabilities[0], p0) {
			t.Errorf("seed %d: u=%v bracket %d, want %d (p %v)", seed, u, d.Bracket.Bracket, want, d.Bracket.Probabilities)
		}
	}
	if got := a.st.Brackets[1].Rungs[len(a.st.Brackets[1].Rungs)-1].Milestone; got != 4 {
		t.Errorf("bracket 1's first rung = %v, want 4", got)
	}
}

func TestASHAReason(t *testing.T) {
	a := newASHA(t, nil)
	for i, v := range []float64{0.5, 0.9, 0.2} {
		id := string(rune('a' + i))
		a.Add(id, nil)
		a.Result(result(id, 1, v), Context{})
	}
	a.Add("x", nil)
	d := a.Result(result("x", 1, 0.41), Context{})[0]
	want := "stopped at rung 1 (t 1): 0.41 < cutoff 0.7, the 75th percentile of 3 other trials' rewards [0.2 0.5 0.9]"
	if d.Reason != want {
		t.Errorf("reason\n got %q\nwant %q", d.Reason, want)
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := DefaultASHAConfig()
	cfg.Objective = Objective{Metric: "m", Mode: Max}
	cfg.ReductionFactor = 1
	cfg.Brackets = 0
	err := cfg.Validate()
	if !errors.Is(err, settings.ErrInvalid) {
		t.Fatalf("err = %v, want settings.ErrInvalid", err)
	}
	for _, want := range []string{"reduction_factor: must be > 1, got 1", "brackets: must be >= 1, got 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err %q lacks %q", err, want)
		}
	}
	bad := []error{
		HyperBandConfig{Objective: Objective{Metric: "m", Mode: "up"}, TimeAttr: "t", MaxT: 81, ReductionFactor: 3}.Validate(),
		MedianConfig{Objective: Objective{Mode: Min}, TimeAttr: "t", GracePeriod: -1}.Validate(),
		PBTConfig{Objective: Objective{Metric: "m", Mode: Max}, TimeAttr: "t", PerturbationInterval: 1, QuantileFraction: 0.6,
			PerturbationFactors: []float64{1}, HyperparamMutations: map[string]Mutation{"lr": {}}}.Validate(),
	}
	wants := []string{
		`mode: must be "max" or "min", got "up"`,
		"metric: must be set\ngrace_period: must be >= 0, got -1",
		"hyperparam_mutations.lr: must be a list, a distribution or a mapping\nquantile_fraction: must be in [0, 0.5], got 0.6",
	}
	for i, err := range bad {
		if err == nil || err.Error() != wants[i] {
			t.Errorf("got %v, want %q", err, wants[i])
		}
	}
	for _, ok := range []error{DefaultHyperBandConfig().Validate(), DefaultMedianConfig().Validate()} {
		if ok == nil || !strings.Contains(ok.Error(), "metric: must be set") {
			t.Errorf("defaults without a metric: %v", ok)
		}
	}
}

func TestFloatJSON(t *testing.T) {
	tenth := 0.1
	in := []Float{1.5, Float(math.NaN()), Float(math.Inf(1)), Float(math.Inf(-1)), Float(tenth + 0.2)}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `[1.5,"NaN","+Inf","-Inf",0.30000000000000004]` {
		t.Errorf("marshal = %s", b)
	}
	var out []Float
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if math.Float64bits(float64(in[i])) != math.Float64bits(float64(out[i])) && !(math.IsNaN(float64(in[i])) && math.IsNaN(float64(out[i]))) {
			t.Errorf("%d: %v came back %v", i, in[i], out[i])
		}
	}
	if err := json.Unmarshal([]byte(`["1.5"]`), &out); err == nil {
		t.Error(`"1.5" accepted as a non-finite float`)
	}
}

// TestRestoreMismatch: a state restores only into a scheduler built from
// the config it was made with.
func TestRestoreMismatch(t *testing.T) {
	one := newASHA(t, nil)
	two := newASHA(t, func(c *ASHAConfig) { c.Brackets = 2 })
	other := newASHA(t, func(c *ASHAConfig) { c.GracePeriod = 2 }) // rungs 32 8 2
	state, err := json.Marshal(one)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*ASHA{"brackets": two, "rungs": other} {
		if err := json.Unmarshal(state, s); err == nil {
			t.Errorf("%s: a state of another config restored", name)
		}
	}
	if err := json.Unmarshal([]byte(`{"results":{"t1":[]}}`), newMedian(t, nil)); err == nil {
		t.Error("median: a trial without results restored")
	}
	if err := json.Unmarshal([]byte(`{"trials":[{"trial":"a"},{"trial":"a"}]}`), newPBT(t, nil)); err == nil {
		t.Error("pbt: a trial twice restored")
	}
}

// rayASHA transcribes Ray's AsyncHyperBandScheduler with one bracket
// (async_hyperband.py at 490d7ebc) as literally as Go allows: rungs a
// descending list of (milestone, recorded dict), the rung count Ray's
// float formula (safe for the configs below), the cutoff nanpercentile of
// the dict's values taken afresh, on_trial_complete the same on_result.
type rayASHA struct {
	maxT, rf       float64
	stopLastTrials bool
	milestones     []float64
	recorded       []map[string]float64
}

func newRayASHA(grace, maxT, rf float64, stopLastTrials bool) *rayASHA {
	r := &rayASHA{maxT: maxT, rf: rf, stopLastTrials: stopLastTrials}
	n := int(math.Log(maxT/grace)/math.Log(rf) + 1)
	for k := n - 1; k >= 0; k-- {
		r.milestones = append(r.milestones, grace*math.Pow(rf, float64(k)))
		r.recorded = append(r.recorded, map[string]float64{})
	}
	return r
}

func (r *rayASHA) onTrialResult(trial string, t, rew float64) Action {
	if t >= r.maxT && r.stopLastTrials {
		return Stop
	}
	return r.onResult(trial, t, rew)
}

func (r *rayASHA) onResult(trial string, curIter, curRew float64) Action {
	action := Continue
	for i, milestone := range r.milestones {
		recorded := r.recorded[i]
		_, in := recorded[trial]
		if curIter >= milestone && in && !r.stopLastTrials {
			break
		}
		if curIter < milestone || in {
			continue
		}
		if len(recorded) > 0 {
			values := make([]float64, 0, len(recorded))
			for _, v := range recorded {
				values = append(values, v)
			}
			if cutoff, _ := nanPercentile(values, (1-1/r.rf)*100); curRew < cutoff {
				action = Stop
			}
		}
		recorded[trial] = curRew
		break
	}
	return action
}

// TestASHAMatchesRay drives ASHA and the transcription of Ray's rule with
// the same results, the ASHA benchmark's learning curves (minimised, with
// trials in flight reporting in a random order, some skipping epochs and
// so rungs), and requires the same
// decision on every result and the same rung records at the end.
func TestASHAMatchesRay(t *testing.T) {
	tests := []struct {
		name            string
		maxT, rf        float64
		stopLastTrials  bool
		inFlight, steps int
		jump            int // a result advances time by 1 to jump
	}{
		{"benchmark, sequential", 81, 3, true, 1, 4050, 1},
		{"benchmark, 4 in flight", 81, 3, true, 4, 4050, 1},
		{"benchmark, 4 in flight, skipping rungs", 81, 3, true, 4, 4050, 5},
		{"ray defaults without stop_last_trials, 3 in flight", 64, 4, false, 3, 3000, 1},
		{"ray defaults without stop_last_trials, skipping rungs", 64, 4, false, 3, 3000, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newASHA(t, func(c *ASHAConfig) {
				c.Mode, c.MaxT, c.ReductionFactor, c.StopLastTrials = Min, tt.maxT, tt.rf, tt.stopLastTrials
			})
			ray := newRayASHA(1, tt.maxT, tt.rf, tt.stopLastTrials)
			type live struct {
				id     string
				x1, x2 float64
				epoch  float64
			}
			r := rand.New(rand.NewPCG(7, 1))
			var running []*live
			started := 0
			for step := range tt.steps {
				for len(running) < tt.inFlight {
					started++
					x1, x2 := sampleX(r)
					running = append(running, &live{id: fmt.Sprint("t", started), x1: x1, x2: x2})
					a.Add(running[len(running)-1].id, nil)
				}
				i := r.IntN(len(running))
				tr := running[i]
				tr.epoch += float64(1 + r.IntN(tt.jump))
				loss := curve(tr.x1, tr.x2, tr.epoch)
				res := result(tr.id, tr.epoch, loss)
				got, want := a.Result(res, Context{})[0], ray.onTrialResult(tr.id, tr.epoch, -loss)
				if got.Action != want {
					t.Fatalf("step %d, %s at %v: %s, Ray's rule %s (%s)", step, tr.id, tr.epoch, got.Action, want, got.Reason)
				}
				// A stopped trial completes; without stop_last_trials a
				// trial ends by itself at 100.
				if got.Action == Stop || tr.epoch >= 100 {
					a.Complete(res)
					ray.onResult(tr.id, tr.epoch, -loss)
					running = slices.Delete(running, i, i+1)
				}
			}
			for i, rung := range a.st.Brackets[0].Rungs {
				got := map[string]float64{}
				for id, v := range rung.Recorded {
					got[id] = float64(v)
				}
				if !cmp.Equal(got, ray.recorded[i]) {
					t.Errorf("rung %v: records differ from Ray's: %s", rung.Milestone, cmp.Diff(ray.recorded[i], got))
				}
			}
			t.Logf("%d trials started", started)
		})
	}
}
