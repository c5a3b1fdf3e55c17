package moo

import (
	"cmp"
	"math"
	"slices"
)

// HSSP picks k of the points whose hypervolume bounded by ref is as large
// as a greedy choice makes it: Optuna's _solve_hssp (optuna/_hypervolume/
// hssp.py, commit 1d8ce7bb), the 1 − 1/e approximation of "Greedy
// Hypervolume Subset Selection in Low Dimensions" (Guerreiro et al. 2016).
// It returns the indices of the points picked, ascending. The distinct
// points are considered in lexicographic order and each step takes the
// first of those that add the most; when fewer than k points are
// distinct, it takes every distinct point (its first occurrence) and the
// first repeats. With an infinite ref, it takes the first k distinct
// points. k is clipped to [0, len(points)].
func HSSP(points [][]float64, k int, ref []float64) []int {
	n := len(points)
	k = min(max(k, 0), n)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	if k == n {
		return all
	}
	// The first occurrence of every distinct point, lexicographically.
	uniq := slices.Clone(all)
	slices.SortStableFunc(uniq, func(a, b int) int { return slices.Compare(points[a], points[b]) })
	uniq = slices.CompactFunc(uniq, func(a, b int) bool { return slices.Equal(points[a], points[b]) })
	var picked []int
	switch {
	case len(uniq) < k:
		chosen := make([]bool, n)
		for _, i := range uniq {
			chosen[i] = true
		}
		extra := k - len(uniq)
		for i := range all {
			if !chosen[i] && extra > 0 {
				chosen[i], extra = true, extra-1
			}
		}
		for i, c := range chosen {
			if c {
				picked = append(picked, i)
			}
		}
		return picked
	case slices.ContainsFunc(ref, func(r float64) bool { return math.IsInf(r, 0) || math.IsNaN(r) }):
		picked = slices.Clone(uniq[:k])
	default:
		picked = greedyHV(points, uniq, k, ref)
	}
	slices.Sort(picked)
	return picked
}

// greedyHV adds, k times, the candidate whose addition to the points
// picked so far grows their hypervolume the most, the first such in
// candidates' order. A candidate's gain only shrinks as points are picked
// (the hypervolume is submodular), so its last gain bounds its next one:
// candidates are tried by decreasing bound and the search stops at a
// bound below the best gain found, as Optuna's _lazy_contribs_update
// does.
func greedyHV(points [][]float64, candidates []int, k int, ref []float64) []int {
	type cand struct {
		i     int     // index in points
		pos   int     // position in candidates, for ties
		bound float64 // an upper bound of its gain
	}
	left := make([]cand, len(candidates))
	for j, i := range candidates {
		left[j] = cand{i, j, box(points[i], ref)}
	}
	var picked []int
	var set [][]float64
	hv := 0.0
	for range k {
		order := make([]int, len(left))
		for j := range order {
			order[j] = j
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(left[b].bound, left[a].bound) })
		best := -1
		for _, j := range order {
			c := &left[j]
			if best >= 0 && c.bound < left[best].bound {
				break // no gain can reach the best one
			}
			c.bound = Hypervolume(append(set, points[c.i]), ref) - hv
			if best < 0 || c.bound > left[best].bound || c.bound == left[best].bound && c.pos < left[best].pos {
				best = j
			}
		}
		i := left[best].i
		picked, set = append(picked, i), append(set, points[i])
		hv = Hypervolume(set, ref)
		left = slices.Delete(left, best, best+1)
	}
	return picked
}
