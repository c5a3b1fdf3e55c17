package search

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tunejet/tunejet/internal/settings"
)

// Space is a validated param_space. It is immutable and safe for concurrent
// use.
type Space struct {
	tree     map[string]any // the space, with each domain replaced by its *param
	params   []*param       // every domain, sorted by path
	grid     []*param       // the grid_search domains, sorted by path
	random   []*param       // the random domains, sorted by path
	driven   []*param       // the sample_from domains, sorted by path
	gridSize int            // product of the grid_search lengths
	flat     []string       // FlatKeys
}

// param is one domain of the space.
type param struct {
	id     int      // index into a trial's resolved values
	path   []string // key path from the top of the space
	kind   string   // the domain keyword
	values []any    // the grid_search values
	dist   sampler  // the random domains
}

// ParseSpace validates a param_space as decoded from JSON or YAML (nested
// map[string]any, []any and scalars) or built in Go. A nil or empty space is
// valid: every trial gets an empty config. The space itself is the config's
// mapping, never a domain: its keys are config keys, even one named like a
// domain keyword ({choice: [1, 2]} is a config with a list under "choice").
// Errors are *settings.Error, keyed relative to the space.
func ParseSpace(space map[string]any) (*Space, error) {
	norm, err := normalizeMap(nil, space)
	if err != nil {
		return nil, err
	}
	s := &Space{gridSize: 1}
	if s.tree, err = s.walkObject(nil, norm); err != nil {
		return nil, err
	}
	if err := s.index(); err != nil {
		return nil, err
	}
	s.flat = flatKeys(nil, norm, nil)
	slices.Sort(s.flat)
	return s, nil
}

// walk validates v at path and returns it with every domain replaced by a
// *param. It visits mapping keys in sorted order, so the first error is
// stable.
func (s *Space) walk(path []string, v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if kw, raw, ok := domainOf(x); ok {
			return s.domain(path, kw, raw)
		}
		if v, ok, err := unwrap(path, x); ok || err != nil {
			return v, err
		}
		return s.walkObject(path, x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			w, err := s.walk(child(path, strconv.Itoa(i)), e)
			if err != nil {
				return nil, err
			}
			out[i] = w
		}
		return out, nil
	}
	return v, nil
}

// walkObject walks each entry of the nested object m at path, in key order.
func (s *Space) walkObject(path []string, m map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for _, k := range sortedKeys(m) {
		w, err := s.walk(child(path, k), m[k])
		if err != nil {
			return nil, err
		}
		out[k] = w
	}
	return out, nil
}

// domain parses the domain kw at path.
func (s *Space) domain(path []string, kw string, raw any) (*param, error) {
	p := &param{path: path, kind: kw}
	var err error
	switch kw {
	case kwGrid:
		p.values, err = valueList(path, kw, raw)
	case kwChoice:
		var values []any
		values, err = valueList(path, kw, raw)
		p.dist = choiceDist{values: values}
	case kwSampleFrom:
		// Ray's tune.sample_from: a function of the driver's, named here
		// for people; the driver resolves it (docs/driver.md).
		if name, ok := raw.(string); !ok || name == "" {
			err = keyError(path, fmt.Sprintf("sample_from: expected the name of the driver's function, got %s", settings.Describe(raw)))
		}
	default:
		p.dist, err = parseNumeric(kw, raw)
	}
	var ke *settings.Error
	switch {
	case errors.As(err, &ke):
		return nil, ke
	case err != nil:
		return nil, keyError(path, err.Error())
	}
	s.params = append(s.params, p)
	return p, nil
}

func parseNumeric(kw string, raw any) (sampler, error) {
	d := numericDomains[kw]
	v, err := parseArgs(kw, raw, d.args)
	if err != nil {
		return nil, err
	}
	return d.build(kw, v, d.args)
}

// index sorts the domains by path, numbers them, splits them into grid and
// random ones, and computes the grid size.
func (s *Space) index() error {
	slices.SortFunc(s.params, func(a, b *param) int { return slices.Compare(a.path, b.path) })
	for i, p := range s.params {
		p.id = i
		if p.kind == kwSampleFrom {
			s.driven = append(s.driven, p)
			continue
		}
		if p.kind != kwGrid {
			s.random = append(s.random, p)
			continue
		}
		s.grid = append(s.grid, p)
		if s.gridSize > math.MaxInt/len(p.values) {
			return keyError(p.path, "grid_search: the grid has too many points")
		}
		s.gridSize *= len(p.values)
	}
	return nil
}

// SampledByDriver returns the paths of the sample_from domains, sorted:
// Trial leaves them null, for the driver to resolve (Ray's tune.sample_from,
// called with the config drawn so far).
func (s *Space) SampledByDriver() [][]string {
	out := make([][]string, len(s.driven))
	for i, p := range s.driven {
		out[i] = slices.Clone(p.path)
	}
	return out
}

// TakeSampled sets, in config (a trial's, from Trial), the value of each
// sample_from domain to resolved's (the driver's config for the trial). It
// fails when resolved lacks one.
func (s *Space) TakeSampled(config, resolved map[string]any) error {
	for _, p := range s.driven {
		d := p.describe()
		v, ok := d.Lookup(resolved)
		if !ok {
			return keyError(p.path, "sample_from: the driver's config has no value here")
		}
		if !setPath(config, p.path, CopyValue(v)) {
			return keyError(p.path, "sample_from: the trial's config has no place for the value")
		}
	}
	return nil
}

// setPath sets the value at path in config, a tree of mappings and lists
// that already has a value there.
func setPath(tree any, path []string, v any) bool {
	for i, k := range path {
		last := i == len(path)-1
		switch x := tree.(type) {
		case map[string]any:
			if _, ok := x[k]; !ok {
				return false
			}
			if last {
				x[k] = v
				return true
			}
			tree = x[k]
		case []any:
			j, err := strconv.Atoi(k)
			if err != nil || j < 0 || j >= len(x) {
				return false
			}
			if last {
				x[j] = v
				return true
			}
			tree = x[j]
		default:
			return false
		}
	}
	return false
}

// GridSize is the number of grid points: the product of the lengths of all
// grid_search lists (1 without any).
func (s *Space) GridSize() int { return s.gridSize }

// NumTrials is the number of trials for numSamples samples of the grid:
// GridSize × numSamples, or -1 (unlimited) when numSamples is negative.
func (s *Space) NumTrials(numSamples int) int {
	switch {
	case numSamples < 0:
		return -1
	case numSamples > math.MaxInt/s.gridSize:
		return math.MaxInt
	}
	return s.gridSize * numSamples
}

// OnlyGrid returns a *settings.Error naming the first random domain, by key path,
// or nil if the space holds only grid_search domains and plain values. It
// checks a space for search_alg "grid".
func (s *Space) OnlyGrid() error {
	if len(s.random) == 0 {
		return nil
	}
	p := s.random[0]
	return keyError(p.path, fmt.Sprintf("%s is a random domain; search_alg %q allows only grid_search and plain values", p.kind, "grid"))
}

// FlatKeys returns the space's keys flattened with "/" ("model/lr"), sorted.
// Only nested mappings are flattened: a domain, a literal, a list, a plain
// value and an empty mapping are leaves. Restore compares these with the
// original space.
func (s *Space) FlatKeys() []string {
	return slices.Clone(s.flat)
}

func flatKeys(prefix []string, m map[string]any, out []string) []string {
	for k, v := range m {
		sub, ok := v.(map[string]any)
		if !ok || isLeaf(sub) {
			out = append(out, strings.Join(append(prefix, k), "/"))
			continue
		}
		out = flatKeys(child(prefix, k), sub, out)
	}
	return out
}

// isLeaf reports whether FlatKeys stops at m: a domain, a literal, or an
// empty mapping.
func isLeaf(m map[string]any) bool {
	k, _, ok := single(m)
	return len(m) == 0 || ok && (isKeyword(k) || k == kwLiteral)
}

// child returns path extended by keys, never sharing path's backing array.
func child(path []string, keys ...string) []string {
	return append(slices.Clip(path), keys...)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
