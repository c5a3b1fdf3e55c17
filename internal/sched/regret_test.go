package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/tunejet/tunejet/internal/regret"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/tpe"
)

// curve is the learning curve of the ASHA benchmark: Branin plus a term
// that decays with the epoch t and is larger for larger x2, so that ranks
// cross as training goes on.
func curve(x1, x2, t float64) float64 {
	return regret.BraninXY(x1, x2) + 20*(1+x2/15)*math.Pow(t, -0.7)
}

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
// bracket, minimising the curve) with inFlight trials running at once. Each
// epoch goes to one running trial (the next in line; with more than one in
// flight, one drawn from order, as workers finish epochs in no fixed order),
// which reports it; ASHA stops it at a rung or at max_t, and a stopped
// trial is completed, as a controller completes it, which records its
// final result at the top rung. A free slot starts a new trial whose config
// comes from next, given every trial so far as TPE sees them (tpeHistory in
// the controller: finished, pruned at their step, or running). It returns
// the best curve(x, 81) among trials that reached max_t and how many
// configs it tried. With one in flight it is the reference's sequential
// loop.
func ashaRun(t testing.TB, next func(history []tpe.Trial) (x1, x2 float64), budget, inFlight int, order *rand.Rand) (final float64, tried int) {
	cfg := DefaultASHAConfig()
	cfg.Objective = Objective{Metric: "loss", Mode: Min}
	cfg.MaxT, cfg.ReductionFactor, cfg.GracePeriod = 81, 3, 1
	a, err := NewASHA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	type live struct {
		number        int
		x1, x2, epoch float64
	}
	final = math.Inf(1)
	var history []tpe.Trial
	var running []*live
	for spent := 0; spent < budget; spent++ {
		for len(running) < inFlight {
			x1, x2 := next(history)
			history = append(history, tpe.Trial{Number: tried, State: tpe.Running, Config: map[string]any{"x1": x1, "x2": x2}})
			a.Add(fmt.Sprint(tried), nil)
			running = append(running, &live{number: tried, x1: x1, x2: x2})
			tried++
		}
		i := 0
		if inFlight > 1 {
			i = order.IntN(len(running))
		}
		tr := running[i]
		tr.epoch++
		loss := curve(tr.x1, tr.x2, tr.epoch)
		res := Result{Trial: fmt.Sprint(tr.number), Metrics: map[string]float64{"training_iteration": tr.epoch, "loss": loss}}
		if a.Result(res, Context{})[0].Action != Stop {
			continue
		}
		a.Complete(res)
		h := &history[tr.number]
		h.State, h.Value = tpe.Complete, loss
		if tr.epoch >= 81 {
			final = min(final, loss)
		} else {
			h.State, h.Step = tpe.Pruned, int(tr.epoch)
		}
		running = slices.Delete(running, i, i+1)
	}
	return final, tried
}

// randomConfigs draws every config uniformly from r.
func randomConfigs(r *rand.Rand) func([]tpe.Trial) (float64, float64) {
	return func([]tpe.Trial) (float64, float64) { return sampleX(r) }
}

// tpeConfigs suggests with TPE's defaults over the curve's domain, each
// suggestion from the generator a controller seeds for it.
func tpeConfigs(t testing.TB, seed uint64) func([]tpe.Trial) (float64, float64) {
	space, err := search.ParseSpace(map[string]any{
		"x1": map[string]any{"uniform": []any{-5.0, 10.0}},
		"x2": map[string]any{"uniform": []any{0.0, 15.0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := tpe.New(space, tpe.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	return func(history []tpe.Trial) (float64, float64) {
		c := s.Suggest(history, rand.New(rand.NewPCG(seed, uint64(len(history)))))
		return c["x1"].(float64), c["x2"].(float64)
	}
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

// medianCI is the distribution-free 95% confidence interval of the
// median: the order statistics x(j) and x(n+1-j), with j the largest such
// that P(Binomial(n, 1/2) < j) <= 2.5% (for 30 values x(10) and x(21)).
func medianCI(values []float64) (lo, hi float64) {
	xs := slices.Sorted(slices.Values(values))
	n := len(xs)
	j, p := 0, math.Pow(0.5, float64(n)) // p = P(B = j)
	for cum := p; cum <= 0.025; cum += p {
		j++
		p *= float64(n-j+1) / float64(j)
	}
	if j == 0 {
		return math.Inf(-1), math.Inf(1)
	}
	return xs[j-1], xs[n-j]
}

// TestASHARegret is the ASHA benchmark of the reference: median simple
// regret [IQR] over 30 seeds at a budget of 50 full trials (4050 epochs),
// against random search at the same budget, with random and with TPE
// configs. Run it with
// TUNEJET_REGRET=1 go test -v -run ASHARegret ./internal/sched.
//
// The reference's figures (0.068 [0.034, 0.127], 793 configs tried) are
// from 50 seeds. ASHA here decides as Ray's _Bracket does on every result
// (TestASHAMatchesRay), and the loop spends and counts epochs as the
// reference describes (sequential, one bracket, equal epoch budget), so
// the two differ by their seeds only. The spread between seed sets is
// wide: six disjoint sets of 50 seeds gave a median of 718 to 820 configs
// tried and a median regret of 0.066 to 0.121; over 2,000 seeds the medians
// are 800 configs [671, 932] and regret 0.075 [0.037, 0.149]. Random
// search shows the same spread: its median regret at 50 configs is 0.92
// (the 1.4th percentile of curve(x, 81) - f* over 2,000,000 draws), between
// the reference's 0.987 and the 0.667 of these 30 seeds.
//
// Beside it runs the same loop with TPE's defaults choosing the configs
// (search_alg tpe with scheduler asha): TPE learns from the trials ASHA
// pruned, as the controller's tpeHistory passes them, so ASHA decides by
// the same rule on better configs.
func TestASHARegret(t *testing.T) {
	if os.Getenv("TUNEJET_REGRET") != "1" {
		t.Skip("set TUNEJET_REGRET=1 to run the ASHA regret benchmark")
	}
	fStar := curveMin()
	t.Logf("min_x curve(x, 81) = %.5f (reference: 1.45955)", fStar)
	const seeds, full = 30, 50
	var asha, ashaTPE, ashaTPE8, random, tried, triedTPE, triedTPE8 []float64
	for seed := range uint64(seeds) {
		final, n := ashaRun(t, randomConfigs(rand.New(rand.NewPCG(seed, 1))), full*81, 1, nil)
		asha = append(asha, final-fStar)
		tried = append(tried, float64(n))
		final, n = ashaRun(t, tpeConfigs(t, seed), full*81, 1, nil)
		ashaTPE = append(ashaTPE, final-fStar)
		triedTPE = append(triedTPE, float64(n))
		final, n = ashaRun(t, tpeConfigs(t, seed), full*81, 8, rand.New(rand.NewPCG(seed, 3)))
		ashaTPE8 = append(ashaTPE8, final-fStar)
		triedTPE8 = append(triedTPE8, float64(n))
		random = append(random, randomRun(rand.New(rand.NewPCG(seed, 2)), full)-fStar)
	}
	q := func(xs []float64, format string) string {
		p25, _ := nanPercentile(xs, 25)
		p50, _ := nanPercentile(xs, 50)
		p75, _ := nanPercentile(xs, 75)
		lo, hi := medianCI(xs)
		f := format + " [" + format + ", " + format + "], 95%% CI of the median [" + format + ", " + format + "]"
		return fmt.Sprintf(f, p50, p25, p75, lo, hi)
	}
	t.Logf("budget %d full trials (%d epochs), %d seeds, median [IQR]:", full, full*81, seeds)
	t.Logf("  random search regret: %s (reference, 50 seeds: 0.987 [0.444, 1.830])", q(random, "%.3f"))
	t.Logf("  ASHA regret:          %s (reference, 50 seeds: 0.068 [0.034, 0.127])", q(asha, "%.3f"))
	t.Logf("  ASHA configs tried:   %s (reference, 50 seeds: median 793)", q(tried, "%.0f"))
	t.Logf("  ASHA + TPE regret:    %s", q(ashaTPE, "%.3f"))
	t.Logf("  ASHA + TPE tried:     %s", q(triedTPE, "%.0f"))
	t.Logf("  8 in flight, ASHA + TPE regret: %s", q(ashaTPE8, "%.3f"))
	t.Logf("  8 in flight, ASHA + TPE tried:  %s", q(triedTPE8, "%.0f"))
	if m, _ := median(asha); m >= func() float64 { r, _ := median(random); return r }() {
		t.Errorf("ASHA's median regret %.3f is not below random search's", m)
	}
	if m, _ := median(ashaTPE); m >= func() float64 { r, _ := median(asha); return r }() {
		t.Errorf("ASHA + TPE's median regret %.3f is not below ASHA's with random configs", m)
	}
	if slices.ContainsFunc(slices.Concat(asha, ashaTPE, ashaTPE8), func(v float64) bool { return math.IsInf(v, 1) }) {
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
