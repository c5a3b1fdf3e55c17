package tpe

import (
	"math"
	"math/rand/v2"
	"slices"
)

// eps is Optuna's smallest bandwidth without the magic clip.
const eps = 1e-12

// params are what a Parzen estimator needs beyond its observations.
type params struct {
	opts    *Options
	nParams int // parameters in the search space, for the multivariate bandwidth
}

// estimator is Optuna's _ParzenEstimator: a mixture of one kernel per
// observation and a prior kernel, the same mixture weights for every dim.
type estimator struct {
	dims    []*dim
	weights []float64 // normalized; the last is the prior's
	logW    []float64
	kernels []kernels // one per dim
	buf     []float64 // per-kernel log densities, reused by logPdf
}

// kernels are one dim's kernels, the prior's last.
type kernels struct {
	mus, sigmas []float64 // numeric dims
	// logNorm is, per kernel, what turns the normal's log density (or log
	// mass, for stepped dims) into the truncated one: −log mass over the
	// range, and −log sigma for continuous dims.
	logNorm  []float64
	probs    [][]float64 // categorical dims: per kernel, per choice
	logProbs [][]float64
}

// newEstimator builds the estimator of dims from obs, one row per trial in
// trial-number order, one column per dim in model space.
func newEstimator(dims []*dim, obs [][]float64, p params) *estimator {
	n := len(obs)
	e := &estimator{dims: dims, weights: []float64{1}}
	if n > 0 {
		e.weights = append(slices.Clone(p.opts.Weights(n)[:n]), p.opts.PriorWeight)
	}
	sum := 0.0
	for _, w := range e.weights {
		sum += w
	}
	for i := range e.weights {
		e.weights[i] /= sum
		e.logW = append(e.logW, math.Log(e.weights[i]))
	}
	col := make([]float64, n)
	for j, d := range dims {
		for i, row := range obs {
			col[i] = row[j]
		}
		if d.cat {
			e.kernels = append(e.kernels, categoricalKernels(d, col, p.opts.PriorWeight))
		} else {
			e.kernels = append(e.kernels, numericKernels(d, col, p))
		}
	}
	e.buf = make([]float64, len(e.weights))
	return e
}

// categoricalKernels gives each observation PriorWeight/(n+1) on every
// choice and 1 more on its own, normalized; the prior kernel is uniform.
func categoricalKernels(d *dim, col []float64, priorWeight float64) kernels {
	c := len(d.domain.Choices)
	nk := len(col) + 1
	k := kernels{}
	for i := range nk {
		row := make([]float64, c)
		for x := range row {
			row[x] = priorWeight / float64(nk)
			if len(col) == 0 {
				row[x] = 1 / float64(c)
			}
		}
		if i < len(col) {
			row[int(col[i])]++
		}
		normalize(row)
		k.probs = append(k.probs, row)
		logRow := make([]float64, c)
		for x, p := range row {
			logRow[x] = math.Log(p)
		}
		k.logProbs = append(k.logProbs, logRow)
	}
	return k
}

// normalize divides row by its sum, unless the sum is 0.
func normalize(row []float64) {
	sum := 0.0
	for _, p := range row {
		sum += p
	}
	if sum == 0 {
		return
	}
	for i := range row {
		row[i] /= sum
	}
}

// numericKernels puts a truncated normal at each observation, with
// bandwidths from sigmas, and the prior (mid-range, bandwidth span) last.
func numericKernels(d *dim, col []float64, p params) kernels {
	k := kernels{
		mus:    append(slices.Clone(col), 0.5*(d.low+d.high)),
		sigmas: append(sigmas(d, col, p), d.span()),
	}
	for i, mu := range k.mus {
		s := k.sigmas[i]
		norm := -logGaussMass((d.low-d.step/2-mu)/s, (d.high+d.step/2-mu)/s)
		if d.step == 0 && !d.logMass {
			norm -= math.Log(s)
		}
		k.logNorm = append(k.logNorm, norm)
	}
	return k
}

// sigmas are the bandwidths of the observations' kernels: the neighbour
// rule (univariate) or Scott-like one (multivariate), then the clip.
func sigmas(d *dim, col []float64, p params) []float64 {
	n := len(col)
	out := make([]float64, n)
	if p.opts.Multivariate && p.opts.Estimator == Optuna4 {
		s := 0.2 * math.Pow(float64(max(n, 1)), -1/float64(p.nParams+4)) * d.span()
		for i := range out {
			out[i] = s
		}
	} else {
		neighbourSigmas(d, col, p.opts, out)
	}
	lo, hi := eps, d.span()
	if p.opts.ConsiderMagicClip {
		lo = d.span() / min(100, float64(n+2))
	}
	for i, s := range out {
		out[i] = min(max(s, lo), hi)
	}
	return out
}

// neighbourSigmas sets out[i] to the larger distance from col[i] to its
// neighbours among col, the prior's mean and the range's ends (widened by
// half a step); without considerEndpoints, the smallest and largest value
// look only inwards.
func neighbourSigmas(d *dim, col []float64, opts *Options, out []float64) {
	type mu struct {
		v float64
		i int // position in col; len(col) for the prior
	}
	mus := make([]mu, 0, len(col)+1)
	for i, v := range col {
		mus = append(mus, mu{v, i})
	}
	if opts.Estimator == Optuna4 {
		mus = append(mus, mu{0.5 * (d.low + d.high), len(col)})
	}
	slices.SortFunc(mus, func(a, b mu) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return a.i - b.i
	})
	m := len(mus)
	e := make([]float64, m+2) // the sorted values between the range's ends
	e[0], e[m+1] = d.low-d.step/2, d.high+d.step/2
	for i, x := range mus {
		e[i+1] = x.v
	}
	s := make([]float64, m+2)
	for i := 1; i <= m; i++ {
		s[i] = max(e[i]-e[i-1], e[i+1]-e[i])
	}
	if !opts.ConsiderEndpoints && m >= 2 {
		s[1], s[m] = e[2]-e[1], e[m]-e[m-1]
	}
	for i, x := range mus {
		if x.i < len(out) {
			out[x.i] = s[i+1]
		}
	}
}

// sample draws size candidates from the mixture, in model space: the
// kernel of every candidate first, then each dim's values.
func (e *estimator) sample(rng *rand.Rand, size int) [][]float64 {
	active := make([]int, size)
	for i := range active {
		active[i] = pick(e.weights, rng.Float64())
	}
	out := make([][]float64, size)
	for i := range out {
		out[i] = make([]float64, len(e.dims))
	}
	for j, d := range e.dims {
		k := &e.kernels[j]
		for i, a := range active {
			u := rng.Float64()
			if d.cat {
				out[i][j] = float64(pick(k.probs[a], u))
				continue
			}
			mu, s := k.mus[a], k.sigmas[a]
			x := mu + s*ppf(u, (d.low-d.step/2-mu)/s, (d.high+d.step/2-mu)/s)
			out[i][j] = d.snap(x)
		}
	}
	return out
}

// pick returns the first index whose cumulative probability exceeds u, the
// last one against rounding.
func pick(probs []float64, u float64) int {
	cum := 0.0
	for i, p := range probs[:len(probs)-1] {
		if cum += p; u < cum {
			return i
		}
	}
	return len(probs) - 1
}

// logPdf is the mixture's log density at x, in model space.
func (e *estimator) logPdf(x []float64) float64 {
	lp := e.buf
	copy(lp, e.logW)
	for j, d := range e.dims {
		k := &e.kernels[j]
		xj := x[j]
		switch {
		case d.cat:
			c := int(xj)
			for i := range lp {
				lp[i] += k.logProbs[i][c]
			}
		case d.step > 0:
			for i := range lp {
				mu, s := k.mus[i], k.sigmas[i]
				lp[i] += logGaussMass((xj-d.step/2-mu)/s, (xj+d.step/2-mu)/s) + k.logNorm[i]
			}
		case d.logMass:
			v := math.Exp(xj)
			lo, hi := math.Log(v-d.logQ/2), math.Log(v+d.logQ/2)
			for i := range lp {
				mu, s := k.mus[i], k.sigmas[i]
				lp[i] += logGaussMass((lo-mu)/s, (hi-mu)/s) + k.logNorm[i]
			}
		case xj < d.low || xj > d.high:
			return math.Inf(-1)
		default:
			for i := range lp {
				z := (xj - k.mus[i]) / k.sigmas[i]
				lp[i] += -z*z/2 - normLogC + k.logNorm[i]
			}
		}
	}
	return logSumExp(lp)
}

// logSumExp is log Σ exp(v), safe when every term is −∞.
func logSumExp(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = max(m, x)
	}
	if math.IsInf(m, -1) {
		return m
	}
	sum := 0.0
	for _, x := range v {
		sum += math.Exp(x - m)
	}
	return m + math.Log(sum)
}
