package tpe

import (
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/tunejet/tunejet/internal/regret"
	"github.com/tunejet/tunejet/internal/search"
)

// The regret study compares TPE with random search on Branin and
// Hartmann6, 30 seeds each, and TPE with 8 trials in flight. It takes a few
// minutes, so it runs only with TUNEJET_REGRET=1:
//
//	TUNEJET_REGRET=1 go test -run TestRegret -v -count=1 ./internal/tpe/
//
// TUNEJET_REGRET_SEEDS sets the number of seeds, TUNEJET_REGRET_ONLY=branin
// or hartmann6 runs one problem, and TUNEJET_REGRET_DEFAULTS=1 runs only
// the defaults, sequentially.

const regretSeeds = 30

// tpeAnchors are the targets beside Optuna 5.0.0-rc1's TPE with its
// defaults (../shared/reference/schedulers-searchers.md, measured with
// Optuna's own source: 30 seeds, median [quartiles]).
var tpeAnchors = map[string]string{
	"branin":    "target N=100 ≤ 0.020; N=10 6.083 [2.5, 10]  N=25 0.4925 [0.175, 1.21]  N=50 0.1314 [0.0348, 0.289]  N=100 0.02044 [0.00736, 0.0345]",
	"hartmann6": "target N=100 ≤ 0.129; N=10 2.615 [2.19, 2.92]  N=25 0.9225 [0.701, 1.5]  N=50 0.3439 [0.23, 0.551]  N=100 0.129 [0.0775, 0.192]",
}

// tpeAnchors800 are Optuna's TPE with its defaults (TPESampler(seed=seed)
// at commit 1d8ce7bb, Optuna 5.0.0.dev, numpy 1.24.2; seeds 0–799,
// sequential, and for Hartmann6 also 8 in flight as runParallel does,
// seeds 0–299), measured with testdata/optuna/regret.py. Its seeds 0–19
// give the figures exactly (Branin N=100 0.01884, Hartmann6
// 0.09433), but the targets drawn from them are luck: over 800 seeds
// Optuna's own medians are above both, and the median of 20 seeds drawn
// at random meets them only about a third of the time (0.34 and 0.31).
// Judge tunejet against these, with TUNEJET_REGRET_SEEDS=800.
var tpeAnchors800 = map[string]string{
	"branin":    "N=10 3.85 [1.49, 8.28]  N=25 0.5921 [0.244, 1.19]  N=50 0.1764 [0.0746, 0.337]  N=100 0.02332 [0.00847, 0.0507]",
	"hartmann6": "N=10 2.442 [1.98, 2.73]  N=25 1.02 [0.715, 1.49]  N=50 0.3953 [0.275, 0.558]  N=100 0.1446 [0.0797, 0.234]; 8 in flight N=100 0.2371 [0.146, 0.364]",
}

var regretNs = []int{10, 25, 50, 100}

// seedCount is TUNEJET_REGRET_SEEDS, or regretSeeds.
func seedCount(t *testing.T) uint64 {
	s := os.Getenv("TUNEJET_REGRET_SEEDS")
	if s == "" {
		return regretSeeds
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("TUNEJET_REGRET_SEEDS=%q: want a positive count", s)
	}
	return n
}

// suggestRand is the generator a controller would seed for the suggestion
// of trial ordinal in an experiment with seed.
func suggestRand(seed uint64, ordinal int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(ordinal)))
}

// runSequential returns the best value after each of n trials.
func runSequential(p regret.Problem, s *Sampler, seed uint64, n int) []float64 {
	var history []Trial
	best := make([]float64, n)
	for t := range n {
		config := s.Suggest(history, suggestRand(seed, t))
		v := p.F(config)
		history = append(history, Trial{Number: t, State: Complete, Config: config, Value: v})
		best[t] = v
		if t > 0 {
			best[t] = min(v, best[t-1])
		}
	}
	return best
}

// runParallel keeps inFlight trials running: it suggests inFlight, then
// completes them one at a time in random order, suggesting a new one each
// time with the others passed as Running. best is over completion order.
func runParallel(p regret.Problem, s *Sampler, seed uint64, n, inFlight int) []float64 {
	var history []Trial
	order := rand.New(rand.NewPCG(seed, 1<<40))
	suggest := func() {
		t := len(history)
		config := s.Suggest(history, suggestRand(seed, t))
		history = append(history, Trial{Number: t, State: Running, Config: config})
	}
	for range inFlight {
		suggest()
	}
	var best []float64
	for len(best) < n {
		var running []int
		for i, t := range history {
			if t.State == Running {
				running = append(running, i)
			}
		}
		i := running[order.IntN(len(running))]
		history[i].State, history[i].Value = Complete, p.F(history[i].Config)
		v := history[i].Value
		if len(best) > 0 {
			v = min(v, best[len(best)-1])
		}
		best = append(best, v)
		if len(history) < n {
			suggest()
		}
	}
	return best
}

func TestRegret(t *testing.T) {
	if os.Getenv("TUNEJET_REGRET") != "1" {
		t.Skip("set TUNEJET_REGRET=1 to measure TPE's regret")
	}
	variants := []struct {
		name string
		opts func() Options
	}{
		{"tpe (default: Optuna 5)", Defaults},
		{"tpe Optuna 5, univariate", func() Options { o := Defaults(); o.Multivariate = false; return o }},
		{"tpe Optuna 4.5", Optuna45},
		{"tpe Optuna 4.5, multivariate", func() Options { o := Optuna45(); o.Multivariate = true; return o }},
	}
	defaultsOnly := os.Getenv("TUNEJET_REGRET_DEFAULTS") == "1"
	if defaultsOnly {
		variants = variants[:1]
	}
	seeds := seedCount(t)
	nMax := regretNs[len(regretNs)-1]
	for _, p := range regret.Problems {
		if only := os.Getenv("TUNEJET_REGRET_ONLY"); only != "" && only != p.Name {
			continue
		}
		space, err := search.ParseSpace(p.Space)
		if err != nil {
			t.Fatal(err)
		}
		fStar := p.Min
		var rnd [][]float64
		for seed := range seeds {
			rnd = append(rnd, regret.RandomSearch(p, space, seed, nMax))
		}
		t.Logf("%-10s %-28s %s", p.Name, "random", regret.Summary(rnd, fStar, regretNs))
		t.Logf("%-10s %-28s %s", p.Name, "anchor: Optuna 5 TPE", tpeAnchors[p.Name])
		t.Logf("%-10s %-28s %s", p.Name, "anchor: Optuna, 800 seeds", tpeAnchors800[p.Name])
		for _, v := range variants {
			s, err := New(space, v.opts())
			if err != nil {
				t.Fatal(err)
			}
			var seq, par [][]float64
			for seed := range seeds {
				seq = append(seq, runSequential(p, s, seed, nMax))
				if p.Name == "hartmann6" && !defaultsOnly {
					par = append(par, runParallel(p, s, seed, nMax, 8))
				}
			}
			t.Logf("%-10s %-28s %s", p.Name, v.name, regret.Summary(seq, fStar, regretNs))
			if par != nil {
				t.Logf("%-10s %-28s %s", p.Name, v.name+", 8 in flight", regret.Summary(par, fStar, regretNs))
			}
		}
	}
}

// runTimed simulates n trials of p on inFlight workers, each taking a
// time drawn from [0.5, 1.5) (the same for trial k in every run of a
// lengths seed): a new trial starts as soon as a worker is free, learning from
// the finished trials and, as running, the others (the controller's
// default); with reproducible, trial k starts only once every trial
// numbered up to k − inFlight has finished, and learns from those alone
// (tune_config.reproducible). It returns the best value after each
// completion, the makespan and the configs in trial order.
func runTimed(p regret.Problem, s *Sampler, seed, lengths uint64, n, inFlight int, reproducible bool) (best []float64, makespan float64, configs []map[string]any) {
	took := rand.New(rand.NewPCG(lengths, 1<<41))
	durations := make([]float64, n)
	for i := range durations {
		durations[i] = 0.5 + took.Float64()
	}
	var history []Trial
	end := map[int]float64{} // running trial → its end time
	now := 0.0
	finishedThrough := func(k int) bool {
		for i := 0; i <= k && i < len(history); i++ {
			if history[i].State == Running {
				return false
			}
		}
		return true
	}
	for len(best) < n {
		for len(end) < inFlight && len(history) < n {
			k := len(history)
			h := history
			if reproducible {
				if !finishedThrough(k - inFlight) {
					break
				}
				h = nil
				for _, t := range history {
					if t.Number <= k-inFlight {
						h = append(h, t)
					}
				}
			}
			config := s.Suggest(h, suggestRand(seed, k))
			history = append(history, Trial{Number: k, State: Running, Config: config})
			configs = append(configs, config)
			end[k] = now + durations[k]
		}
		next := -1
		for k, e := range end {
			if next < 0 || e < end[next] || e == end[next] && k < next {
				next = k
			}
		}
		now = end[next]
		delete(end, next)
		history[next].State, history[next].Value = Complete, p.F(history[next].Config)
		v := history[next].Value
		if len(best) > 0 {
			v = min(v, best[len(best)-1])
		}
		best = append(best, v)
	}
	return best, now, configs
}

// TestReproducibleCost measures what tune_config.reproducible costs on
// Hartmann6 with 8 trials in flight and 100 trials of random length: the
// makespan and the regret against the default's, 30 seeds
// (TUNEJET_REGRET_SEEDS for another count). It runs with TUNEJET_REGRET=1
// (make bench-tuner).
func TestReproducibleCost(t *testing.T) {
	if os.Getenv("TUNEJET_REGRET") != "1" {
		t.Skip("set TUNEJET_REGRET=1 to measure what reproducible costs")
	}
	p := regret.Hartmann6
	space, err := search.ParseSpace(p.Space)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(space, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	const n, inFlight = 100, 8
	var free, repro [][]float64
	var ratios []float64
	for seed := range seedCount(t) {
		b1, m1, _ := runTimed(p, s, seed, seed, n, inFlight, false)
		b2, m2, c2 := runTimed(p, s, seed, seed, n, inFlight, true)
		free, repro = append(free, b1), append(repro, b2)
		ratios = append(ratios, m2/m1)
		if seed == 0 { // the same configs whatever the trials' lengths
			if _, _, other := runTimed(p, s, seed, 99, n, inFlight, true); !reflect.DeepEqual(c2, other) {
				t.Errorf("reproducible: trials of other lengths gave other configs")
			}
		}
	}
	slices.Sort(ratios)
	t.Logf("hartmann6, %d in flight, trials of 0.5–1.5: makespan reproducible/default median %.3f [%.3f, %.3f]", inFlight,
		regret.Percentile(ratios, 0.5), regret.Percentile(ratios, 0.25), regret.Percentile(ratios, 0.75))
	t.Logf("hartmann6 %-28s %s", "tpe, 8 in flight", regret.Summary(free, p.Min, regretNs))
	t.Logf("hartmann6 %-28s %s", "tpe, 8 in flight, reproducible", regret.Summary(repro, p.Min, regretNs))
}
