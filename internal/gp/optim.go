package gp

import (
	"math"
	"math/rand/v2"
	"slices"
)

// The acquisition optimizer's settings, Optuna's.
const (
	nPreliminarySamples = 2048 // random points the local searches start among
	nLocalSearch        = 10   // local searches: the best point, the best trial, 8 by roulette
	ascentGTol          = 1e-2 // the gradient threshold of the continuous ascent: √tol, tol 10⁻⁴
	exhaustiveChoices   = 16   // a stepped parameter with more values is line-searched
	localSearchIters    = 100  // rounds of a local search at most
	ascentIters         = 200
)

// acquisition is log expected improvement over f0 under model m, over the
// modeled dims (a point has one normalized value per dim, in dims' order).
type acquisition struct {
	m    *model
	f0   float64
	dims []*dim
	// cont are the positions of the dims without a grid, which the
	// gradient ascent moves; disc those with one.
	cont, disc  []int
	lengths     []float64 // the length scales of cont: 1/√λ
	dMean, dVar []float64 // valueGrad's
}

func newAcquisition(m *model, f0 float64, dims []*dim) *acquisition {
	a := &acquisition{m: m, f0: f0, dims: dims}
	for j, d := range dims {
		if d.grid != nil {
			a.disc = append(a.disc, j)
			continue
		}
		a.cont = append(a.cont, j)
		a.lengths = append(a.lengths, 1/math.Sqrt(m.invLen2[j]))
	}
	return a
}

// value is the acquisition at u.
func (a *acquisition) value(u []float64) float64 {
	mean, variance := a.m.posterior(u, false, nil, nil)
	v, _, _ := logEI(mean, variance, a.f0)
	return v
}

// values writes the acquisition at each of us into vals.
func (a *acquisition) values(us [][]float64, vals []float64) {
	mean, variance := make([]float64, len(us)), make([]float64, len(us))
	a.m.posteriors(us, mean, variance)
	for i := range us {
		vals[i], _, _ = logEI(mean[i], variance[i], a.f0)
	}
}

// valueGrad is the acquisition at u and its gradient into grad.
func (a *acquisition) valueGrad(u, grad []float64) float64 {
	if a.dMean == nil {
		a.dMean, a.dVar = make([]float64, len(u)), make([]float64, len(u))
	}
	dMean, dVar := a.dMean, a.dVar
	mean, variance := a.m.posterior(u, true, dMean, dVar)
	v, gm, gv := logEI(mean, variance, a.f0)
	for j := range u {
		grad[j] = gm*dMean[j] + gv*dVar[j]
	}
	return v
}

// optimize returns the point that maximizes the acquisition as Optuna's
// optimize_acqf_mixed finds it (package doc), starting also from warm.
func (a *acquisition) optimize(rng *rand.Rand, warm []float64) []float64 {
	samples := make([][]float64, nPreliminarySamples)
	vals := make([]float64, nPreliminarySamples)
	best := 0
	for i := range samples {
		u := make([]float64, len(a.dims))
		for j, d := range a.dims {
			u[j] = d.random(rng)
		}
		samples[i] = u
	}
	a.values(samples, vals)
	for i, v := range vals {
		if v > vals[best] {
			best = i
		}
	}
	starts := [][]float64{samples[best]}
	for _, i := range roulette(rng, vals, best, nLocalSearch-2) {
		starts = append(starts, samples[i])
	}
	if warm != nil {
		starts = append(starts, warm)
	}
	var top []float64
	topVal := math.Inf(-1)
	for _, s := range starts {
		u, v := a.localSearch(slices.Clone(s))
		if v > topVal || top == nil {
			top, topVal = u, v
		}
	}
	return top
}

// roulette picks up to n positions of vals other than best, without
// repeats, each with probability ∝ exp(vals − vals[best]) (Optuna's
// modified roulette wheel); fewer when fewer have a probability above 0.
func roulette(rng *rand.Rand, vals []float64, best, n int) []int {
	w := make([]float64, len(vals))
	var nonzero int
	for i, v := range vals {
		if i == best {
			continue
		}
		w[i] = math.Exp(v - vals[best])
		if w[i] > 0 {
			nonzero++
		}
	}
	var out []int
	for range min(n, nonzero) {
		var total float64
		for _, x := range w {
			total += x
		}
		r := rng.Float64() * total
		pick := -1
		for i, x := range w {
			if x == 0 {
				continue
			}
			pick = i
			if r -= x; r < 0 {
				break
			}
		}
		out = append(out, pick)
		w[pick] = 0
	}
	return out
}

// localSearch improves u until no parameter moves: a gradient ascent over
// the continuous dims, then a search over each gridded dim in turn.
func (a *acquisition) localSearch(u []float64) ([]float64, float64) {
	const continuous = -1
	v := a.value(u)
	last := continuous
	for range localSearchIters {
		if a.ascend(u, &v) {
			last = continuous
		}
		for _, j := range a.disc {
			if last == j {
				return u, v // nothing moved since j did
			}
			if a.searchGrid(u, &v, j) {
				last = j
			}
		}
		if last == continuous {
			return u, v
		}
	}
	return u, v
}

// ascend maximizes the acquisition over the continuous dims of u by
// box-bounded L-BFGS in coordinates scaled by the length scales, z = u/l
// in [0, 1/l] (so that every direction has about the same curvature,
// Optuna's preconditioning in optuna/_gp/optim_mixed.py at 1d8ce7bb); it
// updates u and *v and reports whether it found a higher value.
func (a *acquisition) ascend(u []float64, v *float64) bool {
	if len(a.cont) == 0 {
		return false
	}
	point := slices.Clone(u)
	full := make([]float64, len(u))
	neg := func(z, grad []float64) float64 {
		for i, j := range a.cont {
			point[j] = z[i] * a.lengths[i]
		}
		val := a.valueGrad(point, full)
		for i, j := range a.cont {
			grad[i] = -full[j] * a.lengths[i]
		}
		return -val
	}
	z0, lo, hi := make([]float64, len(a.cont)), make([]float64, len(a.cont)), make([]float64, len(a.cont))
	for i, j := range a.cont {
		z0[i], hi[i] = u[j]/a.lengths[i], 1/a.lengths[i]
	}
	z, negVal, iters := minimizeBox(neg, z0, lo, hi, ascentGTol, ascentIters)
	if iters == 0 || !(-negVal > *v) {
		return false
	}
	for i, j := range a.cont {
		u[j] = min(max(z[i]*a.lengths[i], 0), 1)
	}
	*v = a.value(u)
	return true
}

// searchGrid moves u's value of gridded dim j to the grid value with the
// highest acquisition: every value of a choice or a short grid, else a
// golden-section search over the acquisition interpolated between grid
// values (Optuna's discrete line search, with golden section for Brent).
// It updates *v and reports whether u moved.
func (a *acquisition) searchGrid(u []float64, v *float64, j int) bool {
	grid := a.dims[j].grid
	if len(grid) < 2 {
		return false
	}
	cur := a.dims[j].nearest(u[j])
	point := slices.Clone(u)
	cache := map[int]float64{cur: *v}
	at := func(i int) float64 {
		if f, ok := cache[i]; ok {
			return f
		}
		point[j] = grid[i]
		f := a.value(point)
		cache[i] = f
		return f
	}
	bestI := cur
	if a.dims[j].cat || len(grid) <= exhaustiveChoices {
		for i := range grid {
			if f := at(i); f > cache[bestI] {
				bestI = i
			}
		}
	} else {
		interp := func(t float64) float64 {
			r := min(max(sortSearch(grid, t), 1), len(grid)-1)
			l := r - 1
			w := (grid[r] - t) / (grid[r] - grid[l])
			return w*at(l) + (1-w)*at(r)
		}
		xtol := math.Inf(1)
		for i := 1; i < len(grid); i++ {
			xtol = min(xtol, (grid[i]-grid[i-1])/4)
		}
		t := goldenMax(interp, grid[0], grid[len(grid)-1], xtol)
		if i := a.dims[j].nearest(t); at(i) > cache[bestI] {
			bestI = i
		}
	}
	if bestI == cur {
		return false
	}
	u[j], *v = grid[bestI], cache[bestI]
	return true
}

// sortSearch is the first index of sorted grid whose value is ≥ t.
func sortSearch(grid []float64, t float64) int {
	i, _ := slices.BinarySearch(grid, t)
	return i
}

// goldenMax finds a maximum of f on [lo, hi] by golden-section search, to
// within xtol.
func goldenMax(f func(float64) float64, lo, hi, xtol float64) float64 {
	const r = 0.6180339887498949 // (√5 − 1)/2
	c, d := hi-r*(hi-lo), lo+r*(hi-lo)
	fc, fd := f(c), f(d)
	for hi-lo > xtol {
		if fc >= fd {
			hi, d, fd = d, c, fc
			c = hi - r*(hi-lo)
			fc = f(c)
		} else {
			lo, c, fc = c, d, fd
			d = lo + r*(hi-lo)
			fd = f(d)
		}
	}
	return (lo + hi) / 2
}
