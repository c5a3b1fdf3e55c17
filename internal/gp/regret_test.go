package gp

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/regret"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/tpe"
)

// The regret study compares the GP with random search (tunejet's,
// Space.Trial) on Branin and Hartmann6, the problems and method of
// internal/tpe's, over 20 seeds as the anchor figures of Optuna's
// GPSampler (TUNEJET_REGRET_SEEDS for more, 60 or 200 as gpAnchorsMany;
// TUNEJET_REGRET_ONLY=branin or hartmann6 for one problem;
// TUNEJET_REGRET_PERSEED=1 to print each seed's regrets in the lines of
// testdata/optuna/gp_regret.py, for its "compare"). It takes a minute or
// more, so it runs only with TUNEJET_REGRET=1:
//
//	TUNEJET_REGRET=1 go test -run TestRegret -v -count=1 ./internal/gp/

const regretSeeds = 20

// stuckRegret is the Hartmann6 regret at N=100 above which a run has
// settled on one of the edge local optima (regret 0.119 or 0.185) rather
// than the global one.
const stuckRegret = 0.05

// gpAnchors are the targets beside Optuna's GPSampler's figures
// (../shared/reference/schedulers-searchers.md, GP section: 20 seeds,
// median [quartiles]).
var gpAnchors = map[string]string{
	"branin":    "target N=50 ≤ 4e-5; Optuna GPSampler N=25 0.03332 [0.00648, 0.0754]  N=50 3.96e-05 [1.37e-05, 0.000165]  N=100 2.01e-05 [1.01e-05, 6.97e-05]",
	"hartmann6": "target N=100 ≤ 3.7e-4; Optuna GPSampler N=25 0.5607 [0.387, 1.17]  N=50 0.003805 [0.0012, 0.2]  N=100 0.00037 [8.62e-05, 0.00162]",
}

// gpAnchorsMany are Optuna GPSampler's figures over more seeds
// (testdata/optuna/gp_regret.py, same problems and method, Branin to 50
// trials; per-seed regrets in testdata/optuna/*.txt). Its seeds 0–19 were
// a lucky draw: 3 of 20 stuck on Hartmann6, 72 of 200 over seeds 0–199,
// against tunejet's 84 of 200 (Fisher's exact p 0.26).
var gpAnchorsMany = map[string][]string{
	"branin": {
		"Optuna GPSampler, 60 seeds N=25 0.04124 [0.0126, 0.0952]  N=50 6.132e-05 [2e-05, 0.000179]",
		"Optuna GPSampler, 200 seeds N=25 0.03419 [0.0114, 0.0781]  N=50 7.551e-05 [2.67e-05, 0.00019]",
	},
	"hartmann6": {
		"Optuna GPSampler, 60 seeds N=25 0.7152 [0.423, 1.66]  N=50 0.01074 [0.00275, 0.246]  N=100 0.0001809 [7.49e-05, 0.119]; stuck 17/60",
		"Optuna GPSampler, 200 seeds N=25 0.6165 [0.368, 1.38]  N=50 0.03729 [0.00265, 0.187]  N=100 0.0009678 [9.6e-05, 0.137]; stuck 72/200",
	},
}

var regretNs = []int{25, 50, 100}

// suggestRand is the generator a controller seeds for the suggestion of
// trial ordinal in an experiment with seed.
func suggestRand(seed uint64, ordinal int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(ordinal)))
}

// runSequential returns the best value after each of n trials, and the
// time each suggestion took.
func runSequential(p regret.Problem, s *Sampler, seed uint64, n int) ([]float64, []time.Duration) {
	var history []tpe.Trial
	best := make([]float64, n)
	var took []time.Duration
	for t := range n {
		start := time.Now()
		config := s.Suggest(history, suggestRand(seed, t))
		took = append(took, time.Since(start))
		v := p.F(config)
		history = append(history, tpe.Trial{Number: t, State: tpe.Complete, Config: config, Value: v})
		best[t] = v
		if t > 0 {
			best[t] = min(v, best[t-1])
		}
	}
	return best, took
}

func TestRegret(t *testing.T) {
	if os.Getenv("TUNEJET_REGRET") != "1" {
		t.Skip("set TUNEJET_REGRET=1 to measure the GP's regret")
	}
	seeds := uint64(regretSeeds)
	if s := os.Getenv("TUNEJET_REGRET_SEEDS"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TUNEJET_REGRET_SEEDS: %v", err)
		}
		seeds = n
	}
	nMax := regretNs[len(regretNs)-1]
	for _, p := range regret.Problems {
		if only := os.Getenv("TUNEJET_REGRET_ONLY"); only != "" && only != p.Name {
			continue
		}
		space, err := search.ParseSpace(p.Space)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(space, Defaults())
		if err != nil {
			t.Fatal(err)
		}
		var rnd [][]float64
		for seed := range seeds {
			rnd = append(rnd, regret.RandomSearch(p, space, seed, nMax))
		}
		t.Logf("%-10s %-10s %s", p.Name, "random", regret.Summary(rnd, p.Min, regretNs))
		var seq [][]float64
		var took []time.Duration
		stuck := 0
		for seed := range seeds {
			b, d := runSequential(p, s, seed, nMax)
			seq = append(seq, b)
			took = append(took, d[len(d)-1])
			if b[nMax-1]-p.Min > stuckRegret {
				stuck++
			}
			if os.Getenv("TUNEJET_REGRET_PERSEED") == "1" {
				t.Logf("%s %d %.6g %.6g %.6g", p.Name, seed, b[24]-p.Min, b[49]-p.Min, b[99]-p.Min)
			}
		}
		slices.Sort(took)
		t.Logf("%-10s %-10s %s; suggestion at N=%d: median %v", p.Name, "bayesopt", regret.Summary(seq, p.Min, regretNs), nMax, took[len(took)/2])
		if p.Name == "hartmann6" {
			t.Logf("%-10s %-10s stuck (N=100 > %g): %d/%d", p.Name, "bayesopt", stuckRegret, stuck, seeds)
		}
		t.Logf("%-10s %-10s %s", p.Name, "anchor", gpAnchors[p.Name])
		for _, a := range gpAnchorsMany[p.Name] {
			t.Logf("%-10s %-10s %s", p.Name, "anchor", a)
		}
	}
}

// BenchmarkSuggest200 is one suggestion with 200 completed trials of
// Hartmann6 in the history (drawn at random: the fit and the acquisition's
// optimization cost the same whatever the points).
func BenchmarkSuggest200(b *testing.B) {
	p := regret.Hartmann6
	space, err := search.ParseSpace(p.Space)
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(space, Defaults())
	if err != nil {
		b.Fatal(err)
	}
	var history []tpe.Trial
	for i := range 200 {
		config, _ := space.Trial(i, 1)
		history = append(history, tpe.Trial{Number: i, State: tpe.Complete, Config: config, Value: p.F(config)})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Suggest(history, suggestRand(1, 200+i))
	}
}

// BenchmarkFit200 is the kernel's fit alone, to 200 trials of Hartmann6
// drawn at random: about two thirds of BenchmarkSuggest200.
func BenchmarkFit200(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var x [][]float64
	var values []float64
	for range 200 {
		u := make([]float64, 6)
		config := map[string]any{}
		for j := range u {
			u[j] = rng.Float64()
			config["x"+strconv.Itoa(j+1)] = u[j]
		}
		x, values = append(x, u), append(values, regret.Hartmann6.F(config))
	}
	y := standardize(values, false)
	cat := make([]bool, 6)
	b.ResetTimer()
	for range b.N {
		fit(x, y, cat, false)
	}
}
