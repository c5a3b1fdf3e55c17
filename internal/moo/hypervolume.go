package moo

import (
	"math"
	"slices"
)

// Hypervolume returns the volume of the region the points dominate,
// bounded by ref: the union of the boxes [p, ref]. It is exact, as
// Optuna's compute_hypervolume (optuna/_hypervolume/wfg.py, commit
// 1d8ce7bb): a sweep in two dimensions, the WFG algorithm in more. A point
// that is not below ref in every objective bounds an empty box and adds
// nothing (Optuna refuses such points instead). An infinite ref gives +∞,
// as Optuna's does, when any point counts.
func Hypervolume(points [][]float64, ref []float64) float64 {
	sols := paretoSorted(points, ref)
	switch {
	case len(sols) == 0:
		return 0
	case slices.ContainsFunc(ref, func(r float64) bool { return math.IsInf(r, 1) }):
		return math.Inf(1)
	}
	var hv float64
	if len(ref) == 2 {
		hv = hv2D(sols, ref)
	} else {
		hv = wfg(sols, ref)
	}
	if math.IsNaN(hv) || math.IsInf(hv, 0) { // inf − inf: the volume is infinite
		return math.Inf(1)
	}
	return hv
}

// paretoSorted returns the distinct non-dominated points that are below
// ref in every objective, sorted lexicographically (by the first
// objective, then the next): np.unique and _is_pareto_front of Optuna's
// compute_hypervolume.
func paretoSorted(points [][]float64, ref []float64) [][]float64 {
	var in [][]float64
	for _, p := range points {
		if !slices.ContainsFunc(p, math.IsNaN) && !exceeds(p, ref) {
			in = append(in, p)
		}
	}
	slices.SortFunc(in, slices.Compare[[]float64])
	in = slices.CompactFunc(in, slices.Equal[[]float64])
	return frontOfSorted(in)
}

// exceeds reports whether p is above ref in some objective.
func exceeds(p, ref []float64) bool {
	for i, r := range ref {
		if p[i] > r {
			return true
		}
	}
	return false
}

// frontOfSorted keeps the points of sols that no other point of sols
// weakly dominates, sols sorted by the first objective: a later point can
// never dominate an earlier one, so each point is checked against the
// front found so far (Optuna's _is_pareto_front_nd).
func frontOfSorted(sols [][]float64) [][]float64 {
	var front [][]float64
	for _, p := range sols {
		if !slices.ContainsFunc(front, func(q []float64) bool { return weaklyDominates(q, p) }) {
			front = append(front, p)
		}
	}
	return front
}

// weaklyDominates reports whether a is no worse than b in every objective.
func weaklyDominates(a, b []float64) bool {
	for i := range a {
		if a[i] > b[i] {
			return false
		}
	}
	return true
}

// hv2D is Optuna's _compute_2d: with the points sorted by the first
// objective (so decreasing in the second), each adds the rectangle from
// its first objective to ref's and from its second to the previous
// point's.
func hv2D(sols [][]float64, ref []float64) float64 {
	hv, top := 0.0, ref[1]
	for _, p := range sols {
		hv += (ref[0] - p[0]) * (top - p[1])
		top = p[1]
	}
	return hv
}

// wfg is Optuna's _compute_hv, the WFG algorithm ("A Fast Way of
// Calculating Exact Hypervolumes", While et al. 2012), over points sorted
// by the first objective: the last point's box plus, for every other
// point, its exclusive volume: its box less the hypervolume of the later
// points limited to it.
func wfg(sols [][]float64, ref []float64) float64 {
	switch len(sols) {
	case 1:
		return box(sols[0], ref)
	case 2: // inclusion–exclusion
		meet := make([]float64, len(ref))
		for k := range ref {
			meet[k] = max(sols[0][k], sols[1][k])
		}
		return box(sols[0], ref) + box(sols[1], ref) - box(meet, ref)
	}
	hv := box(sols[len(sols)-1], ref)
	for i := range len(sols) - 1 {
		limited := make([][]float64, 0, len(sols)-i-1)
		for _, q := range sols[i+1:] {
			l := make([]float64, len(ref))
			for k := range ref {
				l[k] = max(sols[i][k], q[k])
			}
			limited = append(limited, l)
		}
		if len(limited) > 3 {
			// Still sorted by the first objective: drop the limited points
			// another weakly dominates, which leaves the volume as it is.
			limited = frontOfSorted(limited)
		}
		hv += box(sols[i], ref) - wfg(limited, ref)
	}
	return hv
}

// box is the volume of [p, ref].
func box(p, ref []float64) float64 {
	v := 1.0
	for k, r := range ref {
		v *= r - p[k]
	}
	return v
}

// Contributions returns each point's exclusive hypervolume contribution:
// the hypervolume of all the points less that of all but it. A dominated
// point, or one equal to another, contributes 0.
func Contributions(points [][]float64, ref []float64) []float64 {
	out := make([]float64, len(points))
	total := Hypervolume(points, ref)
	rest := make([][]float64, 0, len(points))
	for i := range points {
		rest = append(append(rest[:0], points[:i]...), points[i+1:]...)
		out[i] = max(total-Hypervolume(rest, ref), 0)
	}
	return out
}
