// Package regret holds the synthetic problems and the statistics of the
// tuner's quality benchmarks (the regret studies of internal/tpe,
// internal/gp and internal/sched): Branin and Hartmann6 as param spaces
// with their objectives, and the median [quartiles] of simple regrets.
package regret

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tunejet/tunejet/internal/search"
)

// Problem is a function to minimize over a param space.
type Problem struct {
	Name  string
	Space map[string]any // the param space, in the experiment file's syntax
	F     func(config map[string]any) float64
	Min   float64 // the global minimum of F
}

// BraninXY is the Branin-Hoo function on [-5, 10] × [0, 15]; its minimum,
// 0.397887, is at three points.
func BraninXY(x1, x2 float64) float64 {
	b, c := 5.1/(4*math.Pi*math.Pi), 5/math.Pi
	t := 1 / (8 * math.Pi)
	u := x2 - b*x1*x1 + c*x1 - 6
	return u*u + 10*(1-t)*math.Cos(x1) + 10
}

var (
	hA = [4][6]float64{
		{10, 3, 17, 3.5, 1.7, 8},
		{0.05, 10, 17, 0.1, 8, 14},
		{3, 3.5, 1.7, 10, 17, 8},
		{17, 8, 0.05, 10, 0.1, 14},
	}
	hP = [4][6]float64{
		{1312, 1696, 5569, 124, 8283, 5886},
		{2329, 4135, 8307, 3736, 1004, 9991},
		{2348, 1451, 3522, 2883, 3047, 6650},
		{4047, 8828, 8732, 5743, 1091, 381},
	}
	hAlpha = [4]float64{1, 1.2, 3, 3.2}
)

// hartmann6 is the six-dimensional Hartmann function on [0, 1]⁶.
func hartmann6(x [6]float64) float64 {
	sum := 0.0
	for i := range 4 {
		inner := 0.0
		for j := range 6 {
			d := x[j] - hP[i][j]*1e-4
			inner += hA[i][j] * d * d
		}
		sum += hAlpha[i] * math.Exp(-inner)
	}
	return -sum
}

// Branin is BraninXY over {x1: uniform(-5, 10), x2: uniform(0, 15)}.
var Branin = Problem{
	Name: "branin",
	Space: map[string]any{
		"x1": map[string]any{"uniform": []any{-5.0, 10.0}},
		"x2": map[string]any{"uniform": []any{0.0, 15.0}},
	},
	F:   func(c map[string]any) float64 { return BraninXY(c["x1"].(float64), c["x2"].(float64)) },
	Min: 0.397887,
}

// Hartmann6 is the Hartmann function over x1 … x6, each uniform(0, 1); its
// minimum is -3.32237, its second one -3.2032.
var Hartmann6 = Problem{
	Name: "hartmann6",
	Space: func() map[string]any {
		s := map[string]any{}
		for j := 1; j <= 6; j++ {
			s[fmt.Sprintf("x%d", j)] = map[string]any{"uniform": []any{0.0, 1.0}}
		}
		return s
	}(),
	F: func(c map[string]any) float64 {
		var x [6]float64
		for j := range x {
			x[j] = c[fmt.Sprintf("x%d", j+1)].(float64)
		}
		return hartmann6(x)
	},
	Min: -3.32237,
}

// Problems are Branin and Hartmann6.
var Problems = []Problem{Branin, Hartmann6}

// RandomSearch is tunejet's random search on p (search.Space.Trial with
// seed): the best value after each of n trials.
func RandomSearch(p Problem, space *search.Space, seed uint64, n int) []float64 {
	best := make([]float64, n)
	for t := range n {
		config, _ := space.Trial(t, int64(seed))
		best[t] = p.F(config)
		if t > 0 {
			best[t] = min(best[t], best[t-1])
		}
	}
	return best
}

// Percentile is numpy's linear-interpolation percentile q (0 to 1) of
// sorted.
func Percentile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	if lo+1 >= len(sorted) {
		return sorted[lo]
	}
	return sorted[lo] + (pos-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// Summary is "N=n median [q1, q3]" of the simple regrets over fStar after
// each n of ns trials, each run in bests giving the best value so far
// after each trial.
func Summary(bests [][]float64, fStar float64, ns []int) string {
	var parts []string
	for _, n := range ns {
		r := make([]float64, len(bests))
		for i, b := range bests {
			r[i] = b[n-1] - fStar
		}
		slices.Sort(r)
		parts = append(parts, fmt.Sprintf("N=%d %.4g [%.3g, %.3g]", n, Percentile(r, 0.5), Percentile(r, 0.25), Percentile(r, 0.75)))
	}
	return strings.Join(parts, "  ")
}
