package events

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Resource names with a meaning of their own; any other name is a custom
// resource, counted like cpu.
const (
	ResourceCPU    = "cpu"
	ResourceGPU    = "gpu"
	ResourceMemory = "memory" // bytes
)

// Resources are amounts of resources by name: what a trial needs (its
// shape), or what a runner has. A name that is absent is 0, except that a
// trial's shape without "cpu" needs one CPU (DefaultShape), as in Ray.
type Resources map[string]float64

// DefaultShape is what a trial needs when its work names no resources.
func DefaultShape() Resources { return Resources{ResourceCPU: 1} }

// ResourceAmount is one amount of trainable.resources: a number, or
// {"config": "<dotted key>"}, the trial's own config value at that key.
type ResourceAmount struct {
	Value float64
	// Config, when set, names the config key whose value is the amount.
	Config string
}

// MarshalJSON writes a number, or {"config": key}.
func (a ResourceAmount) MarshalJSON() ([]byte, error) {
	if a.Config != "" {
		return json.Marshal(map[string]string{"config": a.Config})
	}
	return json.Marshal(a.Value)
}

// UnmarshalJSON reads a number or {"config": key}.
func (a *ResourceAmount) UnmarshalJSON(b []byte) error {
	var ref struct {
		Config string `json:"config"`
	}
	if len(b) > 0 && b[0] == '{' {
		if err := json.Unmarshal(b, &ref); err != nil {
			return err
		}
		if ref.Config == "" {
			return fmt.Errorf("a resource amount from the config needs a non-empty \"config\" key")
		}
		*a = ResourceAmount{Config: ref.Config}
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("a resource amount is a number or {\"config\": key}: %w", err)
	}
	*a = ResourceAmount{Value: v}
	return nil
}

// CheckResource reports what is wrong with amount v of resource name:
// negative, not finite, or a GPU amount above 1 that is not whole (as in
// Ray, fractions share one device; more than one device is whole devices).
func CheckResource(name string, v float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("%s must be a finite number, got %v", name, v)
	case v < 0:
		return fmt.Errorf("%s must be >= 0, got %v", name, v)
	case name == ResourceGPU && v > 1 && v != math.Trunc(v):
		return fmt.Errorf("gpu above 1 must be a whole number of GPUs (fractions below 1 share one GPU), got %v", v)
	}
	return nil
}

// memoryUnits are the suffixes ParseMemory accepts.
var memoryUnits = map[string]float64{
	"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
}

// ParseMemory reads a memory amount in bytes: a number with an optional
// suffix K, M, G, T (powers of 1000) or Ki, Mi, Gi, Ti (powers of 1024),
// e.g. "2G", "512Mi", "1.5Gi", "1000".
func ParseMemory(s string) (float64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != 'e' && r != '+' && r != '-' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	mult, ok := memoryUnits[unit]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q in memory %q: use bytes or K, M, G, T, Ki, Mi, Gi, Ti", unit, s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("memory %q is not a number with a unit such as 2G or 512Mi", s)
	}
	return math.Round(v * mult), nil
}

// resourceValue is a config value as an amount of resource name: a number,
// or for memory also a string with a unit.
func resourceValue(name string, v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case json.Number:
		return x.Float64()
	case string:
		if name == ResourceMemory {
			return ParseMemory(x)
		}
	}
	return 0, fmt.Errorf("%s: the config value must be a number, got %T %v", name, v, v)
}

// ConfigValue is the value at a dotted key of a nested config (or param
// space): the key of a resource amount {"config": key}.
func ConfigValue(config map[string]any, key string) (any, bool) {
	return lookupPath(config, strings.Split(key, "."))
}

// Shape resolves the trainable's resources for a trial of config: each
// {config: key} amount reads the config, cpu defaults to 1, and every
// amount is checked (CheckResource).
func (t Trainable) Shape(config map[string]any) (Resources, error) {
	out := DefaultShape()
	for _, name := range slices.Sorted(maps.Keys(t.Resources)) {
		a := t.Resources[name]
		v := a.Value
		if a.Config != "" {
			raw, ok := ConfigValue(config, a.Config)
			if !ok {
				return nil, fmt.Errorf("resources.%s: the trial's config has no key %q", name, a.Config)
			}
			var err error
			if v, err = resourceValue(name, raw); err != nil {
				return nil, fmt.Errorf("resources.%s from config %q: %w", name, a.Config, err)
			}
		}
		if err := CheckResource(name, v); err != nil {
			return nil, fmt.Errorf("resources.%s: %w", name, err)
		}
		if v == 0 && name != ResourceCPU {
			delete(out, name)
			continue
		}
		out[name] = v
	}
	return out, nil
}

// DefaultShapeOf is the trainable's resources before any trial's config is
// known: the fixed amounts, cpu 1 unless fixed, and 0 for amounts read
// from the config.
func (t Trainable) DefaultShapeOf() Resources {
	out := DefaultShape()
	for name, a := range t.Resources {
		if a.Config == "" && CheckResource(name, a.Value) == nil {
			out[name] = a.Value
		}
	}
	return out
}

// Shape is what the work needs: its Resources, or DefaultShape when it
// names none (work from before resources existed).
func (p *TrialScheduled) Shape() Resources {
	if len(p.Resources) == 0 {
		return DefaultShape()
	}
	return p.Resources
}

// FitsIn reports whether r fits in total, amount by amount (the GPU
// devices' layout aside).
func (r Resources) FitsIn(total Resources) bool { return r.Short(total) == "" }

// Short names the first resource (cpu, gpu, memory, then custom ones by
// name) of which r needs more than total has, or "" if none.
func (r Resources) Short(total Resources) string {
	for _, name := range r.Names() {
		if r[name] > total[name]+1e-9 {
			return name
		}
	}
	return ""
}

// Max is the amount-by-amount maximum of r and o.
func (r Resources) Max(o Resources) Resources {
	out := Resources{}
	for k, v := range r {
		out[k] = v
	}
	for k, v := range o {
		out[k] = max(out[k], v)
	}
	return out
}

// Names lists the resources r names: cpu, gpu, memory, then custom ones in
// order.
func (r Resources) Names() []string {
	var out, custom []string
	for _, k := range []string{ResourceCPU, ResourceGPU, ResourceMemory} {
		if _, ok := r[k]; ok {
			out = append(out, k)
		}
	}
	for k := range r {
		if k != ResourceCPU && k != ResourceGPU && k != ResourceMemory {
			custom = append(custom, k)
		}
	}
	slices.Sort(custom)
	return append(out, custom...)
}

// Amount formats the amount of resource name: memory with a binary unit,
// others as a short number.
func (r Resources) Amount(name string) string {
	v := r[name]
	if name == ResourceMemory {
		return FormatMemory(v)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// FormatMemory writes bytes with the largest binary unit that divides them
// into at least 1 (one decimal at most).
func FormatMemory(v float64) string {
	for _, u := range []struct {
		s string
		m float64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if v >= u.m {
			return strconv.FormatFloat(math.Round(v/u.m*10)/10, 'f', -1, 64) + u.s
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// String is "cpu=1 gpu=0.5 memory=2Gi".
func (r Resources) String() string {
	var b strings.Builder
	for i, name := range r.Names() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(name + "=" + r.Amount(name))
	}
	return b.String()
}

// validate checks every amount.
func (r Resources) validate(key string) error {
	for _, name := range r.Names() {
		if name == "" {
			return fieldErr(key, "a resource name must not be empty")
		}
		if err := CheckResource(name, r[name]); err != nil {
			return fieldErr(key+name, "%v", err)
		}
	}
	return nil
}
