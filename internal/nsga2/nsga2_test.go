package nsga2

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/settings"
	"github.com/tunejet/tunejet/internal/tpe"
)

// mixedSpace has every domain NSGA-II draws: integers, log domains,
// steps, choices, single values, nested keys and a list.
var mixedSpace = map[string]any{
	"model": map[string]any{
		"lr":     map[string]any{"loguniform": []any{1e-5, 1e-1}},
		"layers": map[string]any{"randint": []any{1, 6}},
		"units":  map[string]any{"lograndint": []any{8, 513, 2}},
		"drop":   map[string]any{"quniform": []any{0, 0.5, 0.05}},
	},
	"opt":    map[string]any{"choice": []any{"adam", "sgd", map[string]any{"name": "rmsprop", "rho": 0.9}}},
	"batch":  map[string]any{"qrandint": []any{16, 256, 16}},
	"wd":     map[string]any{"qloguniform": []any{1e-4, 1e-1, 1e-4}},
	"heads":  map[string]any{"qlograndint": []any{2, 64, 2}},
	"x":      map[string]any{"uniform": []any{-1, 1}},
	"fixed":  map[string]any{"uniform": []any{2, 2}},
	"one":    map[string]any{"choice": []any{"only"}},
	"layers": []any{"conv", map[string]any{"k": map[string]any{"randint": []any{1, 4}}}},
	"const":  "c",
}

func mustSampler(t testing.TB, space map[string]any, o Options) (*search.Space, *Sampler) {
	t.Helper()
	s, err := search.ParseSpace(space)
	if err != nil {
		t.Fatal(err)
	}
	smp, err := New(s, o)
	if err != nil {
		t.Fatal(err)
	}
	return s, smp
}

// objectives are two made-up, conflicting losses over mixedSpace.
func objectives(c map[string]any) []float64 {
	m := c["model"].(map[string]any)
	a := math.Abs(math.Log10(m["lr"].(float64))+3) + float64(m["layers"].(int))/10
	b := math.Abs(c["x"].(float64)-0.3) - a/2
	if c["opt"] == "sgd" {
		b -= 0.5
	}
	return []float64{a, b}
}

// checkValid fails unless every domain's value in config is one the
// domain can take.
func checkValid(t *testing.T, s *search.Space, config map[string]any) {
	t.Helper()
	for _, d := range s.Domains() {
		v, ok := d.Lookup(config)
		if !ok {
			t.Fatalf("no value at %v in %v", d.Path, config)
		}
		if d.Choices != nil {
			if d.Index(v) < 0 {
				t.Fatalf("%v: %v is not a choice", d.Path, v)
			}
			continue
		}
		var x float64
		switch n := v.(type) {
		case int:
			x = float64(n)
			if !d.Int {
				t.Fatalf("%v: int %v for a float domain", d.Path, v)
			}
		case float64:
			x = n
			if d.Int {
				t.Fatalf("%v: float %v for an int domain", d.Path, v)
			}
		default:
			t.Fatalf("%v: %T %v", d.Path, v, v)
		}
		if x < d.Low || x > d.High {
			t.Fatalf("%v: %v outside [%v, %v]", d.Path, x, d.Low, d.High)
		}
		if d.Q > 0 {
			if r := x / d.Q; math.Abs(r-math.Round(r)) > 1e-9*math.Max(1, r) {
				t.Fatalf("%v: %v is not a multiple of %v", d.Path, x, d.Q)
			}
		}
	}
}

func suggestRand(seed uint64, ordinal int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(ordinal)))
}

// run suggests n trials one after the other and returns the history.
func run(t *testing.T, s *search.Space, smp *Sampler, seed uint64, n int) []tpe.Trial {
	t.Helper()
	var h []tpe.Trial
	for i := range n {
		c := smp.Suggest(h, suggestRand(seed, i))
		checkValid(t, s, c)
		h = append(h, tpe.Trial{Number: i, State: tpe.Complete, Config: c, Values: objectives(c)})
	}
	return h
}

func TestDefaultsAreOptunas(t *testing.T) {
	if got, want := Defaults(), (Options{PopulationSize: 50, MutationProb: -1, CrossoverProb: 0.9, SwappingProb: 0.5}); got != want {
		t.Errorf("Defaults() = %+v, want %+v", got, want)
	}
}

func TestChildrenAreValuesOfTheirDomains(t *testing.T) {
	for _, o := range []Options{
		Defaults(),
		{PopulationSize: 6, MutationProb: -1, CrossoverProb: 0.9, SwappingProb: 0.5},
		{PopulationSize: 6, MutationProb: 0.5, CrossoverProb: 1, SwappingProb: 0.3},
		{PopulationSize: 6, MutationProb: 0, CrossoverProb: 0, SwappingProb: 0.5},
	} {
		s, smp := mustSampler(t, mixedSpace, o)
		h := run(t, s, smp, 1, 5*o.PopulationSize)
		for _, tr := range h {
			if tr.Config["fixed"] != 2.0 || tr.Config["one"] != "only" || tr.Config["const"] != "c" {
				t.Fatalf("single-valued domains or constant: %v", tr.Config)
			}
		}
	}
}

func TestParentsOutsideTheirDomainsHaveValidChildren(t *testing.T) {
	s, smp := mustSampler(t, mixedSpace, Options{PopulationSize: 2, MutationProb: 0, CrossoverProb: 1, SwappingProb: 0.5})
	bad := func(n int) tpe.Trial {
		return tpe.Trial{Number: n, State: tpe.Complete, Values: []float64{float64(n), -float64(n)}, Config: map[string]any{
			"model":  map[string]any{"lr": 5.0, "layers": 100, "units": 3, "drop": 0.33},
			"opt":    "nesterov",
			"batch":  17,
			"wd":     -1.0,
			"heads":  1000,
			"x":      "left",
			"layers": []any{"conv", map[string]any{}},
		}}
	}
	h := []tpe.Trial{bad(0), bad(1)}
	for seed := range uint64(50) {
		checkValid(t, s, smp.Suggest(h, suggestRand(seed, 2)))
	}
}

func TestASuggestionIsAFunctionOfTheHistory(t *testing.T) {
	s, smp := mustSampler(t, mixedSpace, Options{PopulationSize: 8, MutationProb: -1, CrossoverProb: 0.9, SwappingProb: 0.5})
	h := run(t, s, smp, 3, 30)
	h[27].State, h[27].Values = tpe.Running, nil
	want := smp.Suggest(h, suggestRand(9, 30))
	shuffled := slices.Clone(h)
	rand.New(rand.NewPCG(1, 1)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for range 3 {
		if got := smp.Suggest(shuffled, suggestRand(9, 30)); !reflect.DeepEqual(got, want) {
			t.Fatalf("the same history gave %v, then %v", want, got)
		}
	}
	other := smp.Suggest(h, suggestRand(10, 30))
	if reflect.DeepEqual(other, want) {
		t.Errorf("another generator gave the same config %v", want)
	}
}

// labelled is a trial whose config is {"x": n} and values v.
func labelled(n int, state tpe.State, v ...float64) tpe.Trial {
	return tpe.Trial{Number: n, State: state, Config: map[string]any{"x": n}, Values: v}
}

// children returns the x of the next trial's config over many generators.
func children(smp *Sampler, h []tpe.Trial) map[int]int {
	seen := map[int]int{}
	for seed := range uint64(200) {
		seen[smp.Suggest(h, suggestRand(seed, 0))["x"].(int)]++
	}
	return seen
}

// copying breeds children that copy a parent: no crossover, no mutation.
var copying = map[string]any{"x": map[string]any{"randint": []any{-10, 100}}}

func TestTheParentsAreTheElite(t *testing.T) {
	_, smp := mustSampler(t, copying, Options{PopulationSize: 3, MutationProb: 0, CrossoverProb: 0, SwappingProb: 0.5})
	// A warm start and generation 0 make one front of 4; generation 1's
	// parents are 3 of them: trial 0, {1, 6}, has the smallest crowding
	// distance (1.3, against 1.5 for {5, 2} and +Inf for the extremes).
	h := []tpe.Trial{
		labelled(-1, tpe.Complete, 0, 10),
		labelled(0, tpe.Complete, 1, 6),
		labelled(1, tpe.Complete, 5, 2),
		labelled(2, tpe.Complete, 10, 0),
	}
	seen := children(smp, h)
	if seen[0] != 0 || seen[-1] == 0 || seen[1] == 0 || seen[2] == 0 || len(seen) != 3 {
		t.Errorf("generation 1 copied %v, want trials -1, 1 and 2", seen)
	}
	// Generation 1 (trials 3 to 5) brings one dominated complete trial, so
	// generation 2 has the same parents; running and pruned trials take no
	// part however good their values.
	h = append(h,
		labelled(3, tpe.Complete, 20, 20),
		labelled(4, tpe.Running, -5, -5),
		labelled(5, tpe.Pruned, -1, -1),
	)
	seen = children(smp, h)
	if seen[0] != 0 || seen[-1] == 0 || seen[1] == 0 || seen[2] == 0 || len(seen) != 3 {
		t.Errorf("generation 2 copied %v, want trials -1, 1 and 2", seen)
	}
}

func TestGenerationZeroIsRandom(t *testing.T) {
	_, smp := mustSampler(t, copying, Options{PopulationSize: 4, MutationProb: 0, CrossoverProb: 0, SwappingProb: 0.5})
	h := []tpe.Trial{labelled(0, tpe.Complete, 1, 1), labelled(1, tpe.Complete, 2, 0)}
	seen := children(smp, h)
	if len(seen) < 50 {
		t.Errorf("generation 0 drew %d distinct values of 111 over 200 draws; want random ones", len(seen))
	}
}

func TestWarmStartsJoinTheFirstParents(t *testing.T) {
	_, smp := mustSampler(t, copying, Options{PopulationSize: 2, MutationProb: 0, CrossoverProb: 0, SwappingProb: 0.5})
	// Ranks: the warm start 0, trial 0 1, trial 1 2: the elite of 2 is the
	// warm start and trial 0.
	h := []tpe.Trial{
		labelled(-1, tpe.Complete, 0, 0),
		labelled(0, tpe.Complete, 1, 1),
		labelled(1, tpe.Complete, 2, 2),
	}
	seen := children(smp, h)
	if seen[-1] == 0 || seen[0] == 0 || len(seen) != 2 {
		t.Errorf("generation 1 copied %v, want the warm start and trial 0", seen)
	}
}

func TestTournamentPrefersTheDominant(t *testing.T) {
	// Uniform crossover of two parents taking every parameter from the
	// first: the child is the first parent, the tournament's winner. Of
	// parents {0, 0} and {1, 1}, the first wins when drawn first or twice:
	// 3/4 of the time when picked first.
	_, smp := mustSampler(t, copying, Options{PopulationSize: 2, MutationProb: 0, CrossoverProb: 1, SwappingProb: 1})
	h := []tpe.Trial{labelled(0, tpe.Complete, 0, 0), labelled(1, tpe.Complete, 1, 1)}
	seen := children(smp, h)
	if seen[0] < 120 || seen[0] > 180 || seen[0]+seen[1] != 200 {
		t.Errorf("children %v: want about 150 copies of the dominant trial 0 in 200", seen)
	}
}

func TestNewRefuses(t *testing.T) {
	space, err := search.ParseSpace(copying)
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults()
	for _, c := range []struct {
		opts    func(*Options)
		setting string
	}{
		{func(o *Options) { o.PopulationSize = 1 }, "population_size"},
		{func(o *Options) { o.MutationProb = 1.5 }, "mutation_prob"},
		{func(o *Options) { o.MutationProb = math.NaN() }, "mutation_prob"},
		{func(o *Options) { o.CrossoverProb = -0.1 }, "crossover_prob"},
		{func(o *Options) { o.SwappingProb = 2 }, "swapping_prob"},
	} {
		o := d
		c.opts(&o)
		if _, err := New(space, o); err == nil || !strings.Contains(err.Error(), c.setting) {
			t.Errorf("New(%+v) = %v, want an error naming %s", o, err, c.setting)
		}
	}
	for _, kw := range []string{"randn", "grid_search"} {
		arg := any([]any{0.0, 1.0})
		bad, err := search.ParseSpace(map[string]any{"a": map[string]any{"b": map[string]any{kw: arg}}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(bad, d)
		var se *settings.Error
		if !errors.As(err, &se) || se.Key != "a.b" {
			t.Errorf("New with %s = %v, want a *settings.Error at a.b", kw, err)
		}
	}
}

func TestInfiniteValuesRankAndNaNOnesAreLeftOut(t *testing.T) {
	_, smp := mustSampler(t, copying, Options{PopulationSize: 2, MutationProb: 0, CrossoverProb: 0, SwappingProb: 0.5})
	// The warm start -1 and trial 0 trade off: rank 0, the elite of 2;
	// trial 1's +Inf ranks it 1. Warm start -2 would dominate trial 0 if
	// its NaN counted (no comparison with NaN is true): it must not.
	h := []tpe.Trial{
		labelled(-2, tpe.Complete, math.NaN(), 0),
		labelled(-1, tpe.Complete, math.Inf(-1), 5),
		labelled(0, tpe.Complete, 1, 1),
		labelled(1, tpe.Complete, math.Inf(1), math.Inf(1)),
	}
	seen := children(smp, h)
	if seen[-1] == 0 || seen[0] == 0 || len(seen) != 2 {
		t.Errorf("generation 1 copied %v, want the warm start -1 and trial 0", seen)
	}
}

// TestSuggestForTakesTheTrialsGeneration: the controller names the trial
// it asks for, and its generation is that number's even when the history
// ends before it (tune_config.reproducible).
func TestSuggestForTakesTheTrialsGeneration(t *testing.T) {
	_, smp := mustSampler(t, copying, Options{PopulationSize: 2, MutationProb: 0, CrossoverProb: 0, SwappingProb: 0.5})
	h := []tpe.Trial{labelled(0, tpe.Complete, 1, 1), labelled(1, tpe.Complete, 2, 0)}
	copied, drawn := map[int]bool{}, map[int]bool{}
	for seed := range uint64(100) {
		copied[smp.SuggestFor(4, h, suggestRand(seed, 0))["x"].(int)] = true
		drawn[smp.SuggestFor(1, h[:1], suggestRand(seed, 0))["x"].(int)] = true
	}
	if len(copied) != 2 || !copied[0] || !copied[1] {
		t.Errorf("trial 4 (generation 2) copied %v, want the parents 0 and 1 alone", copied)
	}
	if len(drawn) < 20 {
		t.Errorf("trial 1 (generation 0) drew %d distinct values over 100 draws; want random ones", len(drawn))
	}
}
