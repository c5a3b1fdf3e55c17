package gp

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/tunejet/tunejet/internal/regret"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/settings"
	"github.com/tunejet/tunejet/internal/tpe"
)

// numGrad is the central finite difference of f at x.
func numGrad(f func([]float64) float64, x []float64, h float64) []float64 {
	g := make([]float64, len(x))
	for i := range x {
		xp, xm := slicesClone(x), slicesClone(x)
		xp[i] += h
		xm[i] -= h
		g[i] = (f(xp) - f(xm)) / (2 * h)
	}
	return g
}

func near(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// randomData is n points in d dims with a smooth objective, the last dim
// categorical with 3 values when cat is set.
func randomData(rng *rand.Rand, n, d int, withCat bool) ([][]float64, []float64, []bool) {
	cat := make([]bool, d)
	if withCat {
		cat[d-1] = true
	}
	x := make([][]float64, n)
	y := make([]float64, n)
	for i := range x {
		x[i] = make([]float64, d)
		for j := range d {
			x[i][j] = rng.Float64()
			if cat[j] {
				x[i][j] = float64(rng.IntN(3))
			}
			y[i] += math.Sin(3*x[i][j]) * float64(j+1)
		}
	}
	return x, standardize(y, true), cat
}

func TestTheFitsGradientIsTheLossDerivative(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, deterministic := range []bool{false, true} {
		x, y, cat := randomData(rng, 12, 3, true)
		f := newFitter(x, y, cat, deterministic)
		theta := []float64{0.3, -0.5, 1.2, 0.1, -2}
		grad := make([]float64, len(theta))
		f.lossGrad(theta, grad)
		want := numGrad(func(th []float64) float64 { return f.lossGrad(th, make([]float64, len(th))) }, theta, 1e-6)
		for i := range grad {
			if !near(grad[i], want[i], 1e-5) {
				t.Errorf("deterministic %v: d loss/d theta[%d] = %v, finite difference %v", deterministic, i, grad[i], want[i])
			}
		}
	}
}

func TestTheAcquisitionsGradientIsItsDerivative(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x, y, cat := randomData(rng, 15, 3, true)
	m := fit(x, y, cat, false)
	dims := []*dim{{}, {}, {cat: true, grid: []float64{0, 1, 2}}}
	for _, f0 := range []float64{0.5, 3, 12, 40} { // up to far below the best: the stable branches
		a := newAcquisition(m, f0, dims)
		u := []float64{0.3, 0.7, 1}
		grad := make([]float64, 3)
		v := a.valueGrad(u, grad)
		if math.IsInf(v, 0) || math.IsNaN(v) {
			t.Fatalf("f0 %v: logEI %v", f0, v)
		}
		want := numGrad(a.value, u, 1e-6)
		for j := range 2 {
			if !near(grad[j], want[j], 1e-4) {
				t.Errorf("f0 %v: d logEI/du[%d] = %v, finite difference %v", f0, j, grad[j], want[j])
			}
		}
		if grad[2] != 0 {
			t.Errorf("f0 %v: a choice's gradient %v, want 0", f0, grad[2])
		}
	}
}

// logEI must match the direct formula where that is accurate, and stay
// finite and decreasing far below the best, where the direct one
// underflows to log 0.
func TestLogEIIsStableFarBelowTheBest(t *testing.T) {
	direct := func(z float64) float64 {
		cdf := 0.5 * math.Erfc(-z/math.Sqrt2)
		pdf := math.Exp(-z*z/2) / math.Sqrt(2*math.Pi)
		return math.Log(z*cdf + pdf)
	}
	for _, z := range []float64{3, 0.5, -0.5, -1.5, -4, -8, -12, -20} {
		got, _, _ := logH(z)
		if want := direct(z); !near(got, want, 1e-9) {
			t.Errorf("log h(%v) = %v, want %v", z, got, want)
		}
	}
	// Where the series takes over, it agrees with the direct form.
	for x := 20.0; x < 25; x += 0.5 {
		if got, want := millsSeries(x), 1-math.SqrtPi*x*erfcx(x); !near(got, want, 1e-9) {
			t.Errorf("1 − √π x erfcx(x) at %v: series %v, direct %v", x, got, want)
		}
	}
	prev := math.Inf(1)
	for z := -20.0; z > -1000; z *= 1.5 {
		lh, c, p := logH(z)
		if math.IsInf(lh, 0) || math.IsNaN(lh) || !(lh < prev) || !(c > 0) || !(p > 0) {
			t.Fatalf("log h(%v) = %v (Φ/h %v, φ/h %v) after %v: want finite, decreasing, positive ratios", z, lh, c, p, prev)
		}
		prev = lh
	}
}

func mustSampler(t *testing.T, space map[string]any, opts Options) *Sampler {
	t.Helper()
	sp, err := search.ParseSpace(space)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sp, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run suggests n trials one after another, each completed with f.
func run(s *Sampler, f func(map[string]any) float64, seed uint64, n int) []tpe.Trial {
	var history []tpe.Trial
	for i := range n {
		config := s.Suggest(history, suggestRand(seed, i))
		history = append(history, tpe.Trial{Number: i, State: tpe.Complete, Config: config, Value: f(config)})
	}
	return history
}

// The same history and generator give the same config, whatever order
// the history comes in: a restored experiment suggests what it would have.
func TestASuggestionIsAFunctionOfTheHistory(t *testing.T) {
	s := mustSampler(t, map[string]any{
		"x1": map[string]any{"uniform": []any{-5.0, 10.0}},
		"x2": map[string]any{"uniform": []any{0.0, 15.0}},
	}, Defaults())
	history := run(s, regret.Branin.F, 7, 14)
	want := s.Suggest(history, suggestRand(7, 14))
	shuffled := slices.Clone(history)
	rand.New(rand.NewPCG(1, 1)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if got := s.Suggest(shuffled, suggestRand(7, 14)); !reflect.DeepEqual(got, want) {
		t.Errorf("the same history, shuffled, gave %v, want %v", got, want)
	}
}

// After its random start the GP closes in on a minimum: on Branin, 40
// trials get within 0.05 of it for each of 5 seeds (random search's
// median regret at 25 trials is ~1.5).
func TestTheGPFindsBraninsMinimum(t *testing.T) {
	s := mustSampler(t, map[string]any{
		"x1": map[string]any{"uniform": []any{-5.0, 10.0}},
		"x2": map[string]any{"uniform": []any{0.0, 15.0}},
	}, Defaults())
	for seed := range uint64(5) {
		history := run(s, regret.Branin.F, seed, 40)
		best := math.Inf(1)
		for _, h := range history {
			best = min(best, h.Value)
		}
		if best-regret.Branin.Min > 0.05 {
			t.Errorf("seed %d: best %.4f after 40 trials, regret %.4f, want ≤ 0.05", seed, best, best-regret.Branin.Min)
		}
	}
}

// Every kind of bounded domain comes back as a value of its domain: ints
// as ints on their step, log domains within bounds, choices among the
// choices, constants untouched; and mode max climbs.
func TestSuggestionsAreValuesOfTheirDomains(t *testing.T) {
	space := map[string]any{
		"lr":     map[string]any{"loguniform": []any{1e-4, 1e-1}},
		"layers": map[string]any{"randint": []any{1, 9}},
		"batch":  map[string]any{"qrandint": []any{16, 256, 16}},
		"units":  map[string]any{"lograndint": []any{8, 1024}},
		"act":    map[string]any{"choice": []any{"relu", "tanh", "gelu"}},
		"fixed":  7,
	}
	s := mustSampler(t, space, Options{NStartupTrials: 5, Maximize: true})
	score := func(c map[string]any) float64 {
		v := -math.Abs(math.Log10(c["lr"].(float64))+2) - math.Abs(float64(c["layers"].(int))-4)/4
		if c["act"] == "gelu" {
			v++
		}
		return v
	}
	history := run(s, score, 3, 25)
	for _, h := range history {
		c := h.Config
		lr := c["lr"].(float64)
		layers, batch, units := c["layers"].(int), c["batch"].(int), c["units"].(int)
		switch {
		case lr < 1e-4 || lr > 1e-1:
			t.Errorf("lr %v outside [1e-4, 1e-1]", lr)
		case layers < 1 || layers > 8:
			t.Errorf("layers %v outside randint(1, 9)", layers)
		case batch%16 != 0 || batch < 16 || batch > 256:
			t.Errorf("batch %v not a multiple of 16 in [16, 256]", batch)
		case units < 8 || units > 1024:
			t.Errorf("units %v outside [8, 1024]", units)
		case !slices.Contains([]any{"relu", "tanh", "gelu"}, c["act"]):
			t.Errorf("act %v not a choice", c["act"])
		case c["fixed"] != 7:
			t.Errorf("fixed %v, want 7", c["fixed"])
		}
	}
	var gelu int
	for _, h := range history[15:] {
		if h.Config["act"] == "gelu" {
			gelu++
		}
	}
	if gelu < 7 {
		t.Errorf("%d of the last 10 trials chose gelu, which scores 1 more; want most", gelu)
	}
}

// A trial in flight joins the model at the model's own mean (the Kriging
// believer): the next suggestion moves away from it instead of landing on
// the same spot.
func TestATrialInFlightPushesTheNextSuggestionAway(t *testing.T) {
	s := mustSampler(t, map[string]any{
		"x1": map[string]any{"uniform": []any{-5.0, 10.0}},
		"x2": map[string]any{"uniform": []any{0.0, 15.0}},
	}, Defaults())
	history := run(s, regret.Branin.F, 11, 20)
	first := s.Suggest(history, suggestRand(11, 20))
	inFlight := append(slices.Clone(history), tpe.Trial{Number: 20, State: tpe.Running, Config: first})
	second := s.Suggest(inFlight, suggestRand(11, 20))
	d := math.Hypot((first["x1"].(float64)-second["x1"].(float64))/15, (first["x2"].(float64)-second["x2"].(float64))/15)
	if d < 0.01 {
		t.Errorf("with %v in flight the GP suggested %v again (normalized distance %.4f)", first, second, d)
	}
}

func TestSpacesTheGPCannotModelAreRefused(t *testing.T) {
	sp, err := search.ParseSpace(map[string]any{"x": map[string]any{"randn": []any{0.0, 1.0}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(sp, Defaults())
	var se *settings.Error
	if !errors.As(err, &se) || se.Key != "x" {
		t.Errorf("New with randn: %v, want a settings.Error at key x", err)
	}
}

// lossGrad is −(log marginal likelihood + log prior) at theta, and its
// gradient into grad; +Inf when the kernel matrix is not positive
// definite.
func (f *fitter) lossGrad(theta, grad []float64) float64 {
	e := f.at(theta)
	e.gradient(f, grad)
	return e.loss
}

// Where the acquisition's maximum lies on the box's boundary, as it often
// does when the GP explores, the local search must end on the boundary,
// as Optuna's L-BFGS-B does, not short of it.
func TestTheLocalSearchReachesAMaximumOnTheBoundary(t *testing.T) {
	// The objective rises along both dims, so expected improvement is
	// highest at the corner (1, 1).
	var x [][]float64
	var values []float64
	rng := rand.New(rand.NewPCG(5, 6))
	for range 12 {
		u := []float64{0.6 * rng.Float64(), 0.6 * rng.Float64()}
		x, values = append(x, u), append(values, u[0]+u[1])
	}
	y := standardize(values, true)
	cat := []bool{false, false}
	m := fit(x, y, cat, false)
	a := newAcquisition(m, slices.Max(y), []*dim{{}, {}})
	u, v := a.localSearch([]float64{0.7, 0.8})
	if u[0] != 1 || u[1] != 1 {
		t.Errorf("local search ended at %v (logEI %v), want the corner [1 1] (logEI %v)", u, v, a.value([]float64{1, 1}))
	}
}

// The batched posterior must agree with the one-point posterior.
func TestPosteriorsMatchesPosterior(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	x, y, cat := randomData(rng, 30, 3, true)
	m := fit(x, y, cat, false)
	var us [][]float64
	for range 300 {
		us = append(us, []float64{rng.Float64(), rng.Float64(), float64(rng.IntN(3))})
	}
	us = append(us, x[3]) // at a data point: a variance near the noise
	mean, variance := make([]float64, len(us)), make([]float64, len(us))
	m.posteriors(us, mean, variance)
	for i, u := range us {
		wm, wv := m.posterior(u, false, nil, nil)
		if !near(mean[i], wm, 1e-10) || math.Abs(variance[i]-wv) > 1e-12*m.scale {
			t.Errorf("point %d: posteriors %v, %v; posterior %v, %v", i, mean[i], variance[i], wm, wv)
		}
	}
}

// The box-bounded L-BFGS must end at the constrained minimum of a
// quadratic whose unconstrained one lies outside the box: on the bound in
// the dims the gradient pushes out, at the free minimum in the others.
func TestMinimizeBoxStopsOnTheBounds(t *testing.T) {
	// f(x) = Σ c_j (x_j − m_j)², with m outside [0, 1] in dims 0 and 2.
	c := []float64{1, 10, 0.5, 3}
	m := []float64{-0.5, 0.3, 2, 0.7}
	f := func(x, grad []float64) float64 {
		var v float64
		for j := range x {
			v += c[j] * (x[j] - m[j]) * (x[j] - m[j])
			grad[j] = 2 * c[j] * (x[j] - m[j])
		}
		return v
	}
	lo, hi := []float64{0, 0, 0, 0}, []float64{1, 1, 1, 1}
	x, v, iters := minimizeBox(f, []float64{0.9, 0.9, 0.1, 0.1}, lo, hi, 1e-8, 200)
	want := []float64{0, 0.3, 1, 0.7}
	if x[0] != 0 || x[2] != 1 || math.Abs(x[1]-want[1]) > 1e-6 || math.Abs(x[3]-want[3]) > 1e-6 || iters == 0 {
		t.Errorf("minimizeBox = %v (f %v, %d iterations), want %v", x, v, iters, want)
	}
}
