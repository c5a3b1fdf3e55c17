package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// branin is the Branin-Hoo function; its minimum is 0.397887.
func branin(x1, x2 float64) float64 {
	const a, r, s = 1.0, 6.0, 10.0
	b := 5.1 / (4 * math.Pi * math.Pi)
	c := 5 / math.Pi
	tt := 1 / (8 * math.Pi)
	d := x2 - b*x1*x1 + c*x1 - r
	return a*d*d + s*(1-tt)*math.Cos(x1) + s
}

// curve is the learning curve of the ASHA benchmark: Branin plus a term
// that decays with the epoch t and is larger for larger x2, so that ranks
// cross as training goes on.
func curve(x1, x2, t float64) float64 { return branin(x1, x2) + 20*(1+x2/15)*math.Pow(t, -0.7) }

// curveMin is min over x of curve(x, 81) on a 0.005 grid, refined to the
// best grid point's neighbourhood on a 0.0001 grid.
func curveMin() float64 {
	best, b1, b2 := math.Inf(1), 0.0, 0.0
	for i := 0; i <= 3000; i++ {
		for j := 0; j <= 3000; j++ {
			x1, x2 := -5+float64(i)*0.005, float64(j)*0.005
			if v := curve(x1, x2, 81); v < best {
				best, b1, b2 = v, x1, x2
			}
		}
	}
	for i := -100; i <= 100; i++ {
		for j := -100; j <= 100; j++ {
			x1, x2 := b1+float64(i)*0.0001, b2+float64(j)*0.0001
			if x1 >= -5 && x1 <= 10 && x2 >= 0 && x2 <= 15 {
				best = min(best, curve(x1, x2, 81))
			}
		}
	}
	return best
}

func sampleX(r *rand.Rand) (float64, float64) { return -5 + 15*r.Float64(), 15 * r.Float64() }

// ashaRun spends budget epochs on ASHA (max_t 81, rf 3, grace 1, one
// bracket, minimising the curve) sequentially: one trial at a time, each
// reporting epochs 1, 2, ... until ASHA stops it at a rung or at max_t, or
// the budget runs out; a stopped trial is then completed, as a controller
// completes it, which records its final result at the top rung. It
// returns the best curve(x, 81) among trials that reached max_t, the best
// value reported at any epoch, and how many configs it tried.
func ashaRun(t testing.TB, r *rand.Rand, budget int) (final, seen float64, tried int) {
	cfg := DefaultASHAConfig()
	cfg.Objective = Objective{Metric: "loss", Mode: Min}
	cfg.MaxT, cfg.ReductionFactor, cfg.GracePeriod = 81, 3, 1
	a, err := NewASHA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	final, seen = math.Inf(1), math.Inf(1)
	spent := 0
	for spent < budget {
		tried++
		id := fmt.Sprint(tried)
		x1, x2 := sampleX(r)
		a.Add(id, nil)
		for epoch := 1.0; spent < budget; epoch++ {
			spent++
			loss := curve(x1, x2, epoch)
			seen = min(seen, loss)
			res := Result{Trial: id, Metrics: map[string]float64{"training_iteration": epoch, "loss": loss}}
			if a.Result(res, Context{})[0].Action == Stop {
				a.Complete(res)
				if epoch >= 81 {
					final = min(final, loss)
				}
				break
			}
		}
	}
	return final, seen, tried
}

// randomRun trains n random configs to epoch 81 and returns the best.
func randomRun(r *rand.Rand, n int) float64 {
	best := math.Inf(1)
	for range n {
		x1, x2 := sampleX(r)
		best = min(best, curve(x1, x2, 81))
	}
	return best
}

// TestASHARegret is the ASHA benchmark of the reference: median simple
// regret [IQR] over 50 seeds at a budget of 50 full trials (4050 epochs),
// against random search at the same budget. It takes a few seconds; run it
// with TUNEJET_REGRET=1 go test -v -run ASHARegret ./internal/sched.
func TestASHARegret(t *testing.T) {
	if os.Getenv("TUNEJET_REGRET") != "1" {
		t.Skip("set TUNEJET_REGRET=1 to run the ASHA regret benchmark")
	}
	fStar := curveMin()
	t.Logf("min_x curve(x, 81) = %.5f (reference: 1.45955)", fStar)
	const seeds, full = 50, 50
	var asha, ashaSeen, random, tried []float64
	for seed := range uint64(seeds) {
		final, seen, n := ashaRun(t, rand.New(rand.NewPCG(seed, 1)), full*81)
		asha = append(asha, final-fStar)
		ashaSeen = append(ashaSeen, seen-fStar)
		tried = append(tried, float64(n))
		random = append(random, randomRun(rand.New(rand.NewPCG(seed, 2)), full)-fStar)
	}
	q := func(xs []float64) string {
		p25, _ := nanPercentile(xs, 25)
		p50, _ := nanPercentile(xs, 50)
		p75, _ := nanPercentile(xs, 75)
		return fmt.Sprintf("%.3f [%.3f, %.3f]", p50, p25, p75)
	}
	med, _ := median(tried)
	t.Logf("budget %d full trials (%d epochs), %d seeds, median regret [IQR]:", full, full*81, seeds)
	t.Logf("  random search:                      %s (reference 0.987 [0.444, 1.830])", q(random))
	t.Logf("  ASHA, best trial trained to max_t:  %s (reference 0.068 [0.034, 0.127]), configs tried median %.0f (reference 793)", q(asha), med)
	t.Logf("  ASHA, best value at any epoch:      %s", q(ashaSeen))
	if m, _ := median(asha); m >= func() float64 { r, _ := median(random); return r }() {
		t.Errorf("ASHA's median regret %.3f is not below random search's", m)
	}
	if slices.ContainsFunc(asha, func(v float64) bool { return math.IsInf(v, 1) }) {
		t.Errorf("a seed trained no trial to max_t")
	}
}

// BenchmarkASHAResult measures a result that reaches a rung where 10,000
// (and a few more, one per iteration) trials are recorded.
func BenchmarkASHAResult(b *testing.B) {
	cfg := DefaultASHAConfig()
	cfg.Objective = Objective{Metric: "m", Mode: Max}
	a, err := NewASHA(cfg)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 10000 {
		id := fmt.Sprint("r", i)
		a.Add(id, nil)
		a.Result(Result{Trial: id, Metrics: map[string]float64{"training_iteration": 1, "m": r.Float64()}}, Context{})
	}
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprint("x", i)
		a.Add(id, nil)
		a.Result(Result{Trial: id, Metrics: map[string]float64{"training_iteration": 1, "m": r.Float64()}}, Context{})
		a.Remove(id)
	}
}
