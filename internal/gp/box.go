package gp

import (
	"math"

	"gonum.org/v1/gonum/floats"
)

// The box-bounded L-BFGS's settings: those of Optuna's batched_lbfgsb
// (optuna/_gp/batched_lbfgsb.py at 1d8ce7bb), which are scipy's
// fmin_l_bfgs_b defaults: 10 corrections, factr 10⁷ (a relative decrease
// of the value below 10⁷·ε stops), 20 steps of line search at most.
const (
	boxMemory  = 10
	boxFTol    = 1e7 * 2.220446049250313e-16
	boxMaxStep = 20
	boxArmijo  = 1e-4 // sufficient decrease of the line search
)

// minimizeBox minimizes f (value, and gradient into grad) over the box
// [lo, hi] from x0 by L-BFGS with projection, where Optuna calls scipy's
// L-BFGS-B: variables at a bound that the gradient pushes out are held,
// the quasi-Newton direction moves the others, and each step is projected
// onto the box and backtracked until the value decreases enough. It stops
// when the projected gradient's largest component is at most pgtol, the
// value's relative decrease is below boxFTol, a line search fails or after
// maxIter iterations, and returns the last point, its value and the
// number of iterations that moved.
func minimizeBox(f func(x, grad []float64) float64, x0, lo, hi []float64, pgtol float64, maxIter int) ([]float64, float64, int) {
	n := len(x0)
	x, g := make([]float64, n), make([]float64, n)
	for i := range x {
		x[i] = min(max(x0[i], lo[i]), hi[i])
	}
	fx := f(x, g)
	xn, gn, d, alpha := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, boxMemory)
	var ss, ys [][]float64
	var rhos []float64
	iters := 0
	for iters < maxIter {
		// The projected gradient P(x − g) − x, and the free variables.
		var pg float64
		for i := range x {
			pg = max(pg, math.Abs(min(max(x[i]-g[i], lo[i]), hi[i])-x[i]))
			d[i] = -g[i]
			if (x[i] <= lo[i] && g[i] > 0) || (x[i] >= hi[i] && g[i] < 0) {
				d[i] = 0
			}
		}
		if !(pg > pgtol) {
			break
		}
		// The two-loop recursion on the free variables' gradient.
		for k := len(ss) - 1; k >= 0; k-- {
			alpha[k] = rhos[k] * dot(ss[k], d)
			floats.AddScaled(d, -alpha[k], ys[k])
		}
		if k := len(ss) - 1; k >= 0 {
			gamma := dot(ss[k], ys[k]) / dot(ys[k], ys[k])
			for i := range d {
				d[i] *= gamma
			}
		}
		for k := range ss {
			beta := rhos[k] * dot(ys[k], d)
			floats.AddScaled(d, alpha[k]-beta, ss[k])
		}
		var gd float64
		for i := range d {
			if (x[i] <= lo[i] && g[i] > 0) || (x[i] >= hi[i] && g[i] < 0) {
				d[i] = 0
			}
			gd += g[i] * d[i]
		}
		if !(gd < 0) { // not a descent direction: forget the curvature
			ss, ys, rhos = ss[:0], ys[:0], rhos[:0]
			gd = 0
			for i := range d {
				d[i] = -g[i]
				if (x[i] <= lo[i] && g[i] > 0) || (x[i] >= hi[i] && g[i] < 0) {
					d[i] = 0
				}
				gd += g[i] * d[i]
			}
		}
		step := 1.0
		if len(ss) == 0 { // scipy's first step: a unit length
			step = min(1, 1/math.Sqrt(-gd))
		}
		var fn float64
		ok := false
		for range boxMaxStep {
			var dec float64
			moved := false
			for i := range x {
				xn[i] = min(max(x[i]+step*d[i], lo[i]), hi[i])
				dec += g[i] * (xn[i] - x[i])
				moved = moved || xn[i] != x[i]
			}
			if !moved {
				break
			}
			fn = f(xn, gn)
			if fn <= fx+boxArmijo*dec {
				ok = true
				break
			}
			step /= 2
		}
		if !ok {
			break
		}
		iters++
		s, y := make([]float64, n), make([]float64, n)
		for i := range x {
			s[i], y[i] = xn[i]-x[i], gn[i]-g[i]
		}
		if sy := dot(s, y); sy > 1e-10*dot(y, y) {
			if len(ss) == boxMemory {
				ss, ys, rhos = ss[1:], ys[1:], rhos[1:]
			}
			ss, ys, rhos = append(ss, s), append(ys, y), append(rhos, 1/sy)
		}
		decrease := (fx - fn) / max(math.Abs(fx), math.Abs(fn), 1)
		copy(x, xn)
		copy(g, gn)
		fx = fn
		if decrease <= boxFTol {
			break
		}
	}
	return x, fx, iters
}
