package moo

import (
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
// candidates' order.
func greedyHV(points [][]float64, candidates []int, k int, ref []float64) []int {
	var picked []int
	var set [][]float64
	left := slices.Clone(candidates)
	hv := 0.0
	for range k {
		best, bestGain := 0, math.Inf(-1)
		for j, i := range left {
			gain := Hypervolume(append(set, points[i]), ref) - hv
			if gain > bestGain {
				best, bestGain = j, gain
			}
		}
		i := left[best]
		picked, set = append(picked, i), append(set, points[i])
		hv = Hypervolume(set, ref)
		left = slices.Delete(left, best, best+1)
	}
	return picked
}
