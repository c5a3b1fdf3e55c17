package regret

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tunejet/tunejet/internal/moo"
)

// MultiProblem is a function of several objectives, each to minimize,
// over a param space, judged by the hypervolume of the values found.
type MultiProblem struct {
	Name  string
	Space map[string]any // the param space, in the experiment file's syntax
	F     func(config map[string]any) []float64
	Ref   []float64 // the reference point of the hypervolume
	Best  float64   // the hypervolume of the true Pareto front against Ref
}

// ZDT1Values is ZDT1 (Zitzler, Deb and Thiele 2000) at x, each xᵢ in
// [0, 1]: f1 = x1, g = 1 + 9·mean(x2 … xn), f2 = g·(1 − √(f1/g)). Its
// Pareto front is f2 = 1 − √f1, where x2 … xn are 0.
func ZDT1Values(x []float64) []float64 {
	sum := 0.0
	for _, v := range x[1:] {
		sum += v
	}
	g := 1 + 9*sum/float64(len(x)-1)
	f1 := x[0]
	return []float64{f1, g * (1 - math.Sqrt(f1/g))}
}

// ZDT1 is ZDT1Values over x1 … x6, each uniform(0, 1), against the
// reference point (1.1, 1.1); its front's hypervolume is
// ∫₀¹ (0.1 + √f1) df1 + 0.1·1.1 = 0.87667.
var ZDT1 = MultiProblem{
	Name: "zdt1",
	Space: func() map[string]any {
		s := map[string]any{}
		for j := 1; j <= 6; j++ {
			s[fmt.Sprintf("x%d", j)] = map[string]any{"uniform": []any{0.0, 1.0}}
		}
		return s
	}(),
	F: func(c map[string]any) []float64 {
		x := make([]float64, 6)
		for j := range x {
			x[j] = c[fmt.Sprintf("x%d", j+1)].(float64)
		}
		return ZDT1Values(x)
	},
	Ref:  []float64{1.1, 1.1},
	Best: 0.1 + 2.0/3 + 0.11,
}

// Hypervolumes returns the hypervolume against ref of the first n values
// for each n of ns.
func Hypervolumes(values [][]float64, ref []float64, ns []int) []float64 {
	out := make([]float64, len(ns))
	for i, n := range ns {
		out[i] = moo.Hypervolume(values[:min(n, len(values))], ref)
	}
	return out
}

// HypervolumeSummary is "N=n median [q1, q3]" of the hypervolumes after
// each n of ns trials, hvs holding one run's hypervolumes per row, in the
// order of ns.
func HypervolumeSummary(hvs [][]float64, ns []int) string {
	var parts []string
	for j, n := range ns {
		v := make([]float64, len(hvs))
		for i, h := range hvs {
			v[i] = h[j]
		}
		slices.Sort(v)
		parts = append(parts, fmt.Sprintf("N=%d %.4g [%.3g, %.3g]", n, Percentile(v, 0.5), Percentile(v, 0.25), Percentile(v, 0.75)))
	}
	return strings.Join(parts, "  ")
}
