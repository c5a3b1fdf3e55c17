package importance

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// fractions fits one tree on every sample once (no bootstrap) and returns
// the parameters' fANOVA fractions in it, so that the partition, and with
// it the fractions, can be worked out by hand.
func fractions(t *testing.T, params []Param, y []float64) []float64 {
	t.Helper()
	enc, err := encode(params)
	if err != nil {
		t.Fatal(err)
	}
	w := make([]float64, len(y))
	for i := range w {
		w[i] = 1
	}
	tr := growTree(newData(enc.cols, y), w, rand.New(rand.NewPCG(1, 2)))
	return decompose(tr, enc)
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }

// TestAdditiveGrid: on the 2×2 grid of a, b in {0, 1} with y = 2a + b, the
// tree splits on a, then on b, into the four cells of values 0..3, each a
// quarter of the space. The tree's variance is that of {0, 1, 2, 3}, 1.25;
// a's marginal is 0.5 below 0.5 and 2.5 above, variance 1; b's is 1 and 2,
// variance 0.25. So a explains 0.8 and b 0.2.
func TestAdditiveGrid(t *testing.T) {
	params := []Param{
		{Name: "a", Values: []float64{0, 0, 1, 1}, Low: 0, High: 1},
		{Name: "b", Values: []float64{0, 1, 0, 1}, Low: 0, High: 1},
	}
	y := []float64{0, 1, 2, 3}
	got := fractions(t, params, y)
	if len(got) != 2 || !near(got[0], 0.8) || !near(got[1], 0.2) {
		t.Fatalf("fractions %v; want [0.8 0.2]", got)
	}
}

// TestInteraction: with y = a·b on the same grid, the tree cuts a at 0.5
// (a ≤ 0.5 is a leaf of 0, half the space) and the other half at b = 0.5
// into 0 and 1. Its prediction is 1 on a quarter of the space: variance
// 0.25·0.75 = 0.1875. a's marginal is 0 and 0.5, variance 0.0625, and so
// is b's; each explains a third, the interaction the last third.
func TestInteraction(t *testing.T) {
	params := []Param{
		{Name: "a", Values: []float64{0, 0, 1, 1}, Low: 0, High: 1},
		{Name: "b", Values: []float64{0, 1, 0, 1}, Low: 0, High: 1},
	}
	got := fractions(t, params, []float64{0, 0, 0, 1})
	if len(got) != 2 || !near(got[0], 1.0/3) || !near(got[1], 1.0/3) {
		t.Fatalf("fractions %v; want [1/3 1/3]", got)
	}
}

// TestBoundsWeighCells: the cells are weighed by their size within the
// bounds, not by the trials in them. a in [0, 4] observed at 0 and 1 is
// cut at 0.5: the tree predicts 0 on [0, 0.5] and 1 on (0.5, 4], 7/8 of
// the range, and a alone explains its variance.
func TestBoundsWeighCells(t *testing.T) {
	got := fractions(t, []Param{{Name: "a", Values: []float64{0, 1}, Low: 0, High: 4}}, []float64{0, 1})
	if len(got) != 1 || !near(got[0], 1) {
		t.Fatalf("one parameter: fractions %v; want [1]", got)
	}
	// With y = a + 2b on the grid the marginals are additive: a's is 0 on
	// 1/8 of its range and 1 on 7/8, variance 7/64; b's is 0 and 2 on halves,
	// variance 1. The tree's variance is their sum, 71/64.
	params := []Param{
		{Name: "a", Values: []float64{0, 0, 1, 1}, Low: 0, High: 4},
		{Name: "b", Values: []float64{0, 1, 0, 1}, Low: 0, High: 1},
	}
	got = fractions(t, params, []float64{0, 2, 1, 3})
	if len(got) != 2 || !near(got[0], 7.0/71) || !near(got[1], 64.0/71) {
		t.Fatalf("two parameters: fractions %v; want [7/71 64/71]", got)
	}
}

// TestOneHotChoice: a choice of three where only the third scores is one
// 0/1 column per choice; the tree cuts the third's column at 0.5 into two
// leaves of half the space, 0 and 3. The marginal over the three columns'
// cells is that split itself, so the choice explains everything, and the
// numeric parameter, never cut, nothing.
func TestOneHotChoice(t *testing.T) {
	params := []Param{
		{Name: "opt", Values: []float64{0, 1, 2, 2}, Categorical: true, High: 2},
		{Name: "x", Values: []float64{0.1, 0.9, 0.2, 0.8}, Low: 0, High: 1},
	}
	got := fractions(t, params, []float64{0, 0, 3, 3})
	if len(got) != 2 || !near(got[0], 1) || got[1] != 0 {
		t.Fatalf("fractions %v; want [1 0]", got)
	}
}

// planted is an objective of five parameters in [0, 1] that depends
// strongly on x1, weakly on x2 and not on x3..x5, at n random points.
func planted(n int, seed uint64) ([]Param, []float64) {
	rng := rand.New(rand.NewPCG(seed, 0))
	params := make([]Param, 5)
	for j := range params {
		params[j] = Param{Name: "x" + string(rune('1'+j)), Values: make([]float64, n), Low: 0, High: 1}
	}
	y := make([]float64, n)
	for i := range n {
		for j := range params {
			params[j].Values[i] = rng.Float64()
		}
		x1, x2 := params[0].Values[i], params[1].Values[i]
		y[i] = 10*(x1-0.5)*(x1-0.5) + 0.5*x2
	}
	return params, y
}

func TestPlantedParameterRanksFirst(t *testing.T) {
	// 200 trials, and 5,000, where each tree draws only MaxSamples.
	for _, n := range []int{200, 5000} {
		params, y := planted(n, 7)
		got, err := Fanova(params, y, 42)
		if err != nil {
			t.Fatal(err)
		}
		checkPlanted(t, n, got)
	}
}

func checkPlanted(t *testing.T, n int, got []Importance) {
	t.Helper()
	if got[0].Param != "x1" || got[1].Param != "x2" {
		t.Fatalf("%d trials: importances %v; want x1 first, then x2", n, got)
	}
	if got[0].Importance < 0.8 {
		t.Errorf("%d trials: x1's importance %v; want most of the variance", n, got[0].Importance)
	}
	sum := 0.0
	for _, imp := range got {
		sum += imp.Importance
		if imp.Param >= "x3" && imp.Importance > 0.02 {
			t.Errorf("%d trials: %s, which the objective ignores, has importance %v", n, imp.Param, imp.Importance)
		}
	}
	if !near(sum, 1) {
		t.Errorf("%d trials: importances sum to %v; want 1", n, sum)
	}
}

func TestSameSeedSameResult(t *testing.T) {
	params, y := planted(100, 3)
	a, err := Fanova(params, y, 5)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Fanova(params, y, 5)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, b) {
		t.Fatalf("seed 5 gave %v, then %v", a, b)
	}
	c, err := Fanova(params, y, 6)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 5 and 6 gave the same forest's importances %v", a)
	}
}

func TestSingleValuedAndConstant(t *testing.T) {
	params := []Param{
		{Name: "a", Values: []float64{0, 1, 0, 1}, Low: 0, High: 1},
		{Name: "fixed", Values: []float64{3, 3, 3, 3}, Low: 3, High: 3},
		{Name: "seen-once", Values: []float64{0.5, 0.5, 0.5, 0.5}, Low: 0, High: 1},
	}
	got, err := Fanova(params, []float64{1, 2, 1, 2}, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []Importance{{"a", 1}, {"fixed", 0}, {"seen-once", 0}}
	if !slices.Equal(got, want) {
		t.Errorf("importances %v; want %v", got, want)
	}
	got, err = Fanova(params, []float64{4, 4, 4, 4}, 1)
	if err != nil {
		t.Fatal(err)
	}
	want = []Importance{{"a", 0}, {"fixed", 0}, {"seen-once", 0}}
	if !slices.Equal(got, want) {
		t.Errorf("constant target: importances %v; want %v", got, want)
	}
}

// TestPureInteractionSharesEqually: y = a XOR b has no main effect; as
// get_param_importances does when the importances sum to 0, the
// parameters share 1 equally.
func TestPureInteractionSharesEqually(t *testing.T) {
	var a, b, y []float64
	for range 8 {
		a, b, y = append(a, 0, 0, 1, 1), append(b, 0, 1, 0, 1), append(y, 0, 1, 1, 0)
	}
	params := []Param{{Name: "a", Values: a, High: 1}, {Name: "b", Values: b, High: 1}}
	got, err := Fanova(params, y, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []Importance{{"a", 0.5}, {"b", 0.5}}
	if !slices.Equal(got, want) {
		t.Errorf("importances %v; want %v", got, want)
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		params []Param
		y      []float64
	}{
		{"one trial", []Param{{Name: "a", Values: []float64{1}, High: 1}}, []float64{1}},
		{"no trial", nil, nil},
		{"short column", []Param{{Name: "a", Values: []float64{1}, High: 1}}, []float64{1, 2}},
		{"NaN target", []Param{{Name: "a", Values: []float64{0, 1}, High: 1}}, []float64{1, math.NaN()}},
		{"NaN value", []Param{{Name: "a", Values: []float64{0, math.NaN()}, High: 1}}, []float64{1, 2}},
		{"not a choice", []Param{{Name: "a", Values: []float64{0, 1.5}, Categorical: true, High: 2}}, []float64{1, 2}},
	} {
		if got, err := Fanova(c.params, c.y, 1); err == nil {
			t.Errorf("%s: got %v, no error", c.name, got)
		}
	}
}

// BenchmarkImportance10k is the dashboard's largest case: 10,000 trials of
// five parameters, one of them a choice of four.
func BenchmarkImportance10k(b *testing.B) {
	params, y := planted(10000, 1)
	rng := rand.New(rand.NewPCG(2, 0))
	choice := Param{Name: "opt", Values: make([]float64, len(y)), Categorical: true, High: 3}
	for i := range y {
		choice.Values[i] = float64(rng.IntN(4))
		y[i] += 0.3 * choice.Values[i]
	}
	params[4] = choice
	for b.Loop() {
		if _, err := Fanova(params, y, 1); err != nil {
			b.Fatal(err)
		}
	}
}
