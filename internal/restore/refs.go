package restore

import (
	"fmt"

	"github.com/tunejet/tunejet/internal/state"
)

// RefKey is the key of an object reference in a param space or config:
// {"object_ref": "<name>"} (what tune.Put returns).
const RefKey = "object_ref"

// ObjectName is where an object reference's bytes live in the
// experiment's Object Store.
func ObjectName(ref string) string { return "objects/" + ref }

// RefOf returns the object name of a reference value, or "".
func RefOf(v any) string {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return ""
	}
	name, _ := m[RefKey].(string)
	return name
}

// Refs lists the object names a param space refers to.
func Refs(space map[string]any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		if name := RefOf(v); name != "" {
			out = append(out, name)
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(space)
	return out
}

// ReplaceRefs gives every trial of st the references a re-specified param
// space holds at the same keys, as Ray re-resolves object references on
// restore; trials not generated yet get them from the space itself.
func ReplaceRefs(st *state.Experiment, space map[string]any) {
	for _, t := range st.Trials {
		replaceIn(t.Config, space)
	}
}

func replaceIn(config, space map[string]any) {
	for k, v := range space {
		if RefOf(v) != "" {
			if _, ok := config[k]; ok {
				config[k] = map[string]any{RefKey: RefOf(v)}
			}
			continue
		}
		sub, ok := v.(map[string]any)
		csub, cok := config[k].(map[string]any)
		if ok && cok {
			replaceIn(csub, sub)
		}
	}
}

// ErrRefGone explains a reference whose object is missing.
func ErrRefGone(name string, cause error) error {
	//nolint:errorlint // the trial's error is the missing object, whatever the store said; the store's error is only told
	return fmt.Errorf("object %q referenced by the config is gone (%v): re-specify param_space with a new tune.Put reference when you restore (tune.WithParamSpace, or tunejet restore --param-space)", name, cause)
}
