package search

import "strings"

// KeyError is a problem with one key of a param_space. Path is the key's
// path from the top of the space: mapping keys, and list indices in decimal.
// The spec parser maps Path back to a line of the experiment file.
type KeyError struct {
	Path []string
	Msg  string
}

// Error returns "param_space.<dotted path>: <message>".
func (e *KeyError) Error() string {
	if len(e.Path) == 0 {
		return "param_space: " + e.Msg
	}
	return "param_space." + strings.Join(e.Path, ".") + ": " + e.Msg
}

// keyError builds a *KeyError for path, copying path so that callers may keep
// appending to their slice.
func keyError(path []string, msg string) *KeyError {
	return &KeyError{Path: append([]string(nil), path...), Msg: msg}
}
