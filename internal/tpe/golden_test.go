package tpe

import (
	"math"
	"slices"
	"testing"

	"github.com/tunejet/tunejet/internal/search"
)

// The golden tests check the split, the Parzen mixtures and the
// log l − log g scores against fixtures computed by hand from Optuna's
// formulas (reference: schedulers-searchers.md, "Optuna TPE"). Densities
// are recomputed here from the definition of the truncated normal with
// math.Erf, independently of truncnorm.go.

const tol = 1e-9

func near(a, b float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b))
}

func checkAll(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for i := range got {
		if !near(got[i], want[i]) {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

// Phi is the standard normal CDF, from its definition.
func Phi(z float64) float64 { return (1 + math.Erf(z/math.Sqrt2)) / 2 }

// truncPdf is the density at x of N(mu, sigma) truncated to [a, b].
func truncPdf(x, mu, sigma, a, b float64) float64 {
	z := (x - mu) / sigma
	phi := math.Exp(-z*z/2) / math.Sqrt(2*math.Pi)
	return phi / sigma / (Phi((b-mu)/sigma) - Phi((a-mu)/sigma))
}

// truncMass is the mass of [lo, hi] under N(mu, sigma) truncated to [a, b].
func truncMass(lo, hi, mu, sigma, a, b float64) float64 {
	return (Phi((hi-mu)/sigma) - Phi((lo-mu)/sigma)) / (Phi((b-mu)/sigma) - Phi((a-mu)/sigma))
}

func TestDefaultGammaAndWeights(t *testing.T) {
	// min(ceil(0.1 n), 25)
	for n, want := range map[int]int{0: 0, 1: 1, 10: 1, 11: 2, 100: 10, 241: 25, 1000: 25} {
		if got := DefaultGamma(n); got != want {
			t.Errorf("DefaultGamma(%d) = %d, want %d", n, got, want)
		}
	}
	// min(ceil(0.25 sqrt(n)), 25): sqrt(16) = 4 -> 1; sqrt(17) = 4.12 -> ceil(1.03) = 2
	for n, want := range map[int]int{0: 0, 16: 1, 17: 2, 10001: 25} {
		if got := HyperoptGamma(n); got != want {
			t.Errorf("HyperoptGamma(%d) = %d, want %d", n, got, want)
		}
	}
	checkAll(t, "DefaultWeights(3)", DefaultWeights(3), []float64{1, 1, 1})
	// n = 30: linspace(1/30, 1, 5) steps by (1 − 1/30)/4 = 29/120, then 25 ones.
	want := []float64{1.0 / 30, 1.0/30 + 29.0/120, 1.0/30 + 58.0/120, 1.0/30 + 87.0/120, 1}
	for range 25 {
		want = append(want, 1)
	}
	checkAll(t, "DefaultWeights(30)", DefaultWeights(30), want)
	// n = 26: linspace(1/26, 1, 1) = [1/26].
	checkAll(t, "DefaultWeights(26)[:2]", DefaultWeights(26)[:2], []float64{1.0 / 26, 1})
}

// numbers are the trial numbers at positions in trials.
func numbers(trials []Trial, positions []int) []int {
	var out []int
	for _, i := range positions {
		out = append(out, trials[i].Number)
	}
	return out
}

// splitAll splits every trial of history.
func splitAll(history []Trial, nBelow int, maximize bool) (below, above []int) {
	all := make([]int, len(history))
	for i := range all {
		all[i] = i
	}
	return split(history, all, nBelow, maximize)
}

func TestSplit(t *testing.T) {
	history := []Trial{
		{Number: 0, State: Complete, Value: 3},
		{Number: 1, State: Pruned, Step: 5, Value: 1},
		{Number: 2, State: Complete, Value: 1},
		{Number: 3, State: Running},
		{Number: 4, State: Pruned, Step: 7, Value: 4},
		{Number: 5, State: Complete, Value: 2},
		{Number: 6, State: Pruned, Step: 7, Value: 2},
		{Number: 7, State: Pruned}, // reported nothing: score (1, 0)
		{Number: 8, State: Complete, Value: 1},
		{Number: 9, State: Pruned, Step: 7, Value: math.NaN()},
	}
	// Complete by value: 2 (1), 8 (1, a tie kept in trial order), 5 (2), 0 (3).
	// Pruned by (−step, value), NaN as +inf: 6 (−7, 2), 4 (−7, 4), 9 (−7, inf),
	// 1 (−5, 1), 7 (1, 0). Maximizing, by (−step, −value): 4, 6, 9, 1, 7.
	tests := []struct {
		nBelow   int
		maximize bool
		below    []int
	}{
		{0, false, nil},
		{2, false, []int{2, 8}},
		{4, false, []int{0, 2, 5, 8}},
		{5, false, []int{0, 2, 5, 6, 8}},
		{7, false, []int{0, 2, 4, 5, 6, 8, 9}},
		{9, false, []int{0, 1, 2, 4, 5, 6, 7, 8, 9}},
		{20, false, []int{0, 1, 2, 4, 5, 6, 7, 8, 9}},
		{2, true, []int{0, 5}},
		{5, true, []int{0, 2, 4, 5, 8}},
		{6, true, []int{0, 2, 4, 5, 6, 8}},
	}
	for _, tt := range tests {
		below, above := splitAll(history, tt.nBelow, tt.maximize)
		if got := numbers(history, below); !slices.Equal(got, tt.below) {
			t.Errorf("nBelow %d maximize %t: below %v, want %v", tt.nBelow, tt.maximize, got, tt.below)
		}
		var wantAbove []int
		for i := range 10 {
			if !slices.Contains(tt.below, i) {
				wantAbove = append(wantAbove, i) // Running trial 3 always
			}
		}
		if got := numbers(history, above); !slices.Equal(got, wantAbove) {
			t.Errorf("nBelow %d maximize %t: above %v, want %v", tt.nBelow, tt.maximize, got, wantAbove)
		}
	}
}

// dimOf models the only domain of space.
func dimOf(t *testing.T, space map[string]any, est Estimator) *dim {
	t.Helper()
	s, err := search.ParseSpace(space)
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDim(0, s.Domains()[0], est)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func column(xs ...float64) [][]float64 {
	rows := make([][]float64, len(xs))
	for i, x := range xs {
		rows[i] = []float64{x}
	}
	return rows
}

func opts(est Estimator, change func(*Options)) params {
	o := Defaults()
	o.Multivariate, o.Estimator = false, est
	if change != nil {
		change(&o)
	}
	return params{opts: &o, nParams: 1}
}

func TestParzenNumeric(t *testing.T) {
	unit := map[string]any{"x": map[string]any{"uniform": []any{0, 1}}}
	noClip := func(o *Options) { o.ConsiderMagicClip = false }
	endpoints := func(o *Options) { o.ConsiderEndpoints = true }
	noClipEndpoints := func(o *Options) { o.ConsiderMagicClip, o.ConsiderEndpoints = false, true }
	tests := []struct {
		name   string
		est    Estimator
		change func(*Options)
		obs    []float64
		sigmas []float64 // of the observations; the prior's is the span, 1
	}{
		// Optuna 4.5: the neighbours include the prior's mean 0.5.
		// sorted with the ends: 0 | .1 .3 .5 .8 | 1
		// .1: max(.1, .2) = .2 (first: inner gap only, .2); .3: max(.2, .2) = .2;
		// .8: max(.3, .2) = .3 (last: inner gap only, .3).
		// clip: [1/min(100, 3+2), 1] = [.2, 1].
		{"optuna4", Optuna4, nil, []float64{0.1, 0.3, 0.8}, []float64{0.2, 0.2, 0.3}},
		// 0 | .4 .5 .55 .7 | 1: .4: max(.4, .1), inner .1; .55: max(.05, .15) = .15;
		// .7: max(.15, .3), inner .15.
		{"optuna4 no clip", Optuna4, noClip, []float64{0.4, 0.55, 0.7}, []float64{0.1, 0.15, 0.15}},
		{"optuna4 endpoints no clip", Optuna4, noClipEndpoints, []float64{0.4, 0.55, 0.7}, []float64{0.4, 0.15, 0.3}},
		// clipped up to .2: .4 -> .4, .15 -> .2, .3 -> .3
		{"optuna4 endpoints", Optuna4, endpoints, []float64{0.4, 0.55, 0.7}, []float64{0.4, 0.2, 0.3}},
		// Optuna 5: the observations only. 0 | .4 .55 .7 | 1: .4: inner .15;
		// .55: max(.15, .15); .7: inner .15.
		{"optuna5 no clip", Optuna5, noClip, []float64{0.4, 0.55, 0.7}, []float64{0.15, 0.15, 0.15}},
		{"optuna5 endpoints no clip", Optuna5, noClipEndpoints, []float64{0.4, 0.55, 0.7}, []float64{0.4, 0.15, 0.3}},
		{"optuna5", Optuna5, nil, []float64{0.4, 0.55, 0.7}, []float64{0.2, 0.2, 0.2}},
		// One observation: no inner gap to use, so max(.3, .7) in both.
		{"optuna5 one", Optuna5, noClip, []float64{0.3}, []float64{0.7}},
		// 0 | .3 .5 | 1, two values: first and last look inwards, .2 each.
		{"optuna4 one", Optuna4, noClip, []float64{0.3}, []float64{0.2}},
	}
	d := dimOf(t, unit, Optuna4)
	for _, tt := range tests {
		e := newEstimator([]*dim{d}, column(tt.obs...), opts(tt.est, tt.change))
		k := e.kernels[0]
		n := float64(len(tt.obs))
		checkAll(t, tt.name+" weights", e.weights, slices.Repeat([]float64{1 / (n + 1)}, len(tt.obs)+1))
		checkAll(t, tt.name+" mus", k.mus, append(slices.Clone(tt.obs), 0.5))
		checkAll(t, tt.name+" sigmas", k.sigmas, append(slices.Clone(tt.sigmas), 1))
	}
}

func TestParzenMultivariateOptuna4(t *testing.T) {
	d := dimOf(t, map[string]any{"x": map[string]any{"uniform": []any{0, 2}}}, Optuna4)
	p := opts(Optuna4, func(o *Options) { o.Multivariate = true })
	p.nParams = 2
	e := newEstimator([]*dim{d}, column(0.5, 1, 1.5), p)
	// 0.2 · n^(−1/(d+4)) · span = 0.2 · 3^(−1/6) · 2 = 0.33306..., above the clip 2/5.
	s := 0.2 * math.Pow(3, -1.0/6) * 2
	if s < 0.4 {
		s = 0.4
	}
	checkAll(t, "sigmas", e.kernels[0].sigmas, []float64{s, s, s, 2})
	// Without the clip, Scott's value stays.
	p.opts.ConsiderMagicClip = false
	e = newEstimator([]*dim{d}, column(0.5, 1, 1.5), p)
	s = 0.2 * math.Pow(3, -1.0/6) * 2
	checkAll(t, "sigmas without clip", e.kernels[0].sigmas, []float64{s, s, s, 2})
}

func TestParzenIntLogCategorical(t *testing.T) {
	// randint [0, 10): values 0..9, step 1; the ends are −0.5 and 9.5, the span 10.
	// Optuna 4.5, observations 2, 5, 5 and the prior's mean 4.5:
	// −.5 | 2 4.5 5 5 | 9.5: 2: inner 2.5; 5 (first): max(.5, 0) = .5;
	// 5 (second, last): inner 0. Clip to [10/5, 10]: 2.5, 2, 2.
	d := dimOf(t, map[string]any{"n": map[string]any{"randint": []any{0, 10}}}, Optuna4)
	e := newEstimator([]*dim{d}, column(2, 5, 5), opts(Optuna4, nil))
	checkAll(t, "int mus", e.kernels[0].mus, []float64{2, 5, 5, 4.5})
	checkAll(t, "int sigmas", e.kernels[0].sigmas, []float64{2.5, 2, 2, 10})

	// loguniform [1e-3, 1] in log space: [−3 ln10, 0], prior mean −1.5 ln10.
	// Observations .01 and .1: −2 ln10 and −ln10.
	// Optuna 4.5 without clip: −3 | −2 −1.5 −1 | 0 (in ln10): both look inwards, .5 ln10.
	// With the clip: span/min(100, 4) = .75 ln10 for both.
	ln10 := math.Ln10
	d = dimOf(t, map[string]any{"lr": map[string]any{"loguniform": []any{1e-3, 1}}}, Optuna4)
	e = newEstimator([]*dim{d}, column(math.Log(0.01), math.Log(0.1)), opts(Optuna4, func(o *Options) { o.ConsiderMagicClip = false }))
	checkAll(t, "log mus", e.kernels[0].mus, []float64{-2 * ln10, -ln10, -1.5 * ln10})
	checkAll(t, "log sigmas no clip", e.kernels[0].sigmas, []float64{0.5 * ln10, 0.5 * ln10, 3 * ln10})
	e = newEstimator([]*dim{d}, column(math.Log(0.01), math.Log(0.1)), opts(Optuna4, nil))
	checkAll(t, "log sigmas", e.kernels[0].sigmas, []float64{0.75 * ln10, 0.75 * ln10, 3 * ln10})

	// choice of 3, observations a, c, c, prior weight 1: 4 kernels; each row
	// 1/4 everywhere, +1 at its choice, normalized by 1.75; the prior uniform.
	d = dimOf(t, map[string]any{"c": map[string]any{"choice": []any{"a", "b", "c"}}}, Optuna4)
	e = newEstimator([]*dim{d}, column(0, 2, 2), opts(Optuna4, nil))
	want := [][]float64{{5.0 / 7, 1.0 / 7, 1.0 / 7}, {1.0 / 7, 1.0 / 7, 5.0 / 7}, {1.0 / 7, 1.0 / 7, 5.0 / 7}, {1.0 / 3, 1.0 / 3, 1.0 / 3}}
	for i, row := range e.kernels[0].probs {
		checkAll(t, "categorical row", row, want[i])
	}
	// prior weight 2, one observation: 2 kernels; rows 2/2 everywhere,
	// +1 at a: (2, 1, 1)/4.
	e = newEstimator([]*dim{d}, column(0), opts(Optuna4, func(o *Options) { o.PriorWeight = 2 }))
	checkAll(t, "categorical row, prior 2", e.kernels[0].probs[0], []float64{0.5, 0.25, 0.25})
	// mixture weights: 1 per observation and 2 for the prior, over 3.
	checkAll(t, "weights, prior 2", e.weights, []float64{1.0 / 3, 2.0 / 3})
	// No observation: the prior alone, uniform.
	e = newEstimator([]*dim{d}, nil, opts(Optuna4, nil))
	checkAll(t, "weights, none", e.weights, []float64{1})
	checkAll(t, "categorical prior", e.kernels[0].probs[0], []float64{1.0 / 3, 1.0 / 3, 1.0 / 3})
}

func TestMixtureWeights(t *testing.T) {
	d := dimOf(t, map[string]any{"x": map[string]any{"uniform": []any{0, 1}}}, Optuna4)
	obs := make([]float64, 26)
	for i := range obs {
		obs[i] = float64(i) / 26
	}
	e := newEstimator([]*dim{d}, column(obs...), opts(Optuna4, nil))
	// DefaultWeights(26) = [1/26, 1 × 25], plus the prior's 1: sum 26 + 1/26.
	sum := 26 + 1.0/26
	if !near(e.weights[0], (1.0/26)/sum) || !near(e.weights[1], 1/sum) || !near(e.weights[26], 1/sum) {
		t.Errorf("weights %v", e.weights)
	}
}

// TestScores checks log l(x) − log g(x) on a history split by hand.
func TestScores(t *testing.T) {
	space := map[string]any{
		"x":  map[string]any{"uniform": []any{0, 1}},
		"n":  map[string]any{"randint": []any{0, 10}},
		"lr": map[string]any{"loguniform": []any{1e-3, 1}},
		"c":  map[string]any{"choice": []any{"a", "b", "c"}},
		"k":  map[string]any{"lograndint": []any{1, 100}},
	}
	cfg := func(x float64, n int, lr float64, c string, k int) map[string]any {
		return map[string]any{"x": x, "n": n, "lr": lr, "c": c, "k": k}
	}
	history := []Trial{
		{Number: 0, State: Complete, Value: 5, Config: cfg(0.1, 2, 0.01, "a", 3)},
		{Number: 1, State: Complete, Value: 1, Config: cfg(0.3, 5, 0.1, "c", 10)},
		{Number: 2, State: Complete, Value: 3, Config: cfg(0.8, 5, 0.5, "c", 50)},
		{Number: 3, State: Running, Config: cfg(0.6, 9, 0.002, "b", 99)},
	}
	// n = 3 finished; gamma(3) = 1: below = {1}, above = {0, 2, 3} (liar).
	below, above := splitAll(history, DefaultGamma(3), false)
	if !slices.Equal(numbers(history, below), []int{1}) || !slices.Equal(numbers(history, above), []int{0, 2, 3}) {
		t.Fatalf("split %v / %v", numbers(history, below), numbers(history, above))
	}
	for _, est := range []Estimator{Optuna4, Optuna5} {
		s, err := search.ParseSpace(space)
		if err != nil {
			t.Fatal(err)
		}
		o := Defaults()
		o.Multivariate, o.Estimator = false, est
		smp, err := New(s, o)
		if err != nil {
			t.Fatal(err)
		}
		p := params{opts: &smp.opts, nParams: len(smp.modeled)}
		byKey := map[string]*dim{}
		for _, d := range smp.dims {
			byKey[d.domain.Path[0]] = d
		}
		score := func(key string, x float64) float64 {
			d := byKey[key]
			values := modelValues(smp.dims, history)
			l := newEstimator([]*dim{d}, observe([]*dim{d}, values, below), p)
			g := newEstimator([]*dim{d}, observe([]*dim{d}, values, above), p)
			return l.logPdf([]float64{x}) - g.logPdf([]float64{x})
		}

		// x, uniform [0, 1]. below: .3 and the prior (.5, 1), weights 1/2 each.
		// Optuna 4.5 sigma of .3: 0 | .3 .5 | 1, inner gap .2, clip [1/3, 1] -> 1/3.
		// Optuna 5: 0 | .3 | 1, max(.3, .7) = .7.
		// above: .1 .6 .8 and the prior, weights 1/4 each.
		// Optuna 4.5: 0 | .1 .5 .6 .8 | 1: .1 inner .4; .6: max(.1, .2) = .2; .8 inner .2;
		// clip [1/5, 1]: .4, .2, .2.
		// Optuna 5: 0 | .1 .6 .8 | 1: .1 inner .5; .6: max(.5, .2) = .5; .8 inner .2.
		sb, sa := []float64{1.0 / 3}, []float64{0.4, 0.2, 0.2}
		if est == Optuna5 {
			sb, sa = []float64{0.7}, []float64{0.5, 0.5, 0.2}
		}
		for _, x := range []float64{0.05, 0.3, 0.72} {
			l := (truncPdf(x, 0.3, sb[0], 0, 1) + truncPdf(x, 0.5, 1, 0, 1)) / 2
			g := (truncPdf(x, 0.1, sa[0], 0, 1) + truncPdf(x, 0.6, sa[1], 0, 1) + truncPdf(x, 0.8, sa[2], 0, 1) + truncPdf(x, 0.5, 1, 0, 1)) / 4
			if got, want := score("x", x), math.Log(l)-math.Log(g); !near(got, want) {
				t.Errorf("%s: score x=%v: %v, want %v", est, x, got, want)
			}
		}

		// n, randint [0, 10): step 1, ends −.5 and 9.5, span 10, prior (4.5, 10).
		// below: 5. Optuna 4.5: −.5 | 4.5 5 | 9.5, 5 is last: inner .5; clip [10/3, 10].
		// Optuna 5: −.5 | 5 | 9.5: max(5.5, 4.5) = 5.5.
		// above: 2, 5, 9. Optuna 4.5: −.5 | 2 4.5 5 9 | 9.5: 2 inner 2.5; 5: max(.5, 4) = 4;
		// 9 inner 4; clip [2, 10]: 2.5, 4, 4.
		// Optuna 5: −.5 | 2 5 9 | 9.5: 2 inner 3; 5: max(3, 4) = 4; 9 inner 4.
		sb, sa = []float64{10.0 / 3}, []float64{2.5, 4, 4}
		if est == Optuna5 {
			sb, sa = []float64{5.5}, []float64{3, 4, 4}
		}
		mass := func(x, mu, s float64) float64 { return truncMass(x-0.5, x+0.5, mu, s, -0.5, 9.5) }
		for _, x := range []float64{0, 4, 9} {
			l := (mass(x, 5, sb[0]) + mass(x, 4.5, 10)) / 2
			g := (mass(x, 2, sa[0]) + mass(x, 5, sa[1]) + mass(x, 9, sa[2]) + mass(x, 4.5, 10)) / 4
			if got, want := score("n", x), math.Log(l)-math.Log(g); !near(got, want) {
				t.Errorf("%s: score n=%v: %v, want %v", est, x, got, want)
			}
		}

		// lr, loguniform [1e-3, 1], in units of ln10: range [−3, 0], span 3,
		// prior (−1.5, 3). below: ln .1 = −1. Optuna 4.5: −3 | −1.5 −1 | 0:
		// inner .5, clip [1, 3] -> 1. Optuna 5: −3 | −1 | 0: max(2, 1) = 2.
		// above: .01, .5, .002: −2, ln .5/ln10 = −.30103, ln .002/ln10 = −2.69897.
		// Optuna 4.5: −3 | −2.699 −2 −1.5 −.301 | 0: −2.699 inner .699;
		// −2: max(.699, .5) = .699; −.301 inner 1.199; clip [.6, 3].
		// Optuna 5: −3 | −2.699 −2 −.301 | 0: −2.699 inner .699; −2: max(.699, 1.699);
		// −.301 inner 1.699.
		ln10 := math.Ln10
		a1, a2 := math.Log(0.5)/ln10, math.Log(0.002)/ln10
		// In trial order (.01, .5, .002):
		sb, sa = []float64{1}, []float64{-2 - a2, a1 + 1.5, -2 - a2}
		if est == Optuna5 {
			sb, sa = []float64{2}, []float64{a1 + 2, a1 + 2, -2 - a2}
		}
		for _, lr := range []float64{0.0015, 0.1, 0.7} {
			x := math.Log(lr) / ln10
			pdf := func(mu, s float64) float64 { return truncPdf(x, mu, s, -3, 0) }
			l := (pdf(-1, sb[0]) + pdf(-1.5, 3)) / 2
			g := (pdf(-2, sa[0]) + pdf(a1, sa[1]) + pdf(a2, sa[2]) + pdf(-1.5, 3)) / 4
			// Densities in units of ln10 are ln10 times those in nats: it cancels.
			if got, want := score("lr", math.Log(lr)), math.Log(l)-math.Log(g); !near(got, want) {
				t.Errorf("%s: score lr=%v: %v, want %v", est, lr, got, want)
			}
		}

		// c: below c (index 2): 2 kernels, (1/2, 1/2, 3/2)/2.5 and uniform;
		// above a, c, b: 4 kernels, (1/4 each +1)/1.75 and uniform.
		for ci, want := range []float64{
			math.Log((0.2+1.0/3)/2) - math.Log((5.0/7+1.0/7+1.0/7+1.0/3)/4),
			math.Log((0.2+1.0/3)/2) - math.Log((1.0/7+1.0/7+5.0/7+1.0/3)/4),
			math.Log((0.6+1.0/3)/2) - math.Log((1.0/7+5.0/7+1.0/7+1.0/3)/4),
		} {
			if got := score("c", float64(ci)); !near(got, want) {
				t.Errorf("%s: score c=%d: %v, want %v", est, ci, got, want)
			}
		}

		// k, lograndint [1, 100): values 1..99; log bounds ln .5 and ln 99.5.
		lo, hi := math.Log(0.5), math.Log(99.5)
		span := hi - lo
		mid := (lo + hi) / 2
		b := math.Log(10)
		ab := []float64{math.Log(3), math.Log(50), math.Log(99)}
		// Optuna 4.5 below: lo | mid b | hi with b > mid (ln 10 = 2.303 > 1.954):
		// b is last, inner b − mid; clip [span/3, span].
		// Optuna 5 below: lo | b | hi: max(b − lo, hi − b).
		sbk := max(b-mid, span/3)
		// Optuna 4.5 above: lo | ln3 mid ln50 ln99 | hi: ln3 inner mid − ln3;
		// ln50: max(ln50 − mid, ln99 − ln50); ln99 inner ln99 − ln50; clip span/5.
		// Optuna 5 above: lo | ln3 ln50 ln99 | hi: ln3 inner ln50 − ln3; ln50:
		// max(ln50 − ln3, ln99 − ln50); ln99 inner ln99 − ln50.
		sak := []float64{max(mid-ab[0], span/5), max(ab[1]-mid, ab[2]-ab[1], span/5), max(ab[2]-ab[1], span/5)}
		if est == Optuna5 {
			sbk = max(b-lo, hi-b, span/3)
			sak = []float64{max(ab[1]-ab[0], span/5), max(ab[1]-ab[0], ab[2]-ab[1], span/5), max(ab[2]-ab[1], span/5)}
		}
		for _, k := range []float64{1, 7, 99} {
			// Optuna 4.5 (its log-integer hack): the density at ln k.
			kern := func(mu, s float64) float64 { return truncPdf(math.Log(k), mu, s, lo, hi) }
			if est == Optuna5 { // the mass of [ln(k − .5), ln(k + .5)]
				kern = func(mu, s float64) float64 { return truncMass(math.Log(k-0.5), math.Log(k+0.5), mu, s, lo, hi) }
			}
			l := (kern(b, sbk) + kern(mid, span)) / 2
			g := (kern(ab[0], sak[0]) + kern(ab[1], sak[1]) + kern(ab[2], sak[2]) + kern(mid, span)) / 4
			if got, want := score("k", math.Log(k)), math.Log(l)-math.Log(g); !near(got, want) {
				t.Errorf("%s: score k=%v: %v, want %v", est, k, got, want)
			}
		}
	}
}
