package gp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/tpe"
)

// The regret study compares the GP with random search (tunejet's,
// Space.Trial) on Branin and Hartmann6, the problems and method of
// internal/tpe's, over 20 seeds as the anchor figures of Optuna's
// GPSampler (TUNEJET_REGRET_SEEDS for more; TUNEJET_REGRET_ONLY=branin or
// hartmann6 for one problem). It takes a minute or more, so it runs only
// with TUNEJET_REGRET=1:
//
//	TUNEJET_REGRET=1 go test -run TestRegret -v -count=1 ./internal/gp/

const (
	braninMin    = 0.397887
	hartmann6Min = -3.32237
	regretSeeds  = 20
)

var regretNs = []int{25, 50, 100}

type problem struct {
	name  string
	space map[string]any
	f     func(config map[string]any) float64
	fStar float64
}

func num(c map[string]any, k string) float64 { v, _ := number(c[k]); return v }

// branin is the Branin-Hoo function on [-5, 10] × [0, 15].
func branin(c map[string]any) float64 {
	x1, x2 := num(c, "x1"), num(c, "x2")
	b, cc := 5.1/(4*math.Pi*math.Pi), 5/math.Pi
	t := 1 / (8 * math.Pi)
	r := x2 - b*x1*x1 + cc*x1 - 6
	return r*r + 10*(1-t)*math.Cos(x1) + 10
}

// hartmann6 is the six-dimensional Hartmann function on [0, 1]⁶.
func hartmann6(c map[string]any) float64 {
	alpha := []float64{1.0, 1.2, 3.0, 3.2}
	a := [4][6]float64{
		{10, 3, 17, 3.5, 1.7, 8},
		{0.05, 10, 17, 0.1, 8, 14},
		{3, 3.5, 1.7, 10, 17, 8},
		{17, 8, 0.05, 10, 0.1, 14},
	}
	p := [4][6]float64{
		{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
		{0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
		{0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
		{0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381},
	}
	var s float64
	for i := range 4 {
		var inner float64
		for j := range 6 {
			x := num(c, fmt.Sprintf("x%d", j+1))
			inner += a[i][j] * (x - p[i][j]) * (x - p[i][j])
		}
		s += alpha[i] * math.Exp(-inner)
	}
	return -s
}

var problems = []problem{
	{"branin", map[string]any{
		"x1": map[string]any{"uniform": []any{-5.0, 10.0}},
		"x2": map[string]any{"uniform": []any{0.0, 15.0}},
	}, branin, braninMin},
	{"hartmann6", func() map[string]any {
		s := map[string]any{}
		for j := 1; j <= 6; j++ {
			s[fmt.Sprintf("x%d", j)] = map[string]any{"uniform": []any{0.0, 1.0}}
		}
		return s
	}(), hartmann6, hartmann6Min},
}

// suggestRand is the generator a controller seeds for the suggestion of
// trial ordinal in an experiment with seed.
func suggestRand(seed uint64, ordinal int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(ordinal)))
}

// runSequential returns the best value after each of n trials, and the
// time each suggestion took.
func runSequential(p problem, s *Sampler, seed uint64, n int) ([]float64, []time.Duration) {
	var history []tpe.Trial
	best := make([]float64, n)
	var took []time.Duration
	for t := range n {
		start := time.Now()
		config := s.Suggest(history, suggestRand(seed, t))
		took = append(took, time.Since(start))
		v := p.f(config)
		history = append(history, tpe.Trial{Number: t, State: tpe.Complete, Config: config, Value: v})
		best[t] = v
		if t > 0 {
			best[t] = min(v, best[t-1])
		}
	}
	return best, took
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
	for _, p := range problems {
		if only := os.Getenv("TUNEJET_REGRET_ONLY"); only != "" && only != p.name {
			continue
		}
		space, err := search.ParseSpace(p.space)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(space, Defaults())
		if err != nil {
			t.Fatal(err)
		}
		var rnd [][]float64
		for seed := range seeds {
			best := make([]float64, nMax)
			for i := range nMax {
				config, _ := space.Trial(i, int64(seed))
				best[i] = p.f(config)
				if i > 0 {
					best[i] = min(best[i], best[i-1])
				}
			}
			rnd = append(rnd, best)
		}
		t.Logf("%-10s %-10s %s", p.name, "random", summary(rnd, p.fStar))
		var seq [][]float64
		var took []time.Duration
		for seed := range seeds {
			b, d := runSequential(p, s, seed, nMax)
			seq = append(seq, b)
			took = append(took, d[len(d)-1])
		}
		slices.Sort(took)
		t.Logf("%-10s %-10s %s; suggestion at N=%d: median %v", p.name, "bayesopt", summary(seq, p.fStar), nMax, took[len(took)/2])
	}
}

// BenchmarkSuggest200 is one suggestion with 200 completed trials of
// Hartmann6 in the history (drawn at random: the fit and the acquisition's
// optimization cost the same whatever the points).
func BenchmarkSuggest200(b *testing.B) {
	p := problems[1]
	space, err := search.ParseSpace(p.space)
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
		history = append(history, tpe.Trial{Number: i, State: tpe.Complete, Config: config, Value: p.f(config)})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Suggest(history, suggestRand(1, 200+i))
	}
}
