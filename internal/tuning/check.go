package tuning

import (
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/search"

	"github.com/tunejet/tunejet/internal/settings"
)

// checkPoints checks that each point of points_to_evaluate names only keys
// of the param_space (nested keys as nested mappings) and gives each
// domain a value the domain can produce.
func checkPoints(spec *events.ExperimentSpec, space *search.Space, p *settings.Problems) {
	points := spec.TuneConfig.PointsToEvaluate
	if len(points) == 0 {
		return
	}
	if spec.TuneConfig.SearchAlg == SearchGrid {
		p.Add(keyPoints, "search_alg %q runs the grid and nothing else; use search_alg %q or %q to evaluate points first",
			SearchGrid, SearchRandom, SearchTPE)
		return
	}
	c := pointChecker{domains: space.DomainsByKey(), p: p}
	for i, point := range points {
		c.mapping(keyPoints+"."+strconv.Itoa(i), "", spec.ParamSpace, point)
	}
}

type pointChecker struct {
	domains map[string]search.Domain
	p       *settings.Problems
}

// mapping checks the point's mapping at key against the space's mapping
// at path (dotted, from the top of the space).
func (c pointChecker) mapping(key, path string, space, point map[string]any) {
	known := slices.Sorted(maps.Keys(space))
	for _, k := range slices.Sorted(maps.Keys(point)) {
		sub := join(path, k)
		if _, ok := space[k]; !ok {
			msg := "not a key of param_space"
			if s := settings.Suggest(k, known); s != "" {
				msg += ", did you mean " + strconv.Quote(s) + "?"
			}
			c.p.Add(key+"."+k, "%s", msg)
			continue
		}
		c.value(key+"."+k, sub, space[k], point[k])
	}
}

// value checks the point's value v at key against the space's value s at
// path.
func (c pointChecker) value(key, path string, s, v any) {
	if d, ok := c.domains[path]; ok {
		if msg := produces(d, v); msg != "" {
			c.p.Add(key, "%s", msg)
		}
		return
	}
	switch x := s.(type) {
	case map[string]any:
		if _, literal := x["literal"]; literal && len(x) == 1 {
			return // a constant: the point may set any value
		}
		m, ok := v.(map[string]any)
		if !ok {
			if c.hasDomainUnder(path) {
				c.p.Add(key, "expected a mapping, as in param_space, got %s", settings.Describe(v))
			}
			return
		}
		c.mapping(key, path, x, m)
	case []any:
		l, ok := v.([]any)
		if !ok || len(l) != len(x) {
			if c.hasDomainUnder(path) {
				c.p.Add(key, "expected a list of %d values, as in param_space, got %s", len(x), settings.Describe(v))
			}
			return
		}
		for i := range l {
			c.value(key+"."+strconv.Itoa(i), join(path, strconv.Itoa(i)), x[i], l[i])
		}
	}
}

func (c pointChecker) hasDomainUnder(path string) bool { return search.HasDomainUnder(c.domains, path) }

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// produces returns why v is not a value the domain d can produce, or "".
func produces(d search.Domain, v any) string {
	if d.Choices != nil {
		if d.Index(v) < 0 {
			return "not one of the " + d.Kind + " values of param_space, got " + settings.Describe(v)
		}
		return ""
	}
	x, ok := settings.Finite(v)
	if !ok {
		return "expected a number for the " + d.Kind + " domain, got " + settings.Describe(v)
	}
	if d.Kind == "randn" || d.Kind == "qrandn" {
		return onStep(d, x)
	}
	if d.Int && x != math.Trunc(x) {
		return "expected an integer for the " + d.Kind + " domain, got " + settings.Describe(v)
	}
	if x < d.Low || x > d.High {
		return "must be within the " + d.Kind + " domain's [" + num(d.Low) + ", " + num(d.High) + "], got " + num(x)
	}
	return onStep(d, x)
}

// onStep returns why x is not a multiple of the domain's step, or "".
func onStep(d search.Domain, x float64) string {
	if d.Q == 0 {
		return ""
	}
	k := x / d.Q
	if math.Abs(k-math.Round(k)) > 1e-9*max(1, math.Abs(k)) {
		return "must be a multiple of the " + d.Kind + " domain's step " + num(d.Q) + ", got " + num(x)
	}
	return ""
}

func num(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
