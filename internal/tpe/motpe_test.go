package tpe

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// twoObjectives are two conflicting made-up losses over mixedSpace.
func twoObjectives(c map[string]any) []float64 {
	v := objective(c)
	return []float64{v, math.Abs(c["x"].(float64)+0.5) - v/3}
}

// runMulti suggests n trials one after the other with two objectives and
// returns the history.
func runMulti(t *testing.T, o Options, seed uint64, n int) []Trial {
	t.Helper()
	s, smp := mustSampler(t, mixedSpace, o)
	var h []Trial
	for i := range n {
		c := smp.Suggest(h, suggestRand(seed, i))
		checkValid(t, s, c)
		h = append(h, Trial{Number: i, State: Complete, Config: c, Values: twoObjectives(c)})
	}
	return h
}

func TestMultiObjectiveSuggestIsAFunctionOfTheHistory(t *testing.T) {
	for _, o := range []Options{Defaults(), Optuna45()} {
		_, smp := mustSampler(t, mixedSpace, o)
		h := runMulti(t, o, 5, 30)
		h[26].State, h[26].Values = Running, nil
		h[28].State, h[28].Step = Pruned, 3
		want := smp.Suggest(h, suggestRand(5, 30))
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		var decoded []Trial
		if err := json.Unmarshal(b, &decoded); err != nil {
			t.Fatal(err)
		}
		rand.New(rand.NewPCG(7, 7)).Shuffle(len(decoded), func(i, j int) { decoded[i], decoded[j] = decoded[j], decoded[i] })
		if got := smp.Suggest(decoded, suggestRand(5, 30)); !cmp.Equal(want, got) {
			t.Fatalf("the same history, decoded and shuffled (-want +got):\n%s", cmp.Diff(want, got))
		}
		if got := smp.Suggest(h, suggestRand(6, 30)); cmp.Equal(want, got) {
			t.Errorf("another generator gave the same config %v", want)
		}
	}
}

func TestMultiObjectiveSplitUsesTheValues(t *testing.T) {
	_, smp := mustSampler(t, mixedSpace, Defaults())
	// Value is unused with several objectives: it would rank trial 4 best.
	vals := [][]float64{{0, 0}, {1, 3}, {2, 2}, {3, 1}, {5, 5}, {4, 4}, {6, 6}, {7, 7}, {8, 8}, {9, 9}, {10, 10}, {11, 11}}
	var h []Trial
	for i, v := range vals {
		h = append(h, Trial{Number: i, State: Complete, Values: v, Value: float64(len(vals) - i)})
	}
	h = append(h, Trial{Number: len(vals), State: Running})
	// 12 finished trials: DefaultGamma gives 2 below, {0, 0} and the best
	// of rank 1 cut by HSSP against (3.3, 3.3): {2, 2}'s box is 1.69, the
	// others' 0.69.
	below, above := smp.partition(h, len(vals))
	if want := []int{0, 2}; !slices.Equal(below, want) {
		t.Errorf("below = %v, want %v", below, want)
	}
	if !slices.Contains(above, len(vals)) || len(below)+len(above) != len(h) {
		t.Errorf("above = %v: want every other trial, the running one too", above)
	}
}

func TestSplitCompleteTakesWholeRanksThenHSSP(t *testing.T) {
	points := [][]float64{{5, 5}, {1, 3}, {0, 0}, {3, 1}, {2, 2}, {6, 6}}
	for _, c := range []struct {
		n    int
		want []int
	}{
		{0, nil},
		{1, []int{2}},
		{2, []int{2, 4}},       // rank 1 cut to {2, 2}
		{4, []int{1, 2, 3, 4}}, // ranks 0 and 1 whole
		{5, []int{0, 1, 2, 3, 4}},
		{6, []int{0, 1, 2, 3, 4, 5}},
	} {
		if got := splitComplete(points, c.n); !slices.Equal(got, c.want) {
			t.Errorf("splitComplete(n=%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

func TestBelowWeightsAreHypervolumeContributions(t *testing.T) {
	h := []Trial{
		{Number: 0, State: Complete, Values: []float64{1, 3}},
		{Number: 1, State: Complete, Values: []float64{2, 2}},
		{Number: 2, State: Complete, Values: []float64{3, 1}},
		{Number: 3, State: Complete, Values: []float64{3, 3}},
		{Number: 4, State: Pruned, Step: 2},
	}
	// Against (3.3, 3.3): {1, 3} owns [1, 2]×[3, 3.3], {2, 2} [2, 3]×[2, 3],
	// {3, 1} [3, 3.3]×[1, 2]; {3, 3} is dominated, the pruned trial has no
	// values.
	got := belowWeights(h, []int{0, 1, 2, 3, 4})
	want := []float64{0.3, 1, 0.3, eps, eps}
	if len(got) != len(want) {
		t.Fatalf("belowWeights = %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Errorf("belowWeights = %v, want %v", got, want)
			break
		}
	}
	if w := belowWeights(h, []int{1}); !slices.Equal(w, []float64{1}) {
		t.Errorf("one trial below: weights %v, want [1]", w)
	}
	single := []Trial{{Number: 0, State: Complete, Value: 1}, {Number: 1, State: Complete, Value: 2}}
	if w := belowWeights(single, []int{0}); w != nil {
		t.Errorf("one objective: weights %v, want nil (Options.Weights)", w)
	}
}

func TestMultiObjectiveGamma(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 1, 10: 1, 11: 2, 250: 25, 251: 26, 1000: 100} {
		if got := MultiObjectiveGamma(n); got != want {
			t.Errorf("MultiObjectiveGamma(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestMultiObjectiveDefaults(t *testing.T) {
	o := MultiObjectiveDefaults()
	if o.NEICandidates != 256 || o.Gamma(300) != 30 || !o.Multivariate || !o.ConstantLiar || o.Estimator != Optuna5 {
		t.Errorf("MultiObjectiveDefaults = %+v: want Defaults with 256 candidates and MultiObjectiveGamma", o)
	}
}

func TestMultiObjectiveSplitFillsUpWithTheLatestPruned(t *testing.T) {
	_, smp := mustSampler(t, mixedSpace, Defaults())
	h := []Trial{{Number: 0, State: Complete, Values: []float64{1, 1}}}
	for i := 1; i <= 10; i++ {
		h = append(h, Trial{Number: i, State: Pruned, Step: i % 4})
	}
	h = append(h, Trial{Number: 11, State: Complete, Values: []float64{2, math.NaN()}})
	// 12 finished: 2 below, the one usable Complete trial and the first
	// Pruned one of the latest step (3: trials 3, 7); the NaN goes above.
	below, _ := smp.partition(h, len(h))
	if want := []int{0, 3}; !slices.Equal(below, want) {
		t.Errorf("below = %v, want %v", below, want)
	}
}

func TestMultiObjectiveToleratesInfiniteAndNaNValues(t *testing.T) {
	s, smp := mustSampler(t, mixedSpace, Defaults())
	h := runMulti(t, Defaults(), 2, 20)
	h[3].Values = []float64{math.Inf(1), 0}
	h[5].Values = []float64{math.Inf(-1), math.Inf(-1)}
	h[7].Values = []float64{math.NaN(), 1}
	checkValid(t, s, smp.Suggest(h, suggestRand(2, 20)))
}
