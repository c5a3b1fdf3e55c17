package search

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestTrialSameSeedSameConfigs(t *testing.T) {
	s := mustParse(t, map[string]any{
		"lr":    map[string]any{"loguniform": []any{1e-5, 1e-1}},
		"mom":   map[string]any{"uniform": []any{0.1, 0.9}},
		"act":   map[string]any{"choice": []any{"relu", "tanh", "gelu"}},
		"depth": map[string]any{"randint": []any{1, 100}},
		"grid":  map[string]any{"grid_search": []any{1, 2}},
	})
	differ := false
	for i := range 50 {
		c1, tag1 := s.Trial(i, 42)
		c2, tag2 := s.Trial(i, 42)
		if diff := cmp.Diff(c1, c2); diff != "" || tag1 != tag2 {
			t.Fatalf("trial %d differs between two calls with the same seed:\n%s\n%s vs %s", i, diff, tag1, tag2)
		}
		c3, _ := s.Trial(i, 43)
		if !cmp.Equal(c1, c3) {
			differ = true
		}
	}
	if !differ {
		t.Error("seeds 42 and 43 gave the same configs")
	}
}

func TestTrialIndicesDiffer(t *testing.T) {
	s := mustParse(t, map[string]any{"x": map[string]any{"uniform": []any{0, 1}}})
	seen := map[float64]bool{}
	for i := range 100 {
		c, _ := s.Trial(i, 7)
		seen[c["x"].(float64)] = true
	}
	if len(seen) != 100 {
		t.Errorf("100 trials gave %d distinct values", len(seen))
	}
}

func TestTrialGridCounts(t *testing.T) {
	s := mustParse(t, map[string]any{
		"a": map[string]any{"grid_search": []any{1, 2, 3}},
		"b": map[string]any{"grid_search": []any{"x", "y", "z"}},
	})
	n := s.NumTrials(3)
	if n != 27 {
		t.Fatalf("NumTrials(3) = %d, want 27", n)
	}
	countA, countB, pairs := map[any]int{}, map[any]int{}, map[[2]any]int{}
	for i := range n {
		c, _ := s.Trial(i, 0)
		countA[c["a"]]++
		countB[c["b"]]++
		pairs[[2]any{c["a"], c["b"]}]++
	}
	for _, counts := range []map[any]int{countA, countB} {
		for v, c := range counts {
			if c != 9 {
				t.Errorf("value %v appears %d times, want 9", v, c)
			}
		}
	}
	for p, c := range pairs {
		if c != 3 {
			t.Errorf("grid point %v appears %d times, want 3 (once per sample)", p, c)
		}
	}
}

func TestTrialGridOrder(t *testing.T) {
	// Ray: the first grid key by path varies fastest.
	s := mustParse(t, map[string]any{
		"b": map[string]any{"grid_search": []any{10, 20}},
		"a": map[string]any{"grid_search": []any{1, 2, 3}},
	})
	var got [][2]any
	for i := range 7 {
		c, _ := s.Trial(i, 0)
		got = append(got, [2]any{c["a"], c["b"]})
	}
	want := [][2]any{{1, 10}, {2, 10}, {3, 10}, {1, 20}, {2, 20}, {3, 20}, {1, 10}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("grid order (-want +got):\n%s", diff)
	}
}

func TestTrialBounds(t *testing.T) {
	s := mustParse(t, map[string]any{
		"u":   map[string]any{"uniform": []any{-1, 2}},
		"qu":  map[string]any{"quniform": []any{0, 1, 0.1}},
		"lu":  map[string]any{"loguniform": []any{1e-4, 1e-1}},
		"lu2": map[string]any{"loguniform": []any{1, 1024, 2}},
		"qlu": map[string]any{"qloguniform": []any{1e-4, 1e-1, 5e-5}},
		"ri":  map[string]any{"randint": []any{0, 3}},
		"qri": map[string]any{"qrandint": []any{-10, 20, 5}},
		"n":   map[string]any{"randn": []any{5, 0.001}},
		"c":   map[string]any{"choice": []any{1, 2}},
	})
	seenRI, seenQRI := map[int]bool{}, map[int]bool{}
	for i := range 2000 {
		c, _ := s.Trial(i, 1)
		inRange(t, "u", c["u"].(float64), -1, 2)
		multiple(t, "qu", inRange(t, "qu", c["qu"].(float64), 0, 1), 0.1)
		inRange(t, "lu", c["lu"].(float64), 1e-4, 1e-1)
		inRange(t, "lu2", c["lu2"].(float64), 1, 1024)
		multiple(t, "qlu", inRange(t, "qlu", c["qlu"].(float64), 1e-4, 1e-1), 5e-5)
		ri := c["ri"].(int)
		seenRI[ri] = true
		qri := c["qri"].(int)
		seenQRI[qri] = true
		if qri%5 != 0 || qri < -10 || qri > 20 {
			t.Fatalf("qrandint gave %d", qri)
		}
		inRange(t, "n", c["n"].(float64), 4.9, 5.1)
	}
	if diff := cmp.Diff(map[int]bool{0: true, 1: true, 2: true}, seenRI); diff != "" {
		t.Errorf("randint [0, 3) values (-want +got):\n%s", diff)
	}
	if len(seenQRI) != 7 || !seenQRI[20] || !seenQRI[-10] {
		t.Errorf("qrandint [-10, 20, 5] gave %v, want all 7 multiples of 5, upper inclusive", seenQRI)
	}
}

func inRange(t *testing.T, key string, v, low, high float64) float64 {
	t.Helper()
	if v < low || v > high || math.IsNaN(v) {
		t.Fatalf("%s = %v, want within [%v, %v]", key, v, low, high)
	}
	return v
}

func multiple(t *testing.T, key string, v, q float64) {
	t.Helper()
	if k := v / q; math.Abs(k-math.Round(k)) > 1e-9 {
		t.Fatalf("%s = %v is not a multiple of %v", key, v, q)
	}
}

func TestTrialQuantizedValuesAreClean(t *testing.T) {
	s := mustParse(t, map[string]any{"x": map[string]any{"quniform": []any{0, 1, 0.1}}})
	for i := range 200 {
		c, _ := s.Trial(i, 3)
		v := c["x"].(float64)
		if got := formatFloat(v); len(got) > 6 {
			t.Fatalf("quniform value %v is not rounded to q's decimals", v)
		}
	}
}

func TestTrialConfigIsFresh(t *testing.T) {
	shared := map[string]any{"k": 1}
	s := mustParse(t, map[string]any{
		"nested": map[string]any{"a": 1},
		"g":      map[string]any{"grid_search": []any{shared}},
		"c":      map[string]any{"choice": []any{[]any{1, 2}}},
	})
	c1, _ := s.Trial(0, 0)
	c1["nested"].(map[string]any)["a"] = 99
	c1["g"].(map[string]any)["k"] = 99
	c1["c"].([]any)[0] = 99
	c2, _ := s.Trial(0, 0)
	want := map[string]any{"nested": map[string]any{"a": 1}, "g": map[string]any{"k": 1}, "c": []any{1, 2}}
	if diff := cmp.Diff(want, c2); diff != "" {
		t.Errorf("second trial sees the first one's changes (-want +got):\n%s", diff)
	}
	if shared["k"] != 1 {
		t.Error("the caller's space was changed")
	}
}

func TestTrialTag(t *testing.T) {
	tests := []struct {
		name  string
		space map[string]any
		index int
		want  string
	}{
		{"no domains", map[string]any{"a": 1}, 4, "4"},
		{"floats", map[string]any{
			"lr":       map[string]any{"grid_search": []any{0.001}},
			"momentum": map[string]any{"grid_search": []any{0.9}},
		}, 0, "0_lr=0.0010,momentum=0.9000"},
		{"nested key and ints", map[string]any{
			"model": map[string]any{"depth": map[string]any{"grid_search": []any{3}}},
			"batch": map[string]any{"grid_search": []any{32.0}},
		}, 2, "2_batch=32,model/depth=3"},
		{"small float", map[string]any{"lr": map[string]any{"grid_search": []any{1e-5}}}, 0, "0_lr=1e-05"},
		{"strings cleaned", map[string]any{"act fn": map[string]any{"grid_search": []any{"relu (fast)"}}}, 0, "0_act_fn=relu_fast"},
		{"bool and list", map[string]any{
			"b": map[string]any{"grid_search": []any{true}},
			"l": map[string]any{"grid_search": []any{[]any{1, 2}}},
		}, 0, "0_b=true,l=1_2"},
		{"list index", map[string]any{"l": []any{0, map[string]any{"grid_search": []any{"x"}}}}, 0, "0_l/1=x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, tag := mustParse(t, tt.space).Trial(tt.index, 0)
			if tag != tt.want {
				t.Errorf("tag = %q, want %q", tag, tt.want)
			}
		})
	}
}

func TestFormatFloat(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0"}, {3, "3"}, {-2, "-2"}, {0.001, "0.0010"}, {0.9, "0.9000"},
		{12.345678, "12.3457"}, {-0.5, "-0.5000"}, {1.2345e-5, "1.234e-05"}, {0.00012345, "0.0001234"},
	}
	for _, tt := range tests {
		if got := formatFloat(tt.v); got != tt.want {
			t.Errorf("formatFloat(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestTrialNegativeIndexPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Trial(-1) did not panic")
		}
	}()
	mustParse(t, nil).Trial(-1, 0)
}

func TestTrialID(t *testing.T) {
	if got := TrialID("a2b9e", 0); got != "a2b9e_00000" {
		t.Errorf("TrialID = %q", got)
	}
	if got := TrialID("a2b9e", 123456); got != "a2b9e_123456" {
		t.Errorf("TrialID = %q", got)
	}
}

func TestTrialDirName(t *testing.T) {
	ts := time.Date(2024, 3, 5, 7, 8, 9, 0, time.UTC)
	tests := []struct {
		name, trial, tag, want string
	}{
		{"ray example", "train_a2b9e_00000", "0_lr=0.0010,momentum=0.9000", "train_a2b9e_00000_0_lr=0.0010,momentum=0.9000_2024-03-05_07-08-09"},
		{"slash and parens", "t_1", "1_model/act=relu(x)", "t_1_1_model_act=relu_x__2024-03-05_07-08-09"},
		{"unsafe characters", "t ä*:", `2_a=b\c`, "t_____2_a=b_c_2024-03-05_07-08-09"},
		{"leading dot", "..", "0", "_._0_2024-03-05_07-08-09"},
		{"leading dash", "-x", "0", "_x_0_2024-03-05_07-08-09"},
		{"truncated", strings.Repeat("k", 200), "0", strings.Repeat("k", 130) + "_2024-03-05_07-08-09"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TrialDirName(tt.trial, tt.tag, ts)
			if got != tt.want {
				t.Errorf("TrialDirName = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTrialDirNameLongKeys(t *testing.T) {
	// Ray's test: long config keys still give a dir name under 200 characters.
	space := map[string]any{}
	for _, k := range []string{"a", "b", "c", "d"} {
		space[strings.Repeat(k, 80)] = map[string]any{"uniform": []any{0, 1}}
	}
	_, tag := mustParse(t, space).Trial(0, 0)
	got := TrialDirName("train_abcde_00000", tag, time.Now())
	if len(got) >= 200 || strings.ContainsAny(got, "/()") || got == "." || got == ".." {
		t.Errorf("TrialDirName = %q (%d bytes)", got, len(got))
	}
}

func TestTrialSameFromJSONNumbers(t *testing.T) {
	// A space that travelled as JSON has float64 where YAML gave int: the
	// trials must agree in value and tag.
	fromYAML := mustParse(t, map[string]any{
		"b": map[string]any{"grid_search": []any{16, 32}},
		"c": map[string]any{"choice": []any{1, 2, 3}},
		"r": map[string]any{"randint": []any{0, 10}},
		"q": map[string]any{"qrandint": map[string]any{"lower": 0, "upper": 10, "q": 2}},
	})
	fromJSON := mustParse(t, map[string]any{
		"b": map[string]any{"grid_search": []any{16.0, 32.0}},
		"c": map[string]any{"choice": []any{1.0, 2.0, 3.0}},
		"r": map[string]any{"randint": []any{0.0, 10.0}},
		"q": map[string]any{"qrandint": map[string]any{"lower": 0.0, "upper": 10.0, "q": 2.0}},
	})
	for i := range 20 {
		c1, tag1 := fromYAML.Trial(i, 5)
		c2, tag2 := fromJSON.Trial(i, 5)
		j1, _ := json.Marshal(c1)
		j2, _ := json.Marshal(c2)
		if tag1 != tag2 || string(j1) != string(j2) {
			t.Fatalf("trial %d: %s %s vs %s %s", i, tag1, j1, tag2, j2)
		}
	}
}

func TestTrialLogAndNormalDistributions(t *testing.T) {
	tests := []struct {
		name   string
		domain map[string]any
		check  func(v any) error // type, bounds and quantization of one value
		want   []any             // every value 3,000 trials must give, if the set is small
	}{
		{"lograndint: ints in [low, high)", map[string]any{"lograndint": []any{1, 5}},
			intIn(1, 4, 1), []any{1, 2, 3, 4}},
		{"lograndint base 2", map[string]any{"lograndint": []any{16, 256, 2}},
			intIn(16, 255, 1), nil},
		{"lograndint wide", map[string]any{"lograndint": []any{1, 1 << 40}},
			intIn(1, 1<<40-1, 1), nil},
		{"qlograndint: multiples of q, high inclusive", map[string]any{"qlograndint": []any{1, 20, 5}},
			intIn(5, 20, 5), []any{5, 10, 15, 20}},
		{"qlograndint q 1: high exclusive as in Ray", map[string]any{"qlograndint": []any{2, 6, 1}},
			intIn(2, 5, 1), []any{2, 3, 4, 5}},
		{"qlograndint bounds moved inwards", map[string]any{"qlograndint": []any{3, 9, 4}},
			intIn(4, 8, 4), []any{4, 8}},
		{"qlograndint one multiple", map[string]any{"qlograndint": []any{3, 5, 4}},
			intIn(4, 4, 4), []any{4}},
		{"qrandn", map[string]any{"qrandn": []any{10, 2, 0.5}},
			floatMultiple(0.5), nil},
		{"qrandn q 1 rounds too", map[string]any{"qrandn": map[string]any{"mean": 0, "sd": 3, "q": 1}},
			floatMultiple(1), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, map[string]any{"x": tt.domain})
			seen := map[any]bool{}
			for i := range 3000 {
				c, _ := s.Trial(i, 11)
				if err := tt.check(c["x"]); err != nil {
					t.Fatalf("trial %d: %v", i, err)
				}
				if again, _ := s.Trial(i, 11); again["x"] != c["x"] {
					t.Fatalf("trial %d: %v, then %v with the same seed", i, c["x"], again["x"])
				}
				seen[c["x"]] = true
			}
			if tt.want == nil {
				return
			}
			var got []any
			for v := range seen {
				got = append(got, v)
			}
			less := func(a, b any) bool { return a.(int) < b.(int) }
			if diff := cmp.Diff(tt.want, got, cmpopts.SortSlices(less)); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
		})
	}
}

func intIn(low, high, q int) func(any) error {
	return func(v any) error {
		i, ok := v.(int)
		switch {
		case !ok:
			return fmt.Errorf("%v is a %T, want int", v, v)
		case i < low || i > high:
			return fmt.Errorf("%d is outside [%d, %d]", i, low, high)
		case i%q != 0:
			return fmt.Errorf("%d is not a multiple of %d", i, q)
		}
		return nil
	}
}

func floatMultiple(q float64) func(any) error {
	return func(v any) error {
		f, ok := v.(float64)
		switch {
		case !ok:
			return fmt.Errorf("%v is a %T, want float64", v, v)
		case f/q != math.Round(f/q):
			return fmt.Errorf("%v is not a multiple of %v", f, q)
		}
		return nil
	}
}

// Ray draws lograndint as floor(exp(uniform(log low, log high))): each
// decade of [1, 1000) is as likely as the others.
func TestLogRandIntIsLogUniform(t *testing.T) {
	s := mustParse(t, map[string]any{"x": map[string]any{"lograndint": []any{1, 1000}}})
	var decades [3]int
	const n = 30000
	for i := range n {
		c, _ := s.Trial(i, 5)
		decades[len(strconv.Itoa(c["x"].(int)))-1]++
	}
	for d, count := range decades {
		if frac := float64(count) / n; math.Abs(frac-1.0/3) > 0.02 {
			t.Errorf("decade %d got %.3f of the samples, want 1/3", d, frac)
		}
	}
}

// Ray's Quantized sampler gives high only half a bin: qlograndint [10, 30,
// 10] draws an int from [10, 30) and rounds it half to even, so 15 and 25
// both go to 20 and 30 comes from 26..29 only.
func TestQLogRandIntRoundsHalfToEven(t *testing.T) {
	s := mustParse(t, map[string]any{"x": map[string]any{"qlograndint": []any{10, 30, 10}}})
	counts := map[int]int{}
	const n = 30000
	for i := range n {
		c, _ := s.Trial(i, 9)
		counts[c["x"].(int)]++
	}
	// P(floor(x) in [a, b)) for x log-uniform in [10, 30).
	p := func(a, b float64) float64 { return (math.Log(b) - math.Log(a)) / (math.Log(30) - math.Log(10)) }
	want := map[int]float64{10: p(10, 15), 20: p(15, 26), 30: p(26, 30)}
	for v, w := range want {
		if got := float64(counts[v]) / n; math.Abs(got-w) > 0.02 {
			t.Errorf("P(%d) = %.3f, want %.3f", v, got, w)
		}
	}
}

// The draws of a seed are part of the contract: a restored experiment
// regenerates its trials from (seed, index) alone.
func TestTrialNewDistributionsGolden(t *testing.T) {
	s := mustParse(t, map[string]any{
		"a": map[string]any{"lograndint": []any{1, 1000}},
		"b": map[string]any{"qlograndint": []any{10, 1000, 10}},
		"c": map[string]any{"qrandn": []any{0, 1, 0.1}},
	})
	var got []string
	for i := range 3 {
		_, tag := s.Trial(i, 42)
		got = append(got, tag)
	}
	want := []string{"0_a=559,b=620,c=-1.7000", "1_a=20,b=30,c=0.2000", "2_a=443,b=960,c=-0.4000"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
}
