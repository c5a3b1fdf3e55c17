package search

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDomains(t *testing.T) {
	s, err := ParseSpace(map[string]any{
		"a": map[string]any{"uniform": []any{0, 2}},
		"b": map[string]any{"quniform": []any{0, 1, 0.25}},
		"c": map[string]any{"loguniform": []any{1e-4, 1e-1}},
		"d": map[string]any{"qloguniform": []any{1, 64, 1, 2}},
		"e": map[string]any{"randint": []any{0, 10}},
		"f": map[string]any{"qrandint": []any{0, 100, 10}},
		"g": map[string]any{"lograndint": []any{16, 256}},
		"h": map[string]any{"qlograndint": []any{1, 20, 5}},
		"i": map[string]any{"randn": []any{1, 2}},
		"j": map[string]any{"choice": []any{"x", 2}},
		"k": map[string]any{"grid_search": []any{1, 2}},
		"l": []any{0, map[string]any{"m": map[string]any{"uniform": []any{-1, 1}}}},
		"n": 7,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Domain{
		{Path: []string{"a"}, Kind: "uniform", Low: 0, High: 2},
		{Path: []string{"b"}, Kind: "quniform", Low: 0, High: 1, Q: 0.25},
		{Path: []string{"c"}, Kind: "loguniform", Low: 1e-4, High: 1e-1, Base: 10, Log: true},
		{Path: []string{"d"}, Kind: "qloguniform", Low: 1, High: 64, Q: 1, Base: 2, Log: true},
		{Path: []string{"e"}, Kind: "randint", Low: 0, High: 9, Q: 1, Int: true},
		{Path: []string{"f"}, Kind: "qrandint", Low: 0, High: 100, Q: 10, Int: true},
		{Path: []string{"g"}, Kind: "lograndint", Low: 16, High: 255, Q: 1, Base: 10, Log: true, Int: true},
		{Path: []string{"h"}, Kind: "qlograndint", Low: 5, High: 20, Q: 5, Base: 10, Log: true, Int: true},
		{Path: []string{"i"}, Kind: "randn", Mean: 1, SD: 2},
		{Path: []string{"j"}, Kind: "choice", Choices: []any{"x", 2}},
		{Path: []string{"k"}, Kind: "grid_search", Choices: []any{1, 2}},
		{Path: []string{"l", "1", "m"}, Kind: "uniform", Low: -1, High: 1},
	}
	got := s.Domains()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Domains (-want +got):\n%s", diff)
	}
	got[9].Choices[0] = "changed"
	got[0].Path[0] = "changed"
	if d := s.Domains(); d[9].Choices[0] != "x" || d[0].Path[0] != "a" {
		t.Error("changing a Domain changed the Space")
	}
}

// A config survives Lookup and Config, also after a JSON round trip.
func TestDomainsLookupConfig(t *testing.T) {
	s, err := ParseSpace(map[string]any{
		"model": map[string]any{"lr": map[string]any{"loguniform": []any{1e-4, 1e-1}}, "layers": map[string]any{"randint": []any{1, 5}}},
		"opt":   map[string]any{"choice": []any{"adam", map[string]any{"sgd": 0.9}, 3}},
		"l":     []any{"x", map[string]any{"qrandint": []any{0, 10, 2}}},
		"const": "c",
	})
	if err != nil {
		t.Fatal(err)
	}
	domains := s.Domains()
	for i := range 20 {
		config, _ := s.Trial(i, 7)
		var decoded map[string]any
		b, _ := json.Marshal(config)
		if err := json.Unmarshal(b, &decoded); err != nil {
			t.Fatal(err)
		}
		values := make([]any, len(domains))
		for j, d := range domains {
			v, ok := d.Lookup(decoded)
			if !ok {
				t.Fatalf("trial %d: no value at %v", i, d.Path)
			}
			switch {
			case d.Choices != nil:
				k := d.Index(v)
				if k < 0 {
					t.Fatalf("trial %d: %v is not a choice of %v", i, v, d.Path)
				}
				values[j] = d.Choices[k]
			default:
				values[j] = d.Value(v.(float64))
			}
		}
		got, err := s.Config(values)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(config, got); diff != "" {
			t.Fatalf("trial %d (-want +got):\n%s", i, diff)
		}
	}
	if _, err := s.Config(nil); err == nil {
		t.Error("Config with too few values: no error")
	}
}

func TestDomainLookupMissing(t *testing.T) {
	d := Domain{Path: []string{"a", "1", "b"}}
	for _, config := range []map[string]any{
		{},
		{"a": 1},
		{"a": []any{0}},
		{"a": []any{0, map[string]any{}}},
		{"a": map[string]any{"1": 2}},
	} {
		if v, ok := d.Lookup(config); ok {
			t.Errorf("Lookup(%v) = %v, want none", config, v)
		}
	}
	if v, ok := d.Lookup(map[string]any{"a": []any{0, map[string]any{"b": nil}}}); !ok || v != nil {
		t.Errorf("Lookup of a null = %v, %t", v, ok)
	}
}

func TestDomainIndexAndValue(t *testing.T) {
	d := Domain{Choices: []any{1, "1", []any{1.5, map[string]any{"a": 2}}}}
	for _, c := range []struct {
		v    any
		want int
	}{{1.0, 0}, {int64(1), 0}, {"1", 1}, {[]any{1.5, map[string]any{"a": 2.0}}, 2}, {2, -1}, {[]any{1.5}, -1}, {struct{}{}, -1}} {
		if got := d.Index(c.v); got != c.want {
			t.Errorf("Index(%v) = %d, want %d", c.v, got, c.want)
		}
	}
	for _, c := range []struct {
		d    Domain
		x    float64
		want any
	}{
		{Domain{Low: 0, High: 1}, 0.3, 0.3},
		{Domain{Low: 0, High: 1}, 1.2, 1.0},
		{Domain{Low: 0, High: 1, Q: 0.1}, 0.29999, 0.3},
		{Domain{Low: 0, High: 9, Q: 1, Int: true}, 8.6, 9},
		{Domain{Low: 0, High: 9, Q: 1, Int: true}, 9.4, 9},
		{Domain{Low: 5, High: 20, Q: 5, Int: true}, 12.6, 15},
	} {
		if got := c.d.Value(c.x); got != c.want {
			t.Errorf("%+v.Value(%v) = %v (%T), want %v", c.d, c.x, got, got, c.want)
		}
	}
}

// A config a searcher built gets the tag Trial would give the same values.
func TestTagOfAConfig(t *testing.T) {
	s, err := ParseSpace(map[string]any{
		"lr":    map[string]any{"loguniform": []any{1e-4, 1e-1}},
		"model": map[string]any{"depth": map[string]any{"randint": []any{1, 8}}, "act": "relu"},
	})
	if err != nil {
		t.Fatal(err)
	}
	config, tag := s.Trial(3, 7)
	if got := s.Tag(3, config); got != tag {
		t.Fatalf("Tag = %q, Trial's tag %q", got, tag)
	}
}
