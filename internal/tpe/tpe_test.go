package tpe

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/internal/search"

	"github.com/tunejet/tunejet/internal/regret"
	"github.com/tunejet/tunejet/internal/settings"
)

// mixedSpace has every domain TPE models, nested keys and a list.
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

// objective is a made-up loss over mixedSpace.
func objective(c map[string]any) float64 {
	m := c["model"].(map[string]any)
	v := math.Abs(math.Log10(m["lr"].(float64))+3) + math.Abs(c["x"].(float64)-0.3)
	v += float64(m["layers"].(int)) / 10
	if c["opt"] == "sgd" {
		v -= 0.5
	}
	return v
}

// checkValid fails unless every domain's value in config is one the domain
// can take.
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

// run suggests n trials one after the other, with the trial ordinal's
// generator, and returns the history.
func run(t *testing.T, s *search.Space, smp *Sampler, seed uint64, n int) []Trial {
	t.Helper()
	var h []Trial
	for i := range n {
		c := smp.Suggest(h, suggestRand(seed, i))
		checkValid(t, s, c)
		st := Complete
		if i%7 == 3 {
			st = Pruned
		}
		h = append(h, Trial{Number: i, State: st, Config: c, Value: objective(c), Step: i % 4})
	}
	return h
}

func TestSuggestValid(t *testing.T) {
	for _, o := range []Options{Defaults(), Optuna45()} {
		s, smp := mustSampler(t, mixedSpace, o)
		h := run(t, s, smp, 1, 40)
		for _, tr := range h {
			if tr.Config["fixed"] != 2.0 || tr.Config["one"] != "only" || tr.Config["const"] != "c" {
				t.Fatalf("single-valued domains or constant: %v", tr.Config)
			}
		}
	}
}

// The same history and an rng in the same state give the same config,
// whatever the order of the history and after a JSON round trip; a restore
// needs nothing else.
func TestSuggestDeterministic(t *testing.T) {
	for _, o := range []Options{Defaults(), Optuna45()} {
		s, smp := mustSampler(t, mixedSpace, o)
		h := run(t, s, smp, 3, 25)
		h[20].State, h[22].State = Running, Running
		want := smp.Suggest(h, suggestRand(3, 25))

		if got := smp.Suggest(h, suggestRand(3, 25)); !cmp.Equal(want, got) {
			t.Fatalf("second suggestion differs:\n%s", cmp.Diff(want, got))
		}
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		var decoded []Trial
		if err := json.Unmarshal(b, &decoded); err != nil {
			t.Fatal(err)
		}
		if got := smp.Suggest(decoded, suggestRand(3, 25)); !cmp.Equal(want, got) {
			t.Fatalf("after a JSON round trip (-want +got):\n%s", cmp.Diff(want, got))
		}
		shuffled := slices.Clone(decoded)
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := smp.Suggest(shuffled, suggestRand(3, 25)); !cmp.Equal(want, got) {
			t.Fatalf("history out of order (-want +got):\n%s", cmp.Diff(want, got))
		}
		// Suggest leaves the history alone.
		if b2, _ := json.Marshal(h); string(b2) != string(b) {
			t.Fatal("Suggest changed the history")
		}
	}
}

// With the constant liar, a Running trial joins "above"; without it,
// Running trials are ignored.
func TestConstantLiar(t *testing.T) {
	h := []Trial{
		{Number: 0, State: Complete, Value: 2},
		{Number: 1, State: Running},
		{Number: 2, State: Pruned, Value: 1, Step: 1},
		{Number: 3, State: Complete, Value: 1},
	}
	for liar, want := range map[bool][]int{true: {0, 1, 2}, false: {0, 2}} {
		o := Defaults()
		o.ConstantLiar = liar
		_, smp := mustSampler(t, nil, o)
		below, above := smp.partition(h, 3)
		if !slices.Equal(numbers(h, below), []int{3}) || !slices.Equal(numbers(h, above), want) {
			t.Errorf("constant liar %t: below %v above %v, want [3] %v", liar, numbers(h, below), numbers(h, above), want)
		}
	}
}

// Before NStartupTrials finished trials, Suggest samples at random and
// Running trials do not count.
func TestStartupIsRandom(t *testing.T) {
	o := Defaults()
	o.NStartupTrials = 3
	s, smp := mustSampler(t, map[string]any{"x": map[string]any{"uniform": []any{0, 1}}}, o)
	var h []Trial
	for i := range 5 {
		h = append(h, Trial{Number: i, State: Running, Config: map[string]any{"x": 0.5}})
	}
	h = append(h, Trial{Number: 5, State: Complete, Config: map[string]any{"x": 0.5}, Value: 1},
		Trial{Number: 6, State: Pruned, Config: map[string]any{"x": 0.5}, Value: 1, Step: 1})
	r := suggestRand(9, 7)
	want := r.Float64() // uniform [0, 1]: the generator's first draw
	got := smp.Suggest(h, suggestRand(9, 7))
	checkValid(t, s, got)
	if got["x"] != want {
		t.Errorf("startup suggestion %v, want the uniform draw %v", got["x"], want)
	}
}

func TestNewRefuses(t *testing.T) {
	for kw, arg := range map[string]any{"grid_search": []any{1, 2}, "randn": []any{0, 1}, "qrandn": []any{0, 1, 0.1}} {
		s, err := search.ParseSpace(map[string]any{"a": map[string]any{"b": map[string]any{kw: arg}}, "c": 1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(s, Defaults())
		var ke *settings.Error
		if !errors.As(err, &ke) || ke.Key != "a.b" {
			t.Errorf("%s: New error %v, want a *settings.Error at a.b", kw, err)
		}
	}
	s, _ := search.ParseSpace(nil)
	for name, change := range map[string]func(*Options){
		"startup":    func(o *Options) { o.NStartupTrials = -1 },
		"candidates": func(o *Options) { o.NEICandidates = 0 },
		"prior":      func(o *Options) { o.PriorWeight = -1 },
		"prior NaN":  func(o *Options) { o.PriorWeight = math.NaN() },
		"estimator":  func(o *Options) { o.Estimator = "optuna3" },
	} {
		o := Defaults()
		change(&o)
		if _, err := New(s, o); err == nil {
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
	// An empty space suggests empty configs.
	smp, err := New(s, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if c := smp.Suggest(nil, suggestRand(1, 0)); len(c) != 0 {
		t.Errorf("empty space: %v", c)
	}
}

// A trial whose config lacks a usable value is left out of that
// parameter's estimators and breaks nothing.
func TestUnusableConfigs(t *testing.T) {
	space := map[string]any{
		"lr": map[string]any{"loguniform": []any{1e-3, 1}},
		"c":  map[string]any{"choice": []any{"a", "b"}},
	}
	for _, o := range []Options{Defaults(), Optuna45()} {
		s, smp := mustSampler(t, space, o)
		var h []Trial
		for i := range 12 {
			h = append(h, Trial{Number: i, State: Complete, Config: map[string]any{"lr": 0.01 * float64(i+1), "c": "a"}, Value: float64(i)})
		}
		h = append(h,
			Trial{Number: 12, State: Complete, Config: map[string]any{"lr": -1.0, "c": "z"}, Value: -1},
			Trial{Number: 13, State: Complete, Config: nil, Value: -2},
			Trial{Number: 14, State: Complete, Config: map[string]any{"lr": "x"}, Value: -3})
		checkValid(t, s, smp.Suggest(h, suggestRand(1, 15)))
	}
}

func TestTruncNormNumerics(t *testing.T) {
	for _, ab := range [][2]float64{{-1, 1}, {-3, -2}, {2, 3}, {-0.5, 4}, {-40, -39}, {39, 40}, {-200, 0.1}, {0.3, 1e3}} {
		a, b := ab[0], ab[1]
		if m := logGaussMass(a, b); math.IsNaN(m) || math.IsInf(m, 0) || m > 0 {
			t.Errorf("logGaussMass(%v, %v) = %v", a, b, m)
		}
		prev := math.Inf(-1)
		for _, q := range []float64{0, 1e-12, 0.1, 0.5, 0.9, 1 - 1e-12} {
			x := ppf(q, a, b)
			if x < a || x > b || x < prev {
				t.Errorf("ppf(%v, %v, %v) = %v, after %v", q, a, b, x, prev)
			}
			prev = x
			// Where the CDF is representable, ppf inverts it.
			if a > -5 && b < 5 {
				want := Phi(a) + q*(Phi(b)-Phi(a))
				if got := Phi(x); math.Abs(got-want) > 1e-9 {
					t.Errorf("Phi(ppf(%v, %v, %v)) = %v, want %v", q, a, b, got, want)
				}
			}
		}
	}
	// Moderate values agree with the definitions.
	for _, ab := range [][2]float64{{-1, 1}, {-3, -2}, {2, 3}, {-0.5, 4}} {
		want := math.Log(Phi(ab[1]) - Phi(ab[0]))
		if got := logGaussMass(ab[0], ab[1]); !near(got, want) {
			t.Errorf("logGaussMass(%v) = %v, want %v", ab, got, want)
		}
	}
	// Far in the tail, the series: log Φ(−30) = −454.321...; the mass of
	// [−40, −39] is the mass below −39 to 1e-9.
	if got := logNdtr(-39) - logGaussMass(-40, -39); math.Abs(got) > 1e-9 {
		t.Errorf("logNdtr(-39) − logGaussMass(-40, -39) = %v", got)
	}
}

// BenchmarkSuggest1000 is one suggestion with 1,000 finished trials on
// Hartmann6's six parameters, with the default (multivariate) options and
// Optuna 4.5's (univariate).
func BenchmarkSuggest1000(b *testing.B) {
	for _, v := range []struct {
		name string
		opts Options
	}{{"default", Defaults()}, {"optuna45", Optuna45()}} {
		b.Run(v.name, func(b *testing.B) {
			space, smp := mustSampler(b, regret.Hartmann6.Space, v.opts)
			h := make([]Trial, 1000)
			for i := range h {
				c, _ := space.Trial(i, 1)
				h[i] = Trial{Number: i, State: Complete, Config: c, Value: regret.Hartmann6.F(c)}
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				smp.Suggest(h, suggestRand(1, 1000+i))
			}
		})
	}
}
