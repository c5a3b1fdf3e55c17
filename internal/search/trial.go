package search

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Trial returns the config and experiment tag of trial index (0-based) for
// the given seed. Trial index gets grid point index % GridSize() and belongs
// to sample index / GridSize(), as in Ray's BasicVariantGenerator (for each
// sample, for each grid point, the first grid key by path varying fastest).
// Random domains are drawn from an RNG that depends only on seed and index,
// so Trial is deterministic and stateless. The config is a fresh map that
// shares nothing with the space or with other trials. Trial panics if index
// is negative.
func (s *Space) Trial(index int, seed int64) (config map[string]any, tag string) {
	if index < 0 {
		panic(fmt.Sprintf("search: negative trial index %d", index))
	}
	vals := s.resolve(index, seed)
	return build(s.tree, vals).(map[string]any), s.tag(index, vals)
}

// resolve picks the grid values and draws the random values of trial index,
// in the order of s.params.
func (s *Space) resolve(index int, seed int64) []any {
	vals := make([]any, len(s.params))
	point := index % s.gridSize
	for _, p := range s.grid {
		n := len(p.values)
		vals[p.id] = CopyValue(p.values[point%n])
		point /= n
	}
	r := trialRand(seed, index)
	for _, p := range s.random {
		vals[p.id] = p.dist.sample(r)
	}
	return vals
}

// build copies tree, replacing each *param by its resolved value.
func build(tree any, vals []any) any {
	switch x := tree.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, v := range x {
			out[k] = build(v, vals)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			out[i] = build(v, vals)
		}
		return out
	case *param:
		return CopyValue(vals[x.id])
	}
	return tree
}

// tag is Ray's experiment_tag: "<index>_<k=v,...>" over the domains in path
// order, or "<index>" when the space has none.
func (s *Space) tag(index int, vals []any) string {
	if len(s.params) == 0 {
		return strconv.Itoa(index)
	}
	parts := make([]string, len(s.params))
	for i, p := range s.params {
		parts[i] = tagKey(p.path) + "=" + tagValue(vals[p.id])
	}
	return strconv.Itoa(index) + "_" + strings.Join(parts, ",")
}

func tagKey(path []string) string {
	parts := make([]string, len(path))
	for i, k := range path {
		parts[i] = clean(k)
	}
	return strings.Join(parts, "/")
}

// tagValue formats a resolved value for a tag: floats with formatFloat, and
// everything else as JSON cleaned like Ray's _clean_value.
func tagValue(v any) string {
	switch x := v.(type) {
	case float64:
		return formatFloat(x)
	case string:
		return clean(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return clean(fmt.Sprint(v))
	}
	return clean(string(b))
}

// formatFloat writes integral floats without decimals ("3"), other floats
// from 0.001 up with four decimals as Ray's "%.4f" does ("0.0010",
// "0.9000"), and smaller or huge ones with four significant digits in %g
// style ("1.235e-05").
func formatFloat(v float64) string {
	a := math.Abs(v)
	switch {
	case a < 1e15 && v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', -1, 64)
	case a >= 1e-3 && a < 1e15:
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

var unsafeTag = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// clean is Ray's _clean_value for non-floats: runs of characters other than
// letters, digits, '_' and '-' become '_', and '_' is trimmed at both ends.
func clean(s string) string {
	return strings.Trim(unsafeTag.ReplaceAllString(s, "_"), "_")
}
