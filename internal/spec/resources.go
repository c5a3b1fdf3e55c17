package spec

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/tunejet/tunejet/events"

	"github.com/tunejet/tunejet/internal/settings"
)

// resources reads trainable.resources: a mapping of resource names to
// amounts, each a number, a memory size with a unit ("2G", "512Mi"), or
// {config: "<dotted key>"}.
func resources(dst *map[string]events.ResourceAmount) settings.Reader {
	return func(p *settings.Problems, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			p.Add("", "expected a mapping such as {cpu: 1, gpu: 0.5, memory: 2G}, got %s", settings.Describe(v))
			return
		}
		out := map[string]events.ResourceAmount{}
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if m[name] == nil {
				continue
			}
			if a, ok := resourceAmount(p.Under(name), name, m[name]); ok {
				out[name] = a
			}
		}
		if len(out) > 0 {
			*dst = out
		}
	}
}

// resourceAmount reads one amount of resource name.
func resourceAmount(p *settings.Problems, name string, v any) (events.ResourceAmount, bool) {
	if m, ok := v.(map[string]any); ok {
		return resourceRef(p, name, m)
	}
	var x float64
	var err error
	if s, ok := v.(string); ok && name == events.ResourceMemory {
		x, err = events.ParseMemory(s)
	} else if !reads(p, settings.For(&x), v) {
		return events.ResourceAmount{}, false
	}
	if err == nil {
		err = events.CheckResource(name, x)
	}
	if err != nil {
		p.Add("", "%v", err)
		return events.ResourceAmount{}, false
	}
	return events.ResourceAmount{Value: x}, true
}

// resourceRef reads {config: "<dotted key>"}, an amount the trial's config
// gives.
func resourceRef(p *settings.Problems, name string, m map[string]any) (events.ResourceAmount, bool) {
	var ref struct {
		Config string `json:"config"`
	}
	settings.Decode(p, name, m, &ref)
	if ref.Config == "" {
		if !p.Has("config") {
			p.Add("", "expected {config: \"<dotted key of the trial's config>\"}")
		}
		return events.ResourceAmount{}, false
	}
	return events.ResourceAmount{Config: ref.Config}, true
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
