package moo

// Dominates reports whether a Pareto-dominates b: no worse in every
// objective and better in at least one, every objective minimized. a and b
// have the same length.
func Dominates(a, b []float64) bool {
	better := false
	for i := range a {
		switch {
		case a[i] > b[i]:
			return false
		case a[i] < b[i]:
			better = true
		}
	}
	return better
}

// Front returns the indices, in increasing order, of the points no other
// point dominates: the Pareto front. Equal points are all on it, as
// Optuna's study.best_trials has them.
func Front(points [][]float64) []int {
	var out []int
	for i, p := range points {
		dominated := false
		for j, q := range points {
			if j != i && Dominates(q, p) {
				dominated = true
				break
			}
		}
		if !dominated {
			out = append(out, i)
		}
	}
	return out
}
