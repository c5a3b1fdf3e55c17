package search

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/tunejet/tunejet/internal/settings"
)

// kwLiteral marks a plain value: {literal: v} is v, taken as it is, even
// when v is a mapping that reads like a domain ({literal: {uniform: 1}}).
const kwLiteral = "literal"

// spellings are the keywords a single-key mapping is compared with: every
// domain keyword and kwLiteral, sorted.
var spellings = func() []string {
	s := []string{kwGrid, kwChoice, kwSampleFrom, kwLiteral}
	for kw := range numericDomains {
		s = append(s, kw)
	}
	slices.Sort(s)
	return s
}()

// keyProblem returns why a mapping whose only key is k, which is neither a
// domain keyword nor kwLiteral, must not be taken as a plain mapping: k is
// a misspelled keyword. It returns "" for any other k.
func keyProblem(k string) string {
	s := settings.Suggest(k, spellings)
	var msg string
	switch s {
	case "":
		return ""
	case kwLiteral, kwSampleFrom:
		msg = fmt.Sprintf("unknown keyword, did you mean %q?", s)
	default:
		msg = fmt.Sprintf("unknown distribution, did you mean %q?", s)
	}
	return fmt.Sprintf("%s (for a constant mapping, write {%s: {%s: ...}})", msg, kwLiteral, k)
}

// nestedDomainError is a domain found inside a plain value.
type nestedDomainError struct{ kw string }

func (e nestedDomainError) Error() string { return "contains a domain (" + e.kw + ")" }

// plainValue checks v, a grid_search or choice value at path, and returns a
// copy of it with every {literal: x} replaced by x. A domain inside v is a
// nestedDomainError; a mapping that keyProblem refuses is a *settings.Error at
// its key.
func plainValue(path []string, v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		return plainMap(path, x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			var err error
			if out[i], err = plainValue(child(path, strconv.Itoa(i)), e); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}

func plainMap(path []string, m map[string]any) (any, error) {
	if kw, _, ok := domainOf(m); ok {
		return nil, nestedDomainError{kw: kw}
	}
	if v, ok, err := unwrap(path, m); ok || err != nil {
		return v, err
	}
	out := make(map[string]any, len(m))
	for _, k := range sortedKeys(m) {
		var err error
		if out[k], err = plainValue(child(path, k), m[k]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// unwrap looks at m, a mapping at path that is not a domain: for
// {literal: v} it returns v and true; for a mapping that keyProblem
// refuses, a *settings.Error at its key; otherwise nothing.
func unwrap(path []string, m map[string]any) (any, bool, error) {
	k, v, ok := single(m)
	switch {
	case !ok:
		return nil, false, nil
	case k == kwLiteral:
		return v, true, nil
	}
	if msg := keyProblem(k); msg != "" {
		return nil, false, keyError(child(path, k), msg)
	}
	return nil, false, nil
}
