package sched

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/tunejet/tunejet/internal/settings"
)

// Mutation is how PBT explores one hyperparameter: one of Ray's
// hyperparam_mutations values, already parsed. Exactly one field is set.
type Mutation struct {
	// Choices is a list: explore shifts the value to a neighbour in the
	// list, or resamples one.
	Choices []any
	// Sample is a distribution: explore multiplies the value by one of the
	// perturbation factors, or resamples it. It must draw only from r.
	Sample func(r *rand.Rand) any
	// Int says that Sample draws ints: a value that is a whole number is
	// then an int, even as the float64 that a JSON round trip (the log,
	// a state file) makes of every number, so it stays an int when
	// perturbed.
	Int bool
	// Nested holds the mutations of a nested mapping of the config.
	Nested map[string]Mutation
	// Driver is a function of the experiment's driver (Ray's function
	// mutation, {sample_from: name}): explore perturbs the value as a
	// distribution's, and a resample is left to the driver (ExploitInputs.Driver).
	Driver bool
}

func (m Mutation) kinds() int {
	n := 0
	for _, set := range []bool{m.Choices != nil, m.Sample != nil, m.Nested != nil, m.Driver} {
		if set {
			n++
		}
	}
	return n
}

// validateMutations checks that every mutation is exactly one kind and that
// lists are not empty.
func validateMutations(p *settings.Problems, prefix string, ms map[string]Mutation) {
	for _, k := range slices.Sorted(maps.Keys(ms)) {
		m, key := ms[k], prefix+k
		p.Check(m.kinds() == 1, "hyperparam_mutations."+key, "must be a list, a distribution or a mapping")
		p.Check(m.Choices == nil || len(m.Choices) > 0, "hyperparam_mutations."+key, "must not be an empty list")
		if m.Nested != nil {
			validateMutations(p, key+".", m.Nested)
		}
	}
}

// DriverMutations returns the keys (nested ones dotted) of the function
// mutations in ms, sorted.
func DriverMutations(ms map[string]Mutation) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(ms)) {
		switch m := ms[k]; {
		case m.Driver:
			out = append(out, k)
		case m.Nested != nil:
			for _, sub := range DriverMutations(m.Nested) {
				out = append(out, k+"."+sub)
			}
		}
	}
	return out
}

// explorer is Ray's _explore with its knobs.
type explorer struct {
	resample float64
	factors  []float64
}

// explore returns a deep copy of config with every mutated key perturbed,
// and the operation applied to each (nested keys dotted). Keys are visited
// in sorted order (Ray visits hyperparam_mutations in insertion order,
// which a Go map does not have), each drawing from r as Ray's _explore
// draws from Python's random:
//   - a list: with probability resample_probability, or when the value is
//     not in the list, a uniform choice ("resample"); otherwise a shift of
//     -1 or +1 in the list, clamped at its ends ("shift left",
//     "shift right", "(noop)" when clamped);
//   - a distribution: with probability resample_probability a new sample
//     ("resample"); otherwise the value times a uniform choice of the
//     perturbation factors ("* 1.2"). A value that was an int stays an int
//     (truncated, as Python's int()). A value that is not a number cannot
//     be multiplied and is resampled (Ray raises a TypeError there);
//   - a mapping: explored recursively. A missing or non-mapping value is
//     explored as an empty mapping.
func (e explorer) explore(config map[string]any, ms map[string]Mutation, r *rand.Rand, prefix string, ops map[string]string) map[string]any {
	out := deepCopy(config).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	for _, k := range slices.Sorted(maps.Keys(ms)) {
		m, old := ms[k], out[k]
		switch {
		case m.Nested != nil:
			sub, _ := old.(map[string]any)
			out[k] = e.explore(sub, m.Nested, r, prefix+k+".", ops)
		case m.Choices != nil:
			out[k], ops[prefix+k] = e.shift(old, m.Choices, r)
		default:
			out[k], ops[prefix+k] = e.perturb(old, m, r)
		}
	}
	return out
}

func (e explorer) shift(old any, choices []any, r *rand.Rand) (any, string) {
	idx := slices.IndexFunc(choices, func(c any) bool { return sameValue(c, old) })
	if r.Float64() < e.resample || idx < 0 {
		return deepCopy(choices[r.IntN(len(choices))]), "resample"
	}
	shift := []int{-1, 1}[r.IntN(2)]
	next := min(max(idx+shift, 0), len(choices)-1)
	op := "shift right"
	if shift < 0 {
		op = "shift left"
	}
	if next == idx {
		op += " (noop)"
	}
	return deepCopy(choices[next]), op
}

func (e explorer) perturb(old any, m Mutation, r *rand.Rand) (any, string) {
	x, isInt, isNum := settings.Number(old)
	isInt = isInt || (m.Int && isNum && x == math.Trunc(x))
	var v any
	var op string
	switch {
	case r.Float64() < e.resample || !isNum:
		if m.Driver {
			return nil, OpDriverResample // the driver calls the function
		}
		v, op = m.Sample(r), "resample"
	default:
		f := e.factors[r.IntN(len(e.factors))]
		v, op = x*f, "* "+strconv.FormatFloat(f, 'g', -1, 64)
	}
	if isInt {
		if y, _, ok := settings.Number(v); ok {
			v = int(y)
		}
	}
	return v, op
}

// OpDriverResample is the operation of a function mutation explore leaves
// to the driver: it calls the function for the value.
const OpDriverResample = "resample (the driver's function)"

// sameValue is Python's == for config values: numbers compare by value
// (1 == 1.0), anything else by its formatting.
func sameValue(a, b any) bool {
	x, _, okA := settings.Number(a)
	y, _, okB := settings.Number(b)
	if okA || okB {
		return okA && okB && x == y
	}
	return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b)
}

// deepCopy copies the maps and slices of a JSON-like value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if x == nil {
			return x
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// fill is Ray's _fill_config: each top-level mutated key missing from
// config gets a value drawn from its mutation (a uniform choice from a
// list, a sample, or a mapping filled the same way), in sorted key order.
func fill(config map[string]any, ms map[string]Mutation, r *rand.Rand) {
	for _, k := range slices.Sorted(maps.Keys(ms)) {
		if _, ok := config[k]; ok {
			continue
		}
		switch m := ms[k]; {
		case m.Nested != nil:
			sub := map[string]any{}
			fill(sub, m.Nested, r)
			config[k] = sub
		case m.Choices != nil:
			config[k] = deepCopy(m.Choices[r.IntN(len(m.Choices))])
		case m.Driver:
			// The driver's function: the SDK puts it in the param space
			// (sample_from), which gives the trial its first value.
		default:
			config[k] = m.Sample(r)
		}
	}
}
