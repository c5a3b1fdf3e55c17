package sched

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func pcg(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 7)) }

func newPBT(t *testing.T, mutate func(*PBTConfig)) *PBT {
	t.Helper()
	cfg := DefaultPBTConfig()
	cfg.Objective = Objective{Metric: "m", Mode: Max}
	cfg.TimeAttr, cfg.PerturbationInterval = "t", 10
	cfg.HyperparamMutations = map[string]Mutation{
		"lr":  {Sample: func(r *rand.Rand) any { return r.Float64() }},
		"opt": {Choices: []any{"sgd", "adam", "rmsprop"}},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := NewPBT(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPBTQuantiles: k = ceil(n * quantile_fraction), at most floor(n/2),
// trials from each end of the population sorted by score; ties keep the
// order trials were added in; finished trials and trials without a score
// are left out.
func TestPBTQuantiles(t *testing.T) {
	tests := []struct {
		name         string
		fraction     float64
		scores       []float64 // trial i has scores[i]
		lower, upper []string
	}{
		{"one trial", 0.25, []float64{1}, nil, nil},
		// ceil(2 * 0.25) = 1.
		{"two trials", 0.25, []float64{2, 1}, []string{"t1"}, []string{"t0"}},
		// ceil(3 * 0.25) = 1.
		{"three trials", 0.25, []float64{3, 1, 2}, []string{"t1"}, []string{"t0"}},
		// ceil(8 * 0.25) = 2.
		{"eight trials", 0.25, []float64{5, 3, 8, 1, 7, 2, 6, 4}, []string{"t3", "t5"}, []string{"t4", "t2"}},
		// ceil(5 * 0.5) = 3 > 5/2, so floor(5/2) = 2.
		{"capped at half", 0.5, []float64{5, 4, 3, 2, 1}, []string{"t4", "t3"}, []string{"t1", "t0"}},
		// ceil(4 * 0.25) = 1; the tie at 1 keeps t0 before t1.
		{"ties", 0.25, []float64{1, 1, 2, 2}, []string{"t0"}, []string{"t3"}},
		{"fraction 0", 0, []float64{1, 2, 3}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPBT(t, func(c *PBTConfig) { c.QuantileFraction = tt.fraction })
			for i, s := range tt.scores {
				id := fmt.Sprint("t", i)
				p.Add(id, nil)
				sc := Float(s)
				p.trial(id).LastScore = &sc
			}
			p.Add("unscored", nil)
			p.Add("finished", nil)
			big := Float(100)
			p.trial("finished").LastScore, p.trial("finished").Finished = &big, true
			lower, upper := p.quantiles()
			if !slices.Equal(lower, tt.lower) || !slices.Equal(upper, tt.upper) {
				t.Errorf("quantiles %v %v, want %v %v", lower, upper, tt.lower, tt.upper)
			}
		})
	}
}

// TestPBTExplore checks Ray's _explore on fixed seeds. Each case draws from
// a twin of the generator to show which branch the draws select.
func TestPBTExplore(t *testing.T) {
	list := []any{1, 10, 100, 1000}
	uniform := func(r *rand.Rand) any { return 5 + r.Float64() }
	tests := []struct {
		name     string
		resample float64
		m        Mutation
		value    any
		want     func(twin *rand.Rand) (any, string)
	}{
		{"list shift", 0, Mutation{Choices: list}, 10, func(r *rand.Rand) (any, string) {
			r.Float64() // 0 < 0 is false: no resample
			if r.IntN(2) == 0 {
				return 1, "shift left"
			}
			return 100, "shift right"
		}},
		{"list clamped", 0, Mutation{Choices: list}, 1000, func(r *rand.Rand) (any, string) {
			r.Float64()
			if r.IntN(2) == 0 {
				return 100, "shift left"
			}
			return 1000, "shift right (noop)"
		}},
		{"list 1.0 is 1", 0, Mutation{Choices: list}, 1.0, func(r *rand.Rand) (any, string) {
			r.Float64()
			if r.IntN(2) == 0 {
				return 1, "shift left (noop)"
			}
			return 10, "shift right"
		}},
		{"value not in list", 0, Mutation{Choices: list}, 7, func(r *rand.Rand) (any, string) {
			r.Float64() // drawn first, as Python's `random() < p or v not in list`
			return list[r.IntN(4)], "resample"
		}},
		{"list resample", 1, Mutation{Choices: list}, 10, func(r *rand.Rand) (any, string) {
			r.Float64() // < 1
			return list[r.IntN(4)], "resample"
		}},
		{"float perturbed", 0, Mutation{Sample: uniform}, 0.01, func(r *rand.Rand) (any, string) {
			r.Float64()
			if r.IntN(2) == 0 {
				return 0.01 * 1.2, "* 1.2"
			}
			return 0.01 * 0.8, "* 0.8"
		}},
		// 32 * 1.2 = 38.4 -> 38 and 32 * 0.8 = 25.6 -> 25: int() truncates.
		{"int stays int", 0, Mutation{Sample: uniform}, 32, func(r *rand.Rand) (any, string) {
			r.Float64()
			if r.IntN(2) == 0 {
				return 38, "* 1.2"
			}
			return 25, "* 0.8"
		}},
		{"resampled", 1, Mutation{Sample: uniform}, 0.01, func(r *rand.Rand) (any, string) {
			r.Float64()
			return 5 + r.Float64(), "resample"
		}},
		// A config decoded with UseNumber keeps its ints.
		{"json.Number int", 0, Mutation{Sample: uniform}, json.Number("32"), func(r *rand.Rand) (any, string) {
			r.Float64()
			if r.IntN(2) == 0 {
				return 38, "* 1.2"
			}
			return 25, "* 0.8"
		}},
		{"json.Number in list", 0, Mutation{Choices: list}, json.Number("10"), func(r *rand.Rand) (any, string) {
			r.Float64()
			if r.IntN(2) == 0 {
				return 1, "shift left"
			}
			return 100, "shift right"
		}},
		// The float64 a JSON round trip makes of an int: an int domain's
		// value stays an int; a float domain's 32.0 is a float.
		{"whole float64 of an int domain", 0, Mutation{Sample: uniform, Int: true}, 32.0, func(r *rand.Rand) (any, string) {
			r.Float64()
			if r.IntN(2) == 0 {
				return 38, "* 1.2"
			}
			return 25, "* 0.8"
		}},
		{"whole float64 of a float domain", 0, Mutation{Sample: uniform}, 32.0, func(r *rand.Rand) (any, string) {
			r.Float64()
			if r.IntN(2) == 0 {
				return 32.0 * 1.2, "* 1.2"
			}
			return 32.0 * 0.8, "* 0.8"
		}},
		// An int resampled from a float distribution is truncated too.
		{"int resampled", 1, Mutation{Sample: uniform}, 3, func(r *rand.Rand) (any, string) {
			r.Float64()
			return 5, "resample"
		}},
	}
	for _, tt := range tests {
		for seed := range uint64(6) {
			t.Run(fmt.Sprint(tt.name, "/", seed), func(t *testing.T) {
				e := explorer{resample: tt.resample, factors: []float64{1.2, 0.8}}
				ops := map[string]string{}
				cfg := map[string]any{"k": tt.value, "keep": "me"}
				got := e.explore(cfg, map[string]Mutation{"k": tt.m}, pcg(seed), "", ops)
				wantV, wantOp := tt.want(pcg(seed))
				if !cmp.Equal(got, map[string]any{"k": wantV, "keep": "me"}) || ops["k"] != wantOp {
					t.Errorf("explore = %v %v, want k=%v (%T) %q", got, ops, wantV, wantV, wantOp)
				}
				if cfg["k"] != tt.value {
					t.Errorf("explore changed its input: %v", cfg)
				}
			})
		}
	}
}

// TestPBTExploreListRule checks a list mutation against the rule of Ray's
// _explore (python/ray/tune/schedulers/pbt.py, ray-project/ray at
// bb9f11f1492da09d624152a5c6e2d4ed2cc242f5): with resample_probability,
// or when the value is not in the list, a uniform choice from the list;
// otherwise the value at index -1 or +1, clamped to the list. A list is
// never multiplied by a perturbation factor: over many draws every
// outcome is one the rule allows, and each one it allows comes up.
func TestPBTExploreListRule(t *testing.T) {
	type outcome struct {
		value any
		op    string
	}
	tests := []struct {
		name     string
		list     []any
		value    any
		resample float64
		want     []outcome
	}{
		{"left end", []any{1, 2}, 1, 0, []outcome{{1, "shift left (noop)"}, {2, "shift right"}}},
		// The float64 that a JSON round trip makes of the int 2.
		{"right end as float64", []any{1, 2}, 2.0, 0, []outcome{{1, "shift left"}, {2, "shift right (noop)"}}},
		{"Ray's default resample_probability", []any{1, 2}, 1, 0.25,
			[]outcome{{1, "shift left (noop)"}, {2, "shift right"}, {1, "resample"}, {2, "resample"}}},
		{"always resampled", []any{1, 2}, 2, 1, []outcome{{1, "resample"}, {2, "resample"}}},
		{"value not in the list", []any{1, 2}, 0.8, 0, []outcome{{1, "resample"}, {2, "resample"}}},
		{"middle", []any{"sgd", "adam", "rmsprop"}, "adam", 0, []outcome{{"sgd", "shift left"}, {"rmsprop", "shift right"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := explorer{resample: tt.resample, factors: []float64{1.2, 0.8}}
			ms := map[string]Mutation{"k": {Choices: tt.list}}
			seen := map[outcome]bool{}
			for seed := range uint64(200) {
				ops := map[string]string{}
				got := e.explore(map[string]any{"k": tt.value}, ms, pcg(seed), "", ops)
				o := outcome{got["k"], ops["k"]}
				if !slices.Contains(tt.want, o) {
					t.Fatalf("seed %d: explore gave %v (%T) by %q; Ray's rule allows only %v", seed, o.value, o.value, o.op, tt.want)
				}
				seen[o] = true
			}
			for _, o := range tt.want {
				if !seen[o] {
					t.Errorf("%v by %q never came up in 200 draws", o.value, o.op)
				}
			}
		})
	}
}

// TestPBTExploreNested: nested mappings are explored recursively, keys in
// sorted order, operations dotted.
func TestPBTExploreNested(t *testing.T) {
	e := explorer{resample: 0, factors: []float64{2}}
	ms := map[string]Mutation{
		"b":   {Sample: func(*rand.Rand) any { return 0.0 }},
		"opt": {Nested: map[string]Mutation{"m": {Sample: func(*rand.Rand) any { return 0.0 }}}},
		"a":   {Choices: []any{"x", "y"}},
	}
	ops := map[string]string{}
	got := e.explore(map[string]any{"a": "x", "b": 1.5, "opt": map[string]any{"m": 0.9, "n": 1}}, ms, pcg(3), "", ops)
	// Draw order: a (Float64, IntN(2)), b (Float64, IntN(1)), opt.m (Float64, IntN(1)).
	twin := pcg(3)
	twin.Float64()
	a, aOp := "x", "shift left (noop)"
	if twin.IntN(2) == 1 {
		a, aOp = "y", "shift right"
	}
	want := map[string]any{"a": a, "b": 3.0, "opt": map[string]any{"m": 1.8, "n": 1}}
	wantOps := map[string]string{"a": aOp, "b": "* 2", "opt.m": "* 2"}
	if !cmp.Equal(got, want) || !cmp.Equal(ops, wantOps) {
		t.Errorf("explore = %v %v, want %v %v", got, ops, want, wantOps)
	}
}

// TestPBTExploit follows one perturbation round of four trials with
// perturbation_interval 10.
func TestPBTExploit(t *testing.T) {
	p := newPBT(t, nil)
	configs := map[string]map[string]any{}
	for i, id := range []string{"a", "b", "c", "d"} {
		p.Add(id, nil)
		configs[id] = map[string]any{"lr": 0.1 * float64(i+1), "opt": "adam"}
	}
	ctx := Context{Config: func(id string) map[string]any { return configs[id] }}
	at := func(id string, t, m float64, ckpt string, ctx Context) Decision {
		r := result(id, t, m)
		r.Checkpoint = ckpt
		ctx.Rand = pcg(uint64(t))
		return p.Result(r, ctx)[0]
	}
	// Before the interval nothing happens.
	if d := at("a", 5, 1, "", ctx); !d.Quiet() {
		t.Fatalf("a at 5: %+v", d)
	}
	// At 10, a alone has a score: no quantiles. Then n = 2, 3, 4 gives
	// k = 1 each time, and b, c and d each arrive as the best: upper, each
	// keeping its checkpoint for exploits. Only the reporting trial is
	// perturbed, so a is not exploited yet.
	steps := []struct {
		id       string
		score    float64
		quantile string
	}{{"a", 1, ""}, {"b", 2, "upper"}, {"c", 3, "upper"}, {"d", 4, "upper"}}
	for _, s := range steps {
		d := at(s.id, 10, s.score, "ckpt-"+s.id, ctx)
		if d.Action != Continue || d.Exploit.Quantile != s.quantile {
			t.Fatalf("%s at 10: %s in %q, want Continue in %q (%s)", s.id, d.Action, d.Exploit.Quantile, s.quantile, d.Reason)
		}
	}
	// a at 20 scores 0.5: lower [a], upper [d]; d offers ckpt-d.
	d := at("a", 20, 0.5, "ckpt-a2", ctx)
	if d.Action != Exploit || d.Exploit.Source != "d" || d.Exploit.SourceCheckpoint != "ckpt-d" {
		t.Fatalf("a at 20: %+v", d)
	}
	// The donor is drawn first (IntN(1) over the one upper trial with a
	// checkpoint, which consumes one Uint64), then explore draws; replay
	// the same on a twin.
	twin := pcg(20)
	twin.Uint64()
	ops := map[string]string{}
	wantCfg := explorer{0.25, []float64{1.2, 0.8}}.explore(configs["d"], p.cfg.HyperparamMutations, twin, "", ops)
	if !cmp.Equal(d.Exploit.NewConfig, wantCfg) || !cmp.Equal(d.Exploit.Operations, ops) {
		t.Errorf("new config %v %v, want %v %v", d.Exploit.NewConfig, d.Exploit.Operations, wantCfg, ops)
	}
	if st := p.trial("a"); st.LastPerturbationTime != 10 || st.LastTrainTime != 10 || st.PendingExploit != "ckpt-d" {
		t.Errorf("a's state after exploit: %+v", st)
	}
	if got := p.PendingExploits(); !cmp.Equal(got, map[string]string{"a": "ckpt-d"}) {
		t.Errorf("pending exploits %v", got)
	}
	// A stale result of a's old run is ignored, however bad.
	if d := at("a", 30, -9, "", ctx); !d.Quiet() {
		t.Errorf("stale result: %+v", d)
	}
	p.Resumed("a")
	// Resumed from d's state at 10, a perturbs again at 20; others wait, so
	// an upper trial yields its slot.
	configs["a"] = d.Exploit.NewConfig
	if d := at("a", 20, 9, "ckpt-a3", Context{Waiting: true, Config: ctx.Config}); d.Action != Pause || d.Exploit.Quantile != "upper" {
		t.Errorf("a resumed at 20: %+v", d)
	}
	// A finished trial leaves the quantiles.
	p.Complete(result("a", 20, 9))
	if lower, upper := p.quantiles(); slices.Contains(lower, "a") || slices.Contains(upper, "a") {
		t.Errorf("finished a in %v %v", lower, upper)
	}
}

// TestPBTNoCheckpoint: a lower trial exploits only an upper trial with a
// checkpoint.
func TestPBTNoCheckpoint(t *testing.T) {
	p := newPBT(t, nil)
	p.Add("a", nil)
	p.Add("b", nil)
	p.Result(result("b", 10, 5), Context{Rand: pcg(1)}) // upper, no checkpoint
	d := p.Result(result("a", 10, 1), Context{Rand: pcg(2)})[0]
	want := "perturbation at t 10: score 1 in the lower quantile, but no upper trial has a checkpoint"
	if d.Action != Continue || d.Reason != want {
		t.Errorf("a: %s %q, want Continue %q", d.Action, d.Reason, want)
	}
}

// TestPBTFillConfig: keys the param_space left out are drawn from the
// mutations; keys it set are kept.
func TestPBTFillConfig(t *testing.T) {
	p := newPBT(t, func(c *PBTConfig) {
		c.HyperparamMutations["nested"] = Mutation{Nested: map[string]Mutation{"k": {Choices: []any{"only"}}}}
	})
	in := map[string]any{"lr": 0.5}
	got := p.FillConfig(in, pcg(4))
	// Sorted keys: lr is set; nested draws IntN(1); opt draws IntN(3).
	twin := pcg(4)
	twin.Uint64()
	want := map[string]any{"lr": 0.5, "nested": map[string]any{"k": "only"}, "opt": []any{"sgd", "adam", "rmsprop"}[twin.IntN(3)]}
	if !cmp.Equal(got, want) || len(in) != 1 {
		t.Errorf("fill = %v (input %v), want %v", got, in, want)
	}
}
