package stopper

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tunejet/tunejet/internal/search"
)

// The stoppers' type names, in the experiment file and in JSON.
const (
	typeCombined          = "combined"
	typeExperimentPlateau = "experiment_plateau"
	typeMaximumIteration  = "maximum_iteration"
	typeTimeout           = "timeout"
	typeTrialPlateau      = "trial_plateau"
)

// typeNames lists the type names, sorted.
var typeNames = []string{typeCombined, typeExperimentPlateau, typeMaximumIteration, typeTimeout, typeTrialPlateau}

// newOfType returns an empty stopper of type t, or nil.
func newOfType(t string) Stopper {
	switch t {
	case typeCombined:
		return &CombinedStopper{}
	case typeExperimentPlateau:
		return &ExperimentPlateauStopper{}
	case typeMaximumIteration:
		return &MaximumIterationStopper{}
	case typeTimeout:
		return &TimeoutStopper{}
	case typeTrialPlateau:
		return &TrialPlateauStopper{}
	}
	return nil
}

// ErrInvalid is what every *KeyError wraps.
var ErrInvalid = errors.New("invalid stopper configuration")

// KeyError is a problem with one key of a stopper's configuration.
type KeyError struct {
	// Key is the dotted path of the key, e.g. "run_config.stoppers.0.std".
	Key string
	// Msg says what is wrong, e.g. "must be > 0, got -1".
	Msg string
}

// Error returns "<key>: <message>".
func (e *KeyError) Error() string { return e.Key + ": " + e.Msg }

// Unwrap returns ErrInvalid.
func (e *KeyError) Unwrap() error { return ErrInvalid }

// Validate checks a stopper built in Go, reporting every problem as a
// *KeyError (joined) whose key is relative to s: "std", or "1.std" in a
// CombinedStopper.
func Validate(s Stopper) error {
	c := newChecker("")
	s.validate(c)
	return c.err()
}

// Parse builds a stopper from its experiment-file form, as a YAML or JSON
// parser yields it: a mapping {type: ..., <Ray's arguments>} is one
// stopper, and a list is the CombinedStopper of its items. The types are
// maximum_iteration, trial_plateau, experiment_plateau, timeout and
// combined (whose stoppers key holds the list); a null argument is an
// absent one and gets Ray's default. key is where the value is in the file
// ("run_config.stoppers"): every problem is reported, as a *KeyError
// (joined) naming its key under it, and the stopper is then nil.
func Parse(key string, v any) (Stopper, error) {
	c := newChecker(key)
	s := parse(c, v)
	if err := c.err(); err != nil {
		return nil, err
	}
	return s, nil
}

// parse builds the stopper or list of stoppers v.
func parse(c *checker, v any) Stopper {
	switch x := v.(type) {
	case []any:
		s := &CombinedStopper{}
		for i, e := range x {
			if st := parse(c.sub(strconv.Itoa(i)), e); st != nil {
				s.Stoppers = append(s.Stoppers, st)
			}
		}
		return s
	case map[string]any:
		return parseOne(c, x)
	}
	c.add("", "must be a list of stoppers or a mapping {type: ...}, got %s", describe(v))
	return nil
}

// parseOne builds the stopper m describes and checks it.
func parseOne(c *checker, m map[string]any) Stopper {
	a := &args{c: c, m: m, used: map[string]bool{}}
	var typ string
	a.str("type", &typ, true)
	var s Stopper
	switch typ {
	case "":
		return nil
	case typeCombined:
		return parseCombined(a)
	case typeExperimentPlateau:
		st := ExperimentPlateau("")
		a.str("metric", &st.Metric, true)
		a.number("std", &st.Std, false)
		a.integer("top", &st.Top, false)
		a.str("mode", &st.Mode, false)
		a.integer("patience", &st.Patience, false)
		s = st
	case typeMaximumIteration:
		st := &MaximumIterationStopper{}
		a.integer("max_iter", &st.MaxIter, true)
		s = st
	case typeTimeout:
		st := &TimeoutStopper{}
		a.number("timeout", &st.Timeout, true)
		s = st
	case typeTrialPlateau:
		st := TrialPlateau("")
		a.str("metric", &st.Metric, true)
		a.number("std", &st.Std, false)
		a.integer("num_results", &st.NumResults, false)
		a.integer("grace_period", &st.GracePeriod, false)
		a.optNumber("metric_threshold", &st.MetricThreshold)
		a.str("mode", &st.Mode, false)
		s = st
	default:
		c.add("type", "unknown stopper type %q%s", typ, suggestion(typ, typeNames))
		return nil
	}
	a.unknownKeys()
	s.validate(c)
	return s
}

// parseCombined builds {type: combined, stoppers: [...]}.
func parseCombined(a *args) Stopper {
	list, ok := a.get("stoppers", true)
	a.unknownKeys()
	if !ok {
		return nil
	}
	if _, isList := list.([]any); !isList {
		a.c.add("stoppers", "must be a list of stoppers, got %s", describe(list))
		return nil
	}
	return parse(a.c.sub("stoppers"), list)
}

// args reads a stopper's arguments from its mapping.
type args struct {
	c    *checker
	m    map[string]any
	used map[string]bool
}

// get returns the argument name; null is absent. A required argument
// that is absent is reported.
func (a *args) get(name string, required bool) (any, bool) {
	a.used[name] = true
	v := a.m[name]
	if v == nil && required {
		a.c.add(name, "required")
	}
	return v, v != nil
}

func (a *args) str(name string, p *string, required bool) {
	v, ok := a.get(name, required)
	if !ok {
		return
	}
	s, isStr := v.(string)
	if !isStr {
		a.c.add(name, "must be a string, got %s", describe(v))
		return
	}
	*p = s
}

func (a *args) number(name string, p *float64, required bool) {
	v, ok := a.get(name, required)
	if !ok {
		return
	}
	f, _, isNum := search.Number(v)
	if !isNum {
		a.c.add(name, "must be a number, got %s", describe(v))
		return
	}
	*p = f
}

func (a *args) optNumber(name string, p **float64) {
	if _, ok := a.get(name, false); ok {
		*p = new(float64)
		a.number(name, *p, false)
	}
}

func (a *args) integer(name string, p *int, required bool) {
	v, ok := a.get(name, required)
	if !ok {
		return
	}
	f, _, isNum := search.Number(v)
	if !isNum || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		a.c.add(name, "must be an integer, got %s", describe(v))
		return
	}
	*p = int(f)
}

// unknownKeys reports the keys no argument used, in sorted order.
func (a *args) unknownKeys() {
	known := make([]string, 0, len(a.used))
	for k := range a.used {
		known = append(known, k)
	}
	slices.Sort(known)
	keys := make([]string, 0, len(a.m))
	for k := range a.m {
		if !a.used[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if s := suggestion(k, known); s != "" {
			a.c.add(k, "unknown key%s", s)
			continue
		}
		a.c.add(k, "unknown key; valid keys: %s", strings.Join(known, ", "))
	}
}

// suggestion is ", did you mean "x"?" for a close known name, or "".
func suggestion(name string, known []string) string {
	if s := search.Suggest(name, known); s != "" {
		return fmt.Sprintf(", did you mean %q?", s)
	}
	return ""
}

// checker collects configuration problems, one per key, under a prefix.
type checker struct {
	prefix string
	bad    map[string]bool
	errs   *[]error
}

func newChecker(prefix string) *checker {
	return &checker{prefix: prefix, bad: map[string]bool{}, errs: new([]error)}
}

// sub is a checker for the values under key k.
func (c *checker) sub(k string) *checker {
	return &checker{prefix: c.key(k), bad: c.bad, errs: c.errs}
}

// key is the dotted path of k.
func (c *checker) key(k string) string {
	switch {
	case k == "":
		return c.prefix
	case c.prefix == "":
		return k
	}
	return c.prefix + "." + k
}

// add records a problem with k, unless k has one already.
func (c *checker) add(k, format string, args ...any) {
	key := c.key(k)
	if c.bad[key] {
		return
	}
	c.bad[key] = true
	*c.errs = append(*c.errs, &KeyError{Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) err() error {
	return errors.Join(*c.errs...)
}

func (c *checker) required(k, v string) {
	if v == "" {
		c.add(k, "required")
	}
}

func (c *checker) positive(k string, v float64) {
	if !(v > 0) || math.IsInf(v, 0) {
		c.add(k, "must be > 0, got %g", v)
	}
}

func (c *checker) finite(k string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		c.add(k, "must be a finite number, got %g", v)
	}
}

func (c *checker) atLeast(k string, v, least int) {
	if v < least {
		c.add(k, "must be >= %d, got %d", least, v)
	}
}

func (c *checker) oneOf(k, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		c.add(k, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
	}
}

// describe names a parsed value's type and value for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("string %q", x)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T %v", v, v)
}
