package sched

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/settings"
)

// Settings reads what PBTConfig's plain fields cannot: hyperparam_mutations.
func (c *PBTConfig) Settings() settings.Fields {
	return settings.Fields{"hyperparam_mutations": func(p *settings.Problems, v any) {
		c.HyperparamMutations = parseMutations(p, v)
	}}
}

// parseMutations reads PBT's hyperparam_mutations, recording problems in p
// (at its key): a mapping whose values are lists (explore shifts among
// their values), distributions with param_space's syntax (explore perturbs
// or resamples) or mappings of further mutations. It is parsed with
// internal/search, so values are normalized as in param_space: ints stay
// ints. It returns nil when any is wrong.
func parseMutations(p *settings.Problems, v any) map[string]Mutation {
	m, ok := v.(map[string]any)
	if !ok {
		p.Add("", "expected a mapping of config keys to lists, distributions or mappings, got %s", settings.Describe(v))
		return nil
	}
	space, err := search.ParseSpace(m)
	if err != nil {
		p.AddErr("", err)
		p.Hide("")
		return nil
	}
	plain, _ := space.Trial(0, 0)
	domains := space.DomainsByKey()
	n := p.Len()
	out := mutationsOf(p, nil, plain, space, domains)
	if p.Len() > n {
		p.Hide("")
		return nil
	}
	return out
}

// mutationsOf builds the mutations of the mapping config at path, a
// mapping of the space's plain form, in which each domain holds a sample.
func mutationsOf(p *settings.Problems, path []string, config map[string]any, space *search.Space,
	domains map[string]search.Domain) map[string]Mutation {
	out := map[string]Mutation{}
	for _, k := range slices.Sorted(maps.Keys(config)) {
		v := config[k]
		at := append(slices.Clone(path), k)
		dotted := strings.Join(at, ".")
		if d, ok := domains[dotted]; ok {
			if d.Kind == "grid_search" {
				p.Add(dotted, "grid_search cannot be explored; use a list of values instead")
				continue
			}
			if d.Kind == "sample_from" {
				out[k] = Mutation{Driver: true}
				continue
			}
			out[k] = Mutation{Sample: sampler(space, d), Int: d.Int}
			continue
		}
		switch x := v.(type) {
		case []any:
			if len(x) == 0 {
				p.Add(dotted, "must not be an empty list")
				continue
			}
			if search.HasDomainUnder(domains, dotted) {
				p.Add(dotted, "a list of mutations holds plain values; use a distribution for sampled values")
				continue
			}
			out[k] = Mutation{Choices: x}
		case map[string]any:
			out[k] = Mutation{Nested: mutationsOf(p, at, x, space, domains)}
		default:
			p.Add(dotted, "must be a list, a distribution or a mapping, got %s", settings.Describe(v))
		}
	}
	return out
}

// sampler draws d's value from r: the space's trial for a seed drawn from
// r, so that it draws from r alone.
func sampler(space *search.Space, d search.Domain) func(r *rand.Rand) any {
	return func(r *rand.Rand) any {
		config, _ := space.Trial(0, r.Int64())
		v, _ := d.Lookup(config)
		return v
	}
}
