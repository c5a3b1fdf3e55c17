package tpe

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/internal/search"
)

// The regret study compares TPE with random search on Branin and
// Hartmann6, 30 seeds each, and TPE with 8 trials in flight. It takes a few
// minutes, so it runs only with TUNEJET_REGRET=1:
//
//	TUNEJET_REGRET=1 go test -run TestRegret -v -count=1 ./internal/tpe/

const (
	braninMin    = 0.397887
	hartmann6Min = -3.32237
	regretSeeds  = 30
)

var regretNs = []int{10, 25, 50, 100}

type problem struct {
	name  string
	space map[string]any
	f     func(config map[string]any) float64
}

func branin(c map[string]any) float64 {
	x1, x2 := c["x1"].(float64), c["x2"].(float64)
	b, cc := 5.1/(4*math.Pi*math.Pi), 5/math.Pi
	t := 1 / (8 * math.Pi)
	u := x2 - b*x1*x1 + cc*x1 - 6
	return u*u + 10*(1-t)*math.Cos(x1) + 10
}

var (
	hA = [4][6]float64{
		{10, 3, 17, 3.5, 1.7, 8},
		{0.05, 10, 17, 0.1, 8, 14},
		{3, 3.5, 1.7, 10, 17, 8},
		{17, 8, 0.05, 10, 0.1, 14},
	}
	hP = [4][6]float64{
		{1312, 1696, 5569, 124, 8283, 5886},
		{2329, 4135, 8307, 3736, 1004, 9991},
		{2348, 1451, 3522, 2883, 3047, 6650},
		{4047, 8828, 8732, 5743, 1091, 381},
	}
	hAlpha = [4]float64{1, 1.2, 3, 3.2}
)

func hartmann6(c map[string]any) float64 {
	sum := 0.0
	for i := range 4 {
		inner := 0.0
		for j := range 6 {
			x := c[fmt.Sprintf("x%d", j+1)].(float64)
			d := x - hP[i][j]*1e-4
			inner += hA[i][j] * d * d
		}
		sum += hAlpha[i] * math.Exp(-inner)
	}
	return -sum
}

var problems = []problem{
	{"branin", map[string]any{
		"x1": map[string]any{"uniform": []any{-5.0, 10.0}},
		"x2": map[string]any{"uniform": []any{0.0, 15.0}},
	}, branin},
	{"hartmann6", func() map[string]any {
		s := map[string]any{}
		for j := 1; j <= 6; j++ {
			s[fmt.Sprintf("x%d", j)] = map[string]any{"uniform": []any{0.0, 1.0}}
		}
		return s
	}(), hartmann6},
}

func optimum(p problem) float64 {
	if p.name == "branin" {
		return braninMin
	}
	return hartmann6Min
}

// suggestRand is the generator a controller would seed for the suggestion
// of trial ordinal in an experiment with seed.
func suggestRand(seed uint64, ordinal int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(ordinal)))
}

// runSequential returns the best value after each of n trials.
func runSequential(p problem, s *Sampler, seed uint64, n int) []float64 {
	var history []Trial
	best := make([]float64, n)
	for t := range n {
		config := s.Suggest(history, suggestRand(seed, t))
		v := p.f(config)
		history = append(history, Trial{Number: t, State: Complete, Config: config, Value: v})
		best[t] = v
		if t > 0 {
			best[t] = min(v, best[t-1])
		}
	}
	return best
}

// runRandom is tunejet's random search: Space.Trial.
func runRandom(p problem, space *search.Space, seed uint64, n int) []float64 {
	best := make([]float64, n)
	for t := range n {
		config, _ := space.Trial(t, int64(seed))
		best[t] = p.f(config)
		if t > 0 {
			best[t] = min(best[t], best[t-1])
		}
	}
	return best
}

// runParallel keeps inFlight trials running: it suggests inFlight, then
// completes them one at a time in random order, suggesting a new one each
// time with the others passed as Running. best is over completion order.
func runParallel(p problem, s *Sampler, seed uint64, n, inFlight int) []float64 {
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
		history[i].State, history[i].Value = Complete, p.f(history[i].Config)
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

// percentile is numpy's linear-interpolation percentile of sorted v.
func percentile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	if lo+1 >= len(sorted) {
		return sorted[lo]
	}
	return sorted[lo] + (pos-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// summary is "med [q1, q3]" of the regrets at each N.
func summary(bests [][]float64, fStar float64) string {
	var parts []string
	for _, n := range regretNs {
		r := make([]float64, len(bests))
		for i, b := range bests {
			r[i] = b[n-1] - fStar
		}
		slices.Sort(r)
		parts = append(parts, fmt.Sprintf("N=%d %.4g [%.3g, %.3g]", n, percentile(r, 0.5), percentile(r, 0.25), percentile(r, 0.75)))
	}
	return strings.Join(parts, "  ")
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
	nMax := regretNs[len(regretNs)-1]
	for _, p := range problems {
		space, err := search.ParseSpace(p.space)
		if err != nil {
			t.Fatal(err)
		}
		fStar := optimum(p)
		var rnd [][]float64
		for seed := range uint64(regretSeeds) {
			rnd = append(rnd, runRandom(p, space, seed, nMax))
		}
		t.Logf("%-10s %-28s %s", p.name, "random", summary(rnd, fStar))
		for _, v := range variants {
			s, err := New(space, v.opts())
			if err != nil {
				t.Fatal(err)
			}
			var seq, par [][]float64
			for seed := range uint64(regretSeeds) {
				seq = append(seq, runSequential(p, s, seed, nMax))
				if p.name == "hartmann6" {
					par = append(par, runParallel(p, s, seed, nMax, 8))
				}
			}
			t.Logf("%-10s %-28s %s", p.name, v.name, summary(seq, fStar))
			if par != nil {
				t.Logf("%-10s %-28s %s", p.name, v.name+", 8 in flight", summary(par, fStar))
			}
		}
	}
}
