package search

import (
	"strings"

	"github.com/tunejet/tunejet/internal/settings"
)

// keyError is the problem msg at path, a key's path from the top of the
// space: mapping keys, and list indices in decimal. Its key is relative to
// the space; the caller roots it (settings.Prefix("param_space", err)).
func keyError(path []string, msg string) *settings.Error {
	return &settings.Error{Key: strings.Join(path, "."), Msg: msg}
}
