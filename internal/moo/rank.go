package moo

import (
	"math"
	"slices"
)

// Ranks returns the non-domination rank of every point, 0 for the Pareto
// front, 1 for the front of the rest, and so on: Optuna's
// _fast_non_domination_rank without constraints (optuna/study/
// _multi_objective.py, commit 1d8ce7bb). Equal points share a rank. It is
// Deb's fast non-dominated sort, O(m·n²) for n points of m objectives.
func Ranks(points [][]float64) []int {
	n := len(points)
	ranks := make([]int, n)
	dominated := make([][]int, n) // the points each one dominates
	count := make([]int, n)       // how many points dominate each one
	for i := range points {
		for j := i + 1; j < n; j++ {
			switch {
			case Dominates(points[i], points[j]):
				dominated[i] = append(dominated[i], j)
				count[j]++
			case Dominates(points[j], points[i]):
				dominated[j] = append(dominated[j], i)
				count[i]++
			}
		}
	}
	var front []int
	for i, c := range count {
		if c == 0 {
			front = append(front, i)
		}
	}
	for rank := 0; len(front) > 0; rank++ {
		var next []int
		for _, i := range front {
			ranks[i] = rank
			for _, j := range dominated[i] {
				if count[j]--; count[j] == 0 {
					next = append(next, j)
				}
			}
		}
		front = next
	}
	return ranks
}

// CrowdingDistance returns every point's crowding distance as NSGA-II's
// elite selection computes it (Optuna's _calc_crowding_distance,
// optuna/samplers/nsgaii/_elite_population_selection_strategy.py, commit
// 1d8ce7bb): for each objective whose values are not all equal, the points
// sorted by it (a stable sort, starting from the previous objective's
// order), the gap between each point's neighbours, −∞ below the first and
// +∞ above the last, over the spread of the finite values; the gaps are
// summed over the objectives. The extremes of every objective are thus at
// +∞.
func CrowdingDistance(points [][]float64) []float64 {
	d, _ := crowding(points)
	return d
}

// CrowdingOrder returns the indices of points by decreasing crowding
// distance, the order in which NSGA-II's elite selection takes the points
// of the rank it cannot take whole: Optuna's _crowding_distance_sort, a
// stable sort by increasing distance of the order the last objective left,
// reversed, so that ties come in reverse.
func CrowdingOrder(points [][]float64) []int {
	d, order := crowding(points)
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case d[a] < d[b]:
			return -1
		case d[a] > d[b]:
			return 1
		}
		return 0
	})
	slices.Reverse(order)
	return order
}

// crowding returns the crowding distances and the order in which the
// last objective's stable sort left the points.
func crowding(points [][]float64) (dist []float64, order []int) {
	n := len(points)
	dist = make([]float64, n)
	order = make([]int, n)
	for i := range order {
		order[i] = i
	}
	if n == 0 {
		return dist, order
	}
	inf := math.Inf(1)
	vs := make([]float64, n+2)
	for k := range points[0] {
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case points[a][k] < points[b][k]:
				return -1
			case points[a][k] > points[b][k]:
				return 1
			}
			return 0
		})
		if points[order[0]][k] == points[order[n-1]][k] {
			continue // every point has the same value: no difference to make
		}
		vs[0], vs[n+1] = -inf, inf
		for j, i := range order {
			vs[j+1] = points[i][k]
		}
		vMin, vMax := inf, -inf // the smallest and largest finite values
		for _, v := range vs {
			if !math.IsInf(v, 0) {
				vMin, vMax = min(vMin, v), max(vMax, v)
			}
		}
		width := vMax - vMin
		if !(width > 0) {
			width = 1
		}
		for j, i := range order {
			gap := 0.0 // inf − inf counts as 0
			if vs[j] != vs[j+2] {
				gap = vs[j+2] - vs[j]
			}
			dist[i] += gap / width
		}
	}
	return dist, order
}
