package nsga2

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/tunejet/tunejet/internal/regret"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/tpe"
)

// The hypervolume study runs NSGA-II, MOTPE (with Defaults, with
// MultiObjectiveDefaults and univariate) and random search on ZDT1,
// trials one at a time, 10 seeds (TUNEJET_REGRET_SEEDS for another
// number), and prints the hypervolume against (1.1, 1.1) after 100 and
// 200 trials, median [quartiles], beside Optuna's figures. It takes a
// minute or so, so it runs only with TUNEJET_REGRET=1:
//
//	TUNEJET_REGRET=1 go test -run TestHypervolume -v -count=1 ./internal/nsga2/

const hvSeeds = 10

var hvNs = []int{100, 200}

// hvAnchors are the target and Optuna's figures on ZDT1 (the
// samplers with their defaults but as named; median [quartiles] after 100
// / 200 trials).
var hvAnchors = []string{
	"target: above every Optuna figure, ≥ 0.5 at N=200; the true front 0.8767",
	"Optuna NSGAIISampler           N=100 0 [0, 0]  N=200 0.02151 [0, 0.073]",
	"Optuna TPESampler              N=100 0.1772 [0.0735, 0.253]  N=200 0.3478 [0.278, 0.445]",
	"Optuna TPESampler multivariate N=100 0.1425 [0.0906, 0.246]  N=200 0.3904 [0.347, 0.463]",
	"Optuna RandomSampler           N=100 0  N=200 0",
}

// suggester is NSGA-II's or TPE's Suggest.
type suggester func(history []tpe.Trial, rng *rand.Rand) map[string]any

// runMulti runs n trials of p one after the other, each suggested with the
// generator a controller would seed for it, and returns their values.
func runMulti(p regret.MultiProblem, suggest suggester, seed uint64, n int) [][]float64 {
	var history []tpe.Trial
	var values [][]float64
	for t := range n {
		config := suggest(history, rand.New(rand.NewPCG(seed, uint64(t))))
		v := p.F(config)
		history = append(history, tpe.Trial{Number: t, State: tpe.Complete, Config: config, Values: v})
		values = append(values, v)
	}
	return values
}

func TestHypervolume(t *testing.T) {
	if os.Getenv("TUNEJET_REGRET") != "1" {
		t.Skip("set TUNEJET_REGRET=1 to measure the hypervolume study")
	}
	seeds := uint64(hvSeeds)
	if s := os.Getenv("TUNEJET_REGRET_SEEDS"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TUNEJET_REGRET_SEEDS: %v", err)
		}
		seeds = n
	}
	p := regret.ZDT1
	space, err := search.ParseSpace(p.Space)
	if err != nil {
		t.Fatal(err)
	}
	nsga, err := New(space, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	univariate := tpe.Defaults()
	univariate.Multivariate = false // Optuna's default with several objectives
	var motpe []*tpe.Sampler
	for _, o := range []tpe.Options{tpe.Defaults(), tpe.MultiObjectiveDefaults(), univariate} {
		s, err := tpe.New(space, o)
		if err != nil {
			t.Fatal(err)
		}
		motpe = append(motpe, s)
	}
	nMax := hvNs[len(hvNs)-1]
	samplers := []struct {
		name    string
		suggest suggester
	}{
		{"nsga2", nsga.Suggest},
		{"tpe Defaults", motpe[0].Suggest},
		{"tpe MultiObjectiveDefaults", motpe[1].Suggest},
		{"tpe Defaults, univariate", motpe[2].Suggest},
		{"random", nil}, // tunejet's random search: Space.Trial
	}
	for _, s := range samplers {
		var hvs [][]float64
		for seed := range seeds {
			var values [][]float64
			if s.suggest == nil {
				for i := range nMax {
					c, _ := space.Trial(i, int64(seed))
					values = append(values, p.F(c))
				}
			} else {
				values = runMulti(p, s.suggest, seed, nMax)
			}
			hvs = append(hvs, regret.Hypervolumes(values, p.Ref, hvNs))
		}
		t.Logf("%-6s %-30s %s", p.Name, s.name, regret.HypervolumeSummary(hvs, hvNs))
	}
	for _, a := range hvAnchors {
		t.Logf("%-6s %s", p.Name, a)
	}
}
