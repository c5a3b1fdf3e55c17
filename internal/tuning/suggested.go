package tuning

import (
	"strings"

	"github.com/tunejet/tunejet/internal/search"

	"github.com/tunejet/tunejet/internal/settings"
)

// keySuggested is where the problems of a suggested config are reported.
const keySuggested = "config"

// SuggestedConfig checks config, a searcher's suggestion for a new trial
// (an external searcher's reply), against the param space as a point of
// points_to_evaluate is checked: only keys of paramSpace (nested keys as
// nested mappings), and for each domain a value it can produce. Unlike a
// point it must give every domain a value. It returns the trial's config:
// the space with each domain replaced by the suggested value as the
// domain holds it (an int for an integer domain, the choice itself for a
// choice); constants are the space's. Every problem is a *settings.Error at
// "config.<key>", joined.
func SuggestedConfig(paramSpace map[string]any, space *search.Space, config map[string]any) (map[string]any, error) {
	p := &settings.Problems{}
	pointChecker{domains: space.DomainsByKey(), p: p}.mapping(keySuggested, "", paramSpace, config)
	for _, d := range space.Domains() {
		if _, ok := d.Lookup(config); !ok {
			p.Add(keySuggested+"."+strings.Join(d.Path, "."), "missing: a suggestion gives every domain of param_space a value")
		}
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	var values []any
	for _, d := range space.Domains() {
		v, _ := d.Lookup(config)
		values = append(values, domainValue(d, v))
	}
	return space.Config(values)
}

// domainValue is v, a value produces accepted for d, as d holds it.
func domainValue(d search.Domain, v any) any {
	if d.Choices != nil {
		return d.Choices[d.Index(v)]
	}
	x, _ := settings.Finite(v)
	if d.Kind == "randn" || d.Kind == "qrandn" {
		return x // unbounded: Value would clamp it
	}
	return d.Value(x)
}
