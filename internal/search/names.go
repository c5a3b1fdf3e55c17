package search

import (
	"fmt"
	"strings"
	"time"
)

// maxIdentifier is Ray's TUNE_MAX_LEN_IDENTIFIER default: the length at which
// "<trial name>_<tag>" is cut in a trial dir name.
const maxIdentifier = 130

// TrialID returns Ray's trial id "<prefix>_<index:05d>", e.g. "a2b9e_00000".
func TrialID(prefix string, index int) string {
	return fmt.Sprintf("%s_%05d", prefix, index)
}

// TrialDirName returns the name of a trial's directory by Ray's rule:
// "<trialName>_<tag>" cut to 130 characters, then "_YYYY-MM-DD_HH-MM-SS" of
// t appended. Every character other than ASCII letters, digits and
// "_ - . = ," becomes '_' (Ray replaces "/", "(" and ")"), and a leading '.'
// or '-' becomes '_'. The result is a single safe path element of at most 150
// bytes.
func TrialDirName(trialName, tag string, t time.Time) string {
	name := []rune(trialName + "_" + tag)
	if len(name) > maxIdentifier {
		name = name[:maxIdentifier]
	}
	s := safeName(string(name)) + "_" + t.Format("2006-01-02_15-04-05")
	if s[0] == '.' || s[0] == '-' {
		s = "_" + s[1:]
	}
	return s
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if isSafe(r) {
			return r
		}
		return '_'
	}, s)
}

func isSafe(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return true
	}
	return strings.ContainsRune("_-.=,", r)
}
