package spec

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/tunejet/tunejet/events"
)

// resources decodes trainable.resources: a mapping of resource names to
// amounts, each a number, a memory size with a unit ("2G", "512Mi"), or
// {config: "<dotted key>"}.
func (d *decoder) resources(p *map[string]events.ResourceAmount) setter {
	return func(key string, n *yaml.Node) {
		if !d.expect(key, n, yaml.MappingNode, "a mapping such as {cpu: 1, gpu: 0.5, memory: 2G}") {
			return
		}
		out := map[string]events.ResourceAmount{}
		d.pairs(key, n, func(path string, k, v *yaml.Node) {
			if isNull(v) {
				delete(d.lines, path)
				return
			}
			if a, ok := d.resourceAmount(path, k.Value, v); ok {
				out[k.Value] = a
			}
		})
		if len(out) > 0 {
			*p = out
		}
	}
}

// resourceAmount decodes one amount of resource name.
func (d *decoder) resourceAmount(key, name string, n *yaml.Node) (events.ResourceAmount, bool) {
	switch {
	case n.Kind == yaml.MappingNode:
		var ref string
		d.mapping(key, n, fields{"config": d.str(&ref)})
		if !d.given(join(key, "config")) || ref == "" {
			if !d.bad[join(key, "config")] {
				d.fail(key, "expected {config: \"<dotted key of the trial's config>\"}")
			}
			return events.ResourceAmount{}, false
		}
		return events.ResourceAmount{Config: ref}, true
	case name == events.ResourceMemory && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
		v, err := events.ParseMemory(n.Value)
		if err != nil {
			d.fail(key, "%v", err)
			return events.ResourceAmount{}, false
		}
		return d.checkedAmount(key, name, v)
	default:
		var v float64
		d.number(&v)(key, n)
		if d.bad[key] {
			return events.ResourceAmount{}, false
		}
		return d.checkedAmount(key, name, v)
	}
}

func (d *decoder) checkedAmount(key, name string, v float64) (events.ResourceAmount, bool) {
	if err := events.CheckResource(name, v); err != nil {
		d.fail(key, "%v", err)
		return events.ResourceAmount{}, false
	}
	return events.ResourceAmount{Value: v}, true
}

// resources checks trainable.resources: fixed amounts, and that every
// {config: key} names a key of param_space whose plain and grid values
// are valid amounts.
func (c *checker) resources(s *events.ExperimentSpec) {
	const k = "trainable.resources."
	for _, name := range slices.Sorted(maps.Keys(s.Trainable.Resources)) {
		a := s.Trainable.Resources[name]
		if name == "" {
			c.add("trainable.resources", "a resource name must not be empty")
			continue
		}
		if a.Config == "" {
			if err := events.CheckResource(name, a.Value); err != nil {
				c.add(k+name, "%v", err)
			}
			continue
		}
		v, ok := events.ConfigValue(s.ParamSpace, a.Config)
		if !ok {
			c.add(k+name+".config", "param_space has no key %q", a.Config)
			continue
		}
		for _, x := range amounts(v) {
			if err := amountErr(name, x); err != nil {
				c.add(k+name+".config", "param_space.%s: %v", a.Config, err)
				break
			}
		}
	}
}

// amounts lists the values a param space entry can take that can be
// checked now: a plain value, or the values of grid_search and choice.
// Sampled domains are checked when each trial is scheduled.
func amounts(v any) []any {
	m, ok := v.(map[string]any)
	if !ok {
		return []any{v}
	}
	for _, dom := range []string{"grid_search", "choice"} {
		if xs, ok := m[dom].([]any); ok && len(m) == 1 {
			return xs
		}
	}
	return nil
}

// amountErr checks one possible config value as an amount of name.
func amountErr(name string, x any) error {
	var v float64
	switch y := x.(type) {
	case float64:
		v = y
	case int:
		v = float64(y)
	case string:
		if name != events.ResourceMemory {
			return fmt.Errorf("%q is not a number", y)
		}
		var err error
		if v, err = events.ParseMemory(y); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%v is not a number", x)
	}
	if math.IsNaN(v) {
		return fmt.Errorf("NaN is not an amount")
	}
	return events.CheckResource(name, v)
}
