package restore

import (
	"fmt"
	"strings"

	"github.com/tunejet/tunejet/events"
)

// Describe says what a trainable runs, for people: a command line quoted
// as a shell would take it, with the folder it runs in, or the registered
// Go function.
func Describe(t events.Trainable) string {
	if len(t.Command) == 0 {
		return fmt.Sprintf("the Go trainable registered as %q", t.Name)
	}
	args := make([]string, len(t.Command))
	for i, a := range t.Command {
		args[i] = shellQuote(a)
	}
	s := "command " + strings.Join(args, " ")
	if t.Dir != "" {
		s += " (in " + shellQuote(t.Dir) + ")"
	}
	return s
}

// shellQuote quotes s for a POSIX shell unless it needs no quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
