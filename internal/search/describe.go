package search

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tunejet/tunejet/internal/settings"
)

// Domain describes one domain of a Space, for a searcher that models the
// space (TPE) instead of sampling it with Space.Trial. It is a copy: changing
// it changes nothing in the Space.
//
// Low and High are the smallest and largest value a trial can get, both
// inclusive: randint [0, 10] has High 9, and uniform [0, 1] has High 1 (Ray
// never draws it, a model-based searcher may). Q is the step between the
// values of a quantized or integer domain (1 for randint and lograndint) and
// 0 for a continuous one; the values of a quantized domain are the multiples
// of Q between Low and High. randn and qrandn have Mean and SD instead of
// bounds; choice and grid_search have Choices instead of numbers.
type Domain struct {
	Path    []string // key path from the top of the space; list indices in decimal
	Kind    string   // the domain keyword: "uniform", "choice", "grid_search", ...
	Low     float64  // smallest value (numeric domains but randn, qrandn)
	High    float64  // largest value, inclusive
	Q       float64  // step between values; 0 when continuous
	Base    float64  // the log base of the log domains; 0 for the others
	Log     bool     // uniform in log space
	Int     bool     // values are int
	Mean    float64  // randn and qrandn
	SD      float64  // randn and qrandn
	Choices []any    // the values of choice and grid_search
}

// Domains describes every domain of the space, grid_search ones included,
// sorted by key path: the order of the values Config takes.
func (s *Space) Domains() []Domain {
	out := make([]Domain, len(s.params))
	for i, p := range s.params {
		out[i] = p.describe()
	}
	return out
}

// DomainsByKey returns the space's domains by dotted key ("model.lr").
func (s *Space) DomainsByKey() map[string]Domain {
	out := make(map[string]Domain, len(s.params))
	for _, d := range s.Domains() {
		out[strings.Join(d.Path, ".")] = d
	}
	return out
}

// HasDomainUnder reports whether a domain of domains (by dotted key) lies
// below the dotted key k.
func HasDomainUnder(domains map[string]Domain, k string) bool {
	for dk := range domains {
		if strings.HasPrefix(dk, k+".") {
			return true
		}
	}
	return false
}

func (p *param) describe() Domain {
	d := Domain{Path: slices.Clone(p.path), Kind: p.kind}
	if p.kind == kwSampleFrom {
		return d // the driver's: nothing to model
	}
	switch x := p.dist.(type) {
	case nil: // grid_search
		d.Choices = copyList(p.values)
	case choiceDist:
		d.Choices = copyList(x.values)
	case uniformDist:
		d.Low, d.High, d.Q = x.low, x.high, x.q
	case logUniformDist:
		d.Low, d.High, d.Q, d.Base, d.Log = x.low, x.high, x.q, x.base, true
	case intDist:
		d.Low, d.High, d.Q, d.Int = float64(x.low), float64(x.low+x.n-1), float64(x.q), true
	case logIntDist:
		last := x.high // reachable when rounding to a multiple of q > 1
		if x.q == 1 {
			last = x.high - 1
		}
		d.Low, d.High, d.Q, d.Base, d.Log, d.Int = float64(x.low), float64(last), float64(x.q), x.base, true, true
	case normalDist:
		d.Mean, d.SD, d.Q = x.mean, x.sd, x.q
	}
	return d
}

func copyList(l []any) []any {
	out := make([]any, len(l))
	for i, v := range l {
		out[i] = CopyValue(v)
	}
	return out
}

// Lookup returns the value at the domain's path in config, a trial config
// as Space.Trial builds it or as decoded from JSON, and whether there is
// one.
func (d Domain) Lookup(config map[string]any) (any, bool) {
	var v any = config
	for _, k := range d.Path {
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[k]
			if !ok {
				return nil, false
			}
			v = e
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// Unmodeled returns the error of a model-based search algorithm alg for a
// domain it cannot model (grid_search, which only a grid runs; randn and
// qrandn, which have no bounds), at the domain's key; nil for the others.
func (d Domain) Unmodeled(alg string) error {
	switch d.Kind {
	case kwGrid, kwRandn, kwQRandn:
		return &settings.Error{Key: strings.Join(d.Path, "."), Msg: fmt.Sprintf("%s is not supported by search_alg %q; "+
			"use a bounded domain (uniform, choice, ...) or search_alg random or grid", d.Kind, alg)}
	}
	return nil
}

// Number reads the trial's value of the domain from config as a
// model-based searcher models it: a choice's index, or the number itself,
// finite (and above 0 for a log domain); false when config has none or it
// is not a value of the domain's kind.
func (d Domain) Number(config map[string]any) (float64, bool) {
	v, ok := d.Lookup(config)
	if !ok {
		return 0, false
	}
	if d.Kind == kwChoice {
		i := d.Index(v)
		return float64(i), i >= 0
	}
	x, _, ok := settings.Number(v)
	if !ok || math.IsNaN(x) || math.IsInf(x, 0) || d.Log && x <= 0 {
		return 0, false
	}
	return x, true
}

// Index returns the position of v among the domain's Choices, or -1 if it
// is not one of them. Numbers compare by value (1 and 1.0 are equal, so a
// config decoded from JSON finds its choice), mappings and lists by their
// contents.
func (d Domain) Index(v any) int {
	n, err := normalize(nil, v)
	if err != nil {
		return -1
	}
	return slices.IndexFunc(d.Choices, func(c any) bool { return sameValue(c, n) })
}

// sameValue compares two normalized values, numbers by value.
func sameValue(a, b any) bool {
	if fa, ok := toFloat(a); ok {
		fb, ok := toFloat(b)
		return ok && fa == fb
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			if f, ok := y[k]; !ok || !sameValue(e, f) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		return ok && slices.EqualFunc(x, y, sameValue)
	}
	return a == b
}

// Value turns a number drawn by a searcher into a value of the numeric
// domain: rounded to a multiple of Q when Q > 0, kept within [Low, High],
// and an int for integer domains.
func (d Domain) Value(x float64) any {
	v := clamp(quantize(x, d.Q, d.Low, d.High), d.Low, d.High)
	if d.Int {
		return int(math.Round(v))
	}
	return v
}

// Config builds a trial config from one value per domain, in the order of
// Domains: the space's plain values with each domain replaced by its value.
// The config shares nothing with values or the space.
func (s *Space) Config(values []any) (map[string]any, error) {
	if len(values) != len(s.params) {
		return nil, fmt.Errorf("search: config needs %d values, one per domain, got %d", len(s.params), len(values))
	}
	return build(s.tree, values).(map[string]any), nil
}

// Tag is Ray's experiment_tag of trial index with config, a config a
// searcher built rather than Trial: "<index>_<k=v,...>" over the domains'
// values in config, in path order.
func (s *Space) Tag(index int, config map[string]any) string {
	vals := make([]any, len(s.params))
	for _, p := range s.params {
		vals[p.id], _ = Domain{Path: p.path}.Lookup(config)
	}
	return s.tag(index, vals)
}
