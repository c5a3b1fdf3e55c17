package gp

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/optimize"
)

// minNoise is Optuna's DEFAULT_MINIMUM_NOISE_VAR: the noise variance's
// floor, and its value with deterministic_objective.
const minNoise = 1e-6

// fitGTol is the gradient threshold of the kernel's fit (Optuna's gtol).
const fitGTol = 1e-2

// matern52 is the Matérn 5/2 correlation of the squared scaled distance
// r2, and its derivative with respect to r2.
func matern52(r2 float64) (k, dk float64) {
	s := math.Sqrt(5 * r2)
	e := math.Exp(-s)
	return e * (5.0/3*r2 + s + 1), -5.0 / 6 * (s + 1) * e
}

// kernelParams are the kernel's parameters: the inverse squared length
// scales, one per dim, the scale and the noise variance.
type kernelParams struct {
	invLen2 []float64
	scale   float64
	noise   float64
}

// model is a Gaussian process conditioned on points x with values y.
type model struct {
	kernelParams
	cat   []bool
	x     [][]float64
	chol  []float64 // the lower Cholesky factor of K + σ²I, row-major n×n
	alpha []float64 // (K + σ²I)⁻¹ y

	scratch []float64 // posterior's
}

// sqDist is the squared difference of two points in each dim: 0 or 1 for
// a choice.
func sqDist(a, b []float64, cat []bool, out []float64) {
	for j := range a {
		d := a[j] - b[j]
		if cat[j] {
			if d != 0 {
				out[j] = 1
			} else {
				out[j] = 0
			}
			continue
		}
		out[j] = d * d
	}
}

// scaledSqDist is Σ_j λ_j d_j(a, b)², the squared distance of two points
// scaled by the inverse squared length scales λ.
func scaledSqDist(a, b []float64, cat []bool, invLen2 []float64) float64 {
	var r2 float64
	for j, l := range invLen2 {
		d := a[j] - b[j]
		switch {
		case !cat[j]:
			r2 += l * d * d
		case d != 0:
			r2 += l
		}
	}
	return r2
}

// newModel factorizes the kernel matrix of x with p; false when it is not
// positive definite.
func newModel(x [][]float64, y []float64, cat []bool, p kernelParams) (*model, bool) {
	n := len(x)
	m := &model{kernelParams: p, cat: cat, x: x, chol: make([]float64, n*n)}
	for a := range n {
		for b := range a {
			v, _ := matern52(scaledSqDist(x[a], x[b], cat, p.invLen2))
			m.chol[a*n+b] = p.scale * v
		}
		m.chol[a*n+a] = p.scale + p.noise
	}
	if _, ok := lapack64.Potrf(blas64.Symmetric{N: n, Stride: n, Data: m.chol, Uplo: blas.Lower}); !ok {
		return nil, false
	}
	m.alpha = slicesClone(y)
	m.solveLower(m.alpha)
	m.solveUpper(m.alpha)
	return m, true
}

// lower is the Cholesky factor L as gonum's triangular matrix.
func (m *model) lower() blas64.Triangular {
	n := len(m.x)
	return blas64.Triangular{N: n, Stride: n, Data: m.chol, Uplo: blas.Lower, Diag: blas.NonUnit}
}

// solveLower overwrites v with L⁻¹v.
func (m *model) solveLower(v []float64) {
	blas64.Trsv(blas.NoTrans, m.lower(), blas64.Vector{N: len(v), Inc: 1, Data: v})
}

// solveUpper overwrites v with L⁻ᵀv.
func (m *model) solveUpper(v []float64) {
	blas64.Trsv(blas.Trans, m.lower(), blas64.Vector{N: len(v), Inc: 1, Data: v})
}

// posterior is the model's mean and variance at point u and, when grad
// is set, their gradients with respect to u's non-categorical dims
// (dMean, dVar; zero for choices). It is not safe for concurrent use: it
// works in the model's scratch space.
func (m *model) posterior(u []float64, grad bool, dMean, dVar []float64) (mean, variance float64) {
	n := len(m.x)
	if m.scratch == nil {
		m.scratch = make([]float64, 3*n)
	}
	k, dk, v := m.scratch[:n], m.scratch[n:2*n], m.scratch[2*n:3*n]
	for i, xi := range m.x {
		v, d := matern52(scaledSqDist(u, xi, m.cat, m.invLen2))
		k[i], dk[i] = m.scale*v, m.scale*d
	}
	mean = dot(k, m.alpha)
	copy(v, k)
	m.solveLower(v)
	variance = max(m.scale-dot(v, v), 0)
	if !grad {
		return mean, variance
	}
	w := v // K⁻¹k
	m.solveUpper(w)
	for j := range u {
		dMean[j], dVar[j] = 0, 0
		if m.cat[j] {
			continue
		}
		var dm, dv float64
		for i, xi := range m.x {
			g := dk[i] * 2 * m.invLen2[j] * (u[j] - xi[j])
			dm += m.alpha[i] * g
			dv += w[i] * g
		}
		dMean[j], dVar[j] = dm, -2*dv
	}
	return mean, variance
}

// posteriorBlock is how many points posteriors solves for at once.
const posteriorBlock = 128

// posteriors writes the model's mean and variance at each of us into mean
// and variance, as posterior does one at a time: the kernel vectors of a
// block of points are the columns of one matrix, which one triangular
// solve with several right-hand sides turns into L⁻¹k.
func (m *model) posteriors(us [][]float64, mean, variance []float64) {
	n := len(m.x)
	buf := make([]float64, n*posteriorBlock)
	for start := 0; start < len(us); start += posteriorBlock {
		block := us[start:min(start+posteriorBlock, len(us))]
		c := len(block)
		k := blas64.General{Rows: n, Cols: c, Stride: c, Data: buf[:n*c]}
		for a, xa := range m.x {
			row := k.Data[a*c : (a+1)*c]
			for i, u := range block {
				v, _ := matern52(scaledSqDist(u, xa, m.cat, m.invLen2))
				row[i] = m.scale * v
			}
		}
		mu := blas64.Vector{N: c, Inc: 1, Data: mean[start : start+c]}
		blas64.Gemv(blas.Trans, 1, k, blas64.Vector{N: n, Inc: 1, Data: m.alpha}, 0, mu)
		blas64.Trsm(blas.Left, blas.NoTrans, 1, m.lower(), k)
		vs := variance[start : start+c]
		clear(vs)
		for a := range n {
			row := k.Data[a*c : (a+1)*c]
			for i, v := range row {
				vs[i] += v * v
			}
		}
		for i := range vs {
			vs[i] = max(m.scale-vs[i], 0)
		}
	}
}

// fit returns the model of x and y whose kernel parameters maximize the
// marginal likelihood plus Optuna's prior (package doc).
func fit(x [][]float64, y []float64, cat []bool, deterministic bool) *model {
	d := len(cat)
	start := make([]float64, d+2) // log λ, log s: 0; log(σ² − floor)
	start[d+1] = math.Log(1 - 0.99*minNoise)
	f := newFitter(x, y, cat, deterministic)
	theta := minimizeSplit(func(th []float64) float64 { return f.at(th).loss },
		func(grad, th []float64) { f.at(th).gradient(f, grad) }, start, fitGTol, 1000)
	if m, ok := newModel(x, y, cat, f.params(theta)); ok {
		return m
	}
	if m, ok := newModel(x, y, cat, f.params(start)); ok {
		return m
	}
	// Not reached: a Matérn kernel matrix plus σ² ≥ 10⁻⁶ on its diagonal
	// is positive definite unless points repeat exactly and σ² is at its floor.
	p := f.params(start)
	p.noise = 1
	m, _ := newModel(x, y, cat, p)
	return m
}

// fitter computes the loss of the kernel's fit and its gradient.
type fitter struct {
	x             [][]float64
	y             []float64
	cat           []bool
	deterministic bool
	sq            []float64 // the squared differences of each pair a > b, d of them at (a*(a−1)/2 + b)·d
	last          *fitEval  // the evaluation at the last theta asked for, if it is still current
	// eval and inv are the buffers of the one evaluation at a time.
	eval *fitEval
	inv  []float64
}

func newFitter(x [][]float64, y []float64, cat []bool, deterministic bool) *fitter {
	d := len(cat)
	f := &fitter{x: x, y: y, cat: cat, deterministic: deterministic, sq: make([]float64, len(x)*(len(x)-1)/2*d)}
	for a := range x {
		for b := range a {
			i := a*(a-1)/2 + b
			sqDist(x[a], x[b], cat, f.sq[i*d:(i+1)*d])
		}
	}
	return f
}

// params turns the optimized vector into kernel parameters.
func (f *fitter) params(theta []float64) kernelParams {
	d := len(f.cat)
	p := kernelParams{invLen2: make([]float64, d), scale: math.Exp(theta[d]), noise: minNoise}
	for j := range d {
		p.invLen2[j] = math.Exp(theta[j])
	}
	if !f.deterministic {
		p.noise += math.Exp(theta[d+1])
	}
	return p
}

// fitEval is the fit's loss at one theta, with what its gradient needs.
type fitEval struct {
	theta       []float64
	p           kernelParams
	ok          bool // the kernel matrix is positive definite
	loss        float64
	chol        []float64 // the kernel matrix's Cholesky factor Uᵀ U, U upper, row-major n×n
	alpha       []float64 // K⁻¹ y
	corr, deriv []float64 // Matérn of each pair a > b, and its derivative
}

// at evaluates the loss at theta, or returns the last evaluation if it was
// at theta: the line search asks for the loss and the gradient at the same
// points, which share the factorization, and only the gradient needs K⁻¹.
func (f *fitter) at(theta []float64) *fitEval {
	if f.last != nil && equal(f.last.theta, theta) {
		return f.last
	}
	n, d := len(f.x), len(f.cat)
	p := f.params(theta)
	e := f.eval // one evaluation at a time: its buffers are reused
	if e == nil {
		pairs := n * (n - 1) / 2
		e = &fitEval{corr: make([]float64, pairs), deriv: make([]float64, pairs), chol: make([]float64, n*n), alpha: make([]float64, n)}
		f.eval = e
	}
	e.theta, e.p, e.loss, e.ok = append(e.theta[:0], theta...), p, math.Inf(1), false
	f.last = e
	// The upper triangle, row-major: (b, a) for b ≤ a.
	for a := range n {
		for b := range a {
			i := a*(a-1)/2 + b
			e.corr[i], e.deriv[i] = matern52(dot(f.sq[i*d:(i+1)*d], p.invLen2))
			e.chol[b*n+a] = p.scale * e.corr[i]
		}
		e.chol[a*n+a] = p.scale + p.noise
	}
	u, ok := lapack64.Potrf(blas64.Symmetric{N: n, Stride: n, Data: e.chol, Uplo: blas.Upper})
	if !ok {
		return e
	}
	copy(e.alpha, f.y)
	x := blas64.Vector{N: n, Inc: 1, Data: e.alpha}
	blas64.Trsv(blas.Trans, u, x)
	blas64.Trsv(blas.NoTrans, u, x)
	// log det K = 2 Σ log U_aa.
	var logDet float64
	for a := range n {
		logDet += 2 * math.Log(e.chol[a*n+a])
	}
	e.ok = true
	mll := -0.5*logDet - 0.5*dot(e.alpha, f.y)
	// The prior: −Σ(0.1/λ + 0.1λ) + (log s − s) + (0.1 log σ² − 30σ²).
	prior := (math.Log(p.scale) - p.scale) + (0.1*math.Log(p.noise) - 30*p.noise)
	for _, l := range p.invLen2 {
		prior -= 0.1/l + 0.1*l
	}
	e.loss = -(mll + prior)
	return e
}

// gradient writes the loss's gradient at e's theta into grad (zeros when
// the kernel matrix is not positive definite).
func (e *fitEval) gradient(f *fitter, grad []float64) {
	clear(grad)
	if !e.ok {
		return
	}
	d, n, p := len(f.cat), len(f.x), e.p
	if f.inv == nil {
		f.inv = make([]float64, n*n)
	}
	copy(f.inv, e.chol) // K⁻¹ from the factor, e's own kept for a second call
	inv, ok := lapack64.Potri(blas64.Triangular{N: n, Stride: n, Data: f.inv, Uplo: blas.Upper, Diag: blas.NonUnit})
	if !ok {
		return
	}
	// d mll/dθ = ½ tr(W ∂K/∂θ), W = ααᵀ − K⁻¹; K is symmetric, so each
	// pair a > b counts twice.
	var trace float64
	alpha, id := e.alpha, inv.Data
	for a := range n {
		aa := alpha[a]
		trace += aa*aa - id[a*n+a]
		for b := range a {
			i := a*(a-1)/2 + b
			w := aa*alpha[b] - id[b*n+a]
			grad[d] += w * p.scale * e.corr[i] // ∂K/∂log s = s·corr
			g := w * p.scale * e.deriv[i]
			for j, s := range f.sq[i*d : (i+1)*d] {
				grad[j] += g * s // times λ_j below
			}
		}
	}
	for j := range d {
		grad[j] *= p.invLen2[j]
	}
	grad[d] += 0.5 * trace * p.scale // the diagonal's s
	if !f.deterministic {
		grad[d+1] = 0.5 * trace * (p.noise - minNoise)
	}
	for j, l := range p.invLen2 {
		grad[j] += 0.1/l - 0.1*l
	}
	grad[d] += 1 - p.scale
	if !f.deterministic {
		grad[d+1] += (0.1/p.noise - 30) * (p.noise - minNoise)
	}
	for i := range grad {
		grad[i] = -grad[i]
	}
}

// minimizeSplit runs L-BFGS from x0 on f, whose gradient grad computes
// apart (the fit's loss alone needs no inverse of the kernel matrix), until
// the gradient's largest component is below gtol or maxIter iterations,
// and returns the best point found: x0 when nothing better was.
func minimizeSplit(f func(x []float64) float64, grad func(g, x []float64), x0 []float64, gtol float64, maxIter int) []float64 {
	res, err := optimize.Minimize(optimize.Problem{Func: f, Grad: grad}, x0, &optimize.Settings{
		GradientThreshold: gtol,
		MajorIterations:   maxIter,
		Converger:         &optimize.FunctionConverge{Absolute: 1e-9, Iterations: 10},
	}, &optimize.LBFGS{})
	if res == nil || math.IsNaN(res.F) || math.IsInf(res.F, 0) {
		_ = err // a failed line search still leaves the best location
		return x0
	}
	return res.X
}

// dot is gonum's vectorized dot product of equal-length a and b.
func dot(a, b []float64) float64 { return floats.Dot(a, b) }

func equal(a, b []float64) bool {
	for i, v := range a {
		if b[i] != v {
			return false
		}
	}
	return true
}

func slicesClone(v []float64) []float64 { return append([]float64(nil), v...) }
