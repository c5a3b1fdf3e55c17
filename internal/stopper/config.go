package stopper

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/tunejet/tunejet/internal/settings"
)

// The stoppers' type names, in the experiment file and in JSON.
const (
	typeCombined          = "combined"
	typeExperimentPlateau = "experiment_plateau"
	typeMaximumIteration  = "maximum_iteration"
	typeTimeout           = "timeout"
	typeTrialPlateau      = "trial_plateau"
)

// kinds maps each stopper type but combined to a stopper with Ray's
// defaults. Each stopper's file registers itself.
var kinds = map[string]func() Stopper{typeCombined: func() Stopper { return &CombinedStopper{} }}

// register makes the stopper of newStopper known by its type name.
func register(name string, newStopper func() Stopper) {
	if _, dup := kinds[name]; dup {
		panic("stopper: type " + name + " registered twice")
	}
	kinds[name] = newStopper
}

// newOfType returns a stopper of type t with Ray's defaults, or nil.
func newOfType(t string) Stopper {
	if newStopper, ok := kinds[t]; ok {
		return newStopper()
	}
	return nil
}

// Validate checks a stopper built in Go, reporting every problem as a
// *settings.Error (joined) whose key is relative to s: "std", or "1.std"
// in a CombinedStopper.
func Validate(s Stopper) error {
	var p settings.Problems
	s.validate(&p)
	return p.Err()
}

// Parse builds a stopper from its experiment-file form, as a YAML or JSON
// parser yields it: a mapping {type: ..., <Ray's arguments>} is one
// stopper, and a list is the CombinedStopper of its items. The types are
// maximum_iteration, trial_plateau, experiment_plateau, timeout and
// combined (whose stoppers key holds the list); a null argument is an
// absent one and gets Ray's default. key is where the value is in the file
// ("run_config.stoppers"): every problem is reported, as a
// *settings.Error (joined) naming its key under it, and the stopper is
// then nil.
func Parse(key string, v any) (Stopper, error) {
	var p settings.Problems
	s := parse(p.Under(key), v)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// parse builds the stopper or list of stoppers v.
func parse(p *settings.Problems, v any) Stopper {
	switch x := v.(type) {
	case []any:
		s := &CombinedStopper{}
		for i, e := range x {
			if st := parse(p.Under(strconv.Itoa(i)), e); st != nil {
				s.Stoppers = append(s.Stoppers, st)
			}
		}
		return s
	case map[string]any:
		return parseOne(p, x)
	}
	p.Add("", "must be a list of stoppers or a mapping {type: ...}, got %s", settings.Describe(v))
	return nil
}

// parseOne builds the stopper m describes with settings.Decode, by its
// type's json names, and checks it.
func parseOne(p *settings.Problems, m map[string]any) Stopper {
	typ, ok := m["type"].(string)
	switch {
	case m["type"] == nil:
		p.Add("type", "required")
		return nil
	case !ok:
		p.Add("type", "expected a string, got %s", settings.Describe(m["type"]))
		return nil
	case typ == typeCombined:
		return parseCombined(p, m)
	}
	s := newOfType(typ)
	if s == nil {
		p.Add("type", "unknown stopper type %q%s", typ, suggestion(typ, slices.Sorted(maps.Keys(kinds))))
		return nil
	}
	settings.Decode(p, typ, m, s, typeField)
	s.validate(p)
	return s
}

// typeField reads a stopper's type key, which parseOne has read.
var typeField = settings.Fields{"type": settings.Read}

// parseCombined builds {type: combined, stoppers: [...]}.
func parseCombined(p *settings.Problems, m map[string]any) Stopper {
	var args combinedArgs
	settings.Decode(p, typeCombined, m, &args, typeField)
	switch list, ok := args.stoppers.([]any); {
	case args.stoppers == nil:
		p.Add("stoppers", "required")
		return nil
	case !ok:
		p.Add("stoppers", "must be a list of stoppers, got %s", settings.Describe(args.stoppers))
		return nil
	default:
		return parse(p.Under("stoppers"), list)
	}
}

// combinedArgs is the combined stopper's one argument, its list.
type combinedArgs struct{ stoppers any }

func (a *combinedArgs) Settings() settings.Fields {
	return settings.Fields{"stoppers": func(_ *settings.Problems, v any) { a.stoppers = v }}
}

// suggestion is ", did you mean "x"?" for a close known name, or "".
func suggestion(name string, known []string) string {
	if s := settings.Suggest(name, known); s != "" {
		return fmt.Sprintf(", did you mean %q?", s)
	}
	return ""
}
