package moo

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestRanksPeelTheFronts(t *testing.T) {
	points := [][]float64{
		{1, 5}, // 0: front
		{2, 2}, // 0: front
		{3, 3}, // 1: dominated by {2, 2} only
		{5, 1}, // 0: front
		{2, 2}, // 0: equal to a front point
		{4, 4}, // 2: dominated by {3, 3}
		{6, 6}, // 3
	}
	if got, want := Ranks(points), []int{0, 0, 1, 0, 0, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("Ranks = %v, want %v", got, want)
	}
	// One objective: ranks of the distinct values, as np.unique gives them.
	if got, want := Ranks([][]float64{{3}, {1}, {3}, {2}}), []int{2, 0, 2, 1}; !slices.Equal(got, want) {
		t.Errorf("Ranks of one objective = %v, want %v", got, want)
	}
	if got := Ranks(nil); len(got) != 0 {
		t.Errorf("Ranks(nil) = %v", got)
	}
}

func TestRanksAgreeWithFront(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	points := make([][]float64, 40)
	for i := range points {
		points[i] = []float64{float64(rng.IntN(6)), float64(rng.IntN(6)), float64(rng.IntN(6))}
	}
	ranks := Ranks(points)
	rest := slices.Clone(points)
	idx := make([]int, len(points))
	for i := range idx {
		idx[i] = i
	}
	for r := 0; len(idx) > 0; r++ {
		front := Front(rest)
		for _, f := range front {
			if ranks[idx[f]] != r {
				t.Fatalf("point %v has rank %d, is on front %d", points[idx[f]], ranks[idx[f]], r)
			}
		}
		for j := len(front) - 1; j >= 0; j-- {
			rest = slices.Delete(rest, front[j], front[j]+1)
			idx = slices.Delete(idx, front[j], front[j]+1)
		}
	}
}

func TestCrowdingDistance(t *testing.T) {
	points := [][]float64{{0, 10}, {1, 6}, {5, 2}, {10, 0}}
	inf := math.Inf(1)
	// First objective, spread 10: {1, 6} has neighbours 0 and 5, {5, 2}
	// 1 and 10. Second, spread 10: {5, 2} has 0 and 6, {1, 6} 2 and 10.
	want := []float64{inf, 0.5 + 0.8, 0.9 + 0.6, inf}
	got := CrowdingDistance(points)
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 && got[i] != want[i] {
			t.Errorf("distance of %v = %v, want %v", points[i], got[i], want[i])
		}
	}
	// Sorted by the second objective last: 3, 2, 1, 0; ascending by
	// distance, stably: 1, 2, 3, 0; reversed.
	if got, want := CrowdingOrder(points), []int{0, 3, 2, 1}; !slices.Equal(got, want) {
		t.Errorf("CrowdingOrder = %v, want %v", got, want)
	}
	// An objective with one value adds nothing.
	flat := CrowdingDistance([][]float64{{1, 7}, {2, 7}, {3, 7}})
	if flat[1] != 1 || !math.IsInf(flat[0], 1) || !math.IsInf(flat[2], 1) {
		t.Errorf("distances with a constant objective = %v, want [+Inf 1 +Inf]", flat)
	}
}

func TestHypervolume2D(t *testing.T) {
	ref := []float64{4, 4}
	// Rectangles from the left: 3·1 + 2·1 + 1·1.
	front := [][]float64{{1, 3}, {2, 2}, {3, 1}}
	if got := Hypervolume(front, ref); got != 6 {
		t.Errorf("Hypervolume = %v, want 6", got)
	}
	// A dominated point, a repeat, a point beyond ref change nothing.
	more := append(slices.Clone(front), []float64{3, 3}, []float64{2, 2}, []float64{5, 0})
	if got := Hypervolume(more, ref); got != 6 {
		t.Errorf("Hypervolume with dominated points = %v, want 6", got)
	}
	if got := Hypervolume(nil, ref); got != 0 {
		t.Errorf("Hypervolume(nil) = %v, want 0", got)
	}
	if got := Hypervolume(front, []float64{math.Inf(1), 4}); !math.IsInf(got, 1) {
		t.Errorf("Hypervolume with an infinite ref = %v, want +Inf", got)
	}
}

// bruteForce counts the unit cells of [0, ref)^m that some point of
// integer coordinates dominates.
func bruteForce(points [][]float64, ref int, m int) float64 {
	n := 0
	cell := make([]float64, m)
	var walk func(k int)
	walk = func(k int) {
		if k == m {
			for _, p := range points {
				if weaklyDominates(p, cell) {
					n++
					return
				}
			}
			return
		}
		for c := range ref {
			cell[k] = float64(c)
			walk(k + 1)
		}
	}
	walk(0)
	return float64(n)
}

// inclusionExclusion is the volume of the union of the boxes [p, ref] by
// the inclusion–exclusion principle over every subset.
func inclusionExclusion(points [][]float64, ref []float64) float64 {
	total := 0.0
	for mask := 1; mask < 1<<len(points); mask++ {
		meet := make([]float64, len(ref))
		bits := 0
		for i, p := range points {
			if mask&(1<<i) == 0 {
				continue
			}
			bits++
			for k := range ref {
				meet[k] = max(meet[k], p[k])
			}
		}
		sign := -1.0
		if bits%2 == 1 {
			sign = 1
		}
		total += sign * box(meet, ref)
	}
	return total
}

func TestHypervolumeAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 20 {
		m := 3 + trial%2 // 3 and 4 objectives
		n := 2 + rng.IntN(9)
		points := make([][]float64, n)
		for i := range points {
			points[i] = make([]float64, m)
			for k := range points[i] {
				points[i][k] = float64(rng.IntN(8))
			}
		}
		ref := make([]float64, m)
		for k := range ref {
			ref[k] = 8
		}
		got := Hypervolume(points, ref)
		if want := bruteForce(points, 8, m); math.Abs(got-want) > 1e-9 {
			t.Errorf("Hypervolume(%v) = %v, grid count %v", points, got, want)
		}
		if want := inclusionExclusion(points, ref); math.Abs(got-want) > 1e-9 {
			t.Errorf("Hypervolume(%v) = %v, inclusion–exclusion %v", points, got, want)
		}
	}
}

func TestContributions(t *testing.T) {
	points := [][]float64{{1, 3}, {2, 2}, {3, 1}, {3, 3}, {2, 2}}
	// Each front point owns one unit square; {3, 3} is dominated; the two
	// {2, 2} cover for each other.
	got := Contributions(points[:4], []float64{4, 4})
	if want := []float64{1, 1, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("Contributions = %v, want %v", got, want)
	}
	got = Contributions(points, []float64{4, 4})
	if want := []float64{1, 0, 1, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("Contributions with a repeat = %v, want %v", got, want)
	}
}

func TestHSSPIsGreedy(t *testing.T) {
	ref := []float64{4, 4}
	points := [][]float64{{3, 1}, {2, 2}, {1, 3}} // boxes 3, 4, 3
	if got, want := HSSP(points, 1, ref), []int{1}; !slices.Equal(got, want) {
		t.Errorf("HSSP k=1 = %v, want %v", got, want)
	}
	// After {2, 2}, both others add 1: the lexicographically first, {1, 3},
	// wins the tie.
	if got, want := HSSP(points, 2, ref), []int{1, 2}; !slices.Equal(got, want) {
		t.Errorf("HSSP k=2 = %v, want %v", got, want)
	}
	if got, want := HSSP(points, 3, ref), []int{0, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("HSSP k=3 = %v, want %v", got, want)
	}
	// Fewer distinct points than k: every distinct one, then the first
	// repeats.
	dup := [][]float64{{1, 1}, {1, 1}, {1, 1}, {2, 0}}
	if got, want := HSSP(dup, 3, ref), []int{0, 1, 3}; !slices.Equal(got, want) {
		t.Errorf("HSSP with repeats = %v, want %v", got, want)
	}
	// Three objectives: {1, 1, 2} has the largest box (3·3·2 = 18); then
	// {0, 0, 3} adds 16 − 9 = 7, {2, 2, 1} 12 − 8 = 4, {3, 3, 0} 4 − 2 = 2.
	pts3 := [][]float64{{0, 0, 3}, {3, 3, 0}, {1, 1, 2}, {2, 2, 1}}
	if got, want := HSSP(pts3, 2, []float64{4, 4, 4}), []int{0, 2}; !slices.Equal(got, want) {
		t.Errorf("HSSP in 3-D = %v, want %v", got, want)
	}
}

// naiveGreedy is HSSP's greedy choice without its bounds: every gain
// recomputed at every step.
func naiveGreedy(points [][]float64, k int, ref []float64) []int {
	var picked []int
	var set [][]float64
	taken := make([]bool, len(points))
	for range k {
		best, bestGain := -1, 0.0
		for i, p := range points {
			if taken[i] {
				continue
			}
			if gain := Hypervolume(append(slices.Clone(set), p), ref) - Hypervolume(set, ref); best < 0 || gain > bestGain {
				best, bestGain = i, gain
			}
		}
		taken[best] = true
		picked, set = append(picked, best), append(set, points[best])
	}
	slices.Sort(picked)
	return picked
}

func TestHSSPBoundsSkipNoBetterPoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 30 {
		m := 2 + trial%3
		points := make([][]float64, 12+rng.IntN(20))
		for i := range points {
			// Distinct points, sorted lexicographically, so that the
			// naive greedy's ties fall as HSSP's do.
			points[i] = make([]float64, m)
			for k := range points[i] {
				points[i][k] = rng.Float64()
			}
		}
		slices.SortFunc(points, slices.Compare[[]float64])
		ref := make([]float64, m)
		for k := range ref {
			ref[k] = 1.1
		}
		k := 1 + rng.IntN(len(points)-1)
		if got, want := HSSP(points, k, ref), naiveGreedy(points, k, ref); !slices.Equal(got, want) {
			t.Errorf("%d-D, k=%d: HSSP = %v, the plain greedy %v", m, k, got, want)
		}
	}
}
