package main_test

// Tests of the command line as people expect it to behave: a version,
// usage errors that say so, flags whose help is what they do.

import (
	"runtime"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestVersion: tunejet --version and tunejet version print the version,
// the commit, and the Go and nats-server versions built in.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := tunejet(t, "", baseEnv(), args...)
		if r.code != 0 {
			t.Fatalf("tunejet %s:\n%s", args[0], r)
		}
		fields := map[string]string{}
		for _, line := range strings.Split(r.stdout, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				fields[k] = strings.TrimSpace(v)
			}
		}
		if !strings.HasPrefix(r.stdout, "tunejet ") || fields["commit"] == "" || fields["go"] != runtime.Version() || fields["nats-server"] != server.VERSION {
			t.Errorf("tunejet %s: want the version, commit:, go: %s and nats-server: %s:\n%s", args[0], runtime.Version(), server.VERSION, r.stdout)
		}
	}
}

// TestUsageErrorsExit2: a wrong number of arguments, an unknown command or
// flag, or a flag's bad value exits 2 with the command's usage line.
func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args       []string
		err, usage string
	}{
		{[]string{"run"}, "accepts 1 arg(s), received 0", "Usage: tunejet run FILE [flags]"},
		{[]string{"run", "--no-such-flag", "x.yaml"}, "unknown flag: --no-such-flag", "Usage: tunejet run FILE [flags]"},
		{[]string{"run", "--cpus", "many", "x.yaml"}, `invalid argument "many"`, "Usage: tunejet run FILE [flags]"},
		{[]string{"stop"}, "accepts 1 arg(s), received 0", "Usage: tunejet stop NAME [flags]"},
		{[]string{"status", "extra"}, `unknown command "extra" for "tunejet status"`, "Usage: tunejet status [flags]"},
		{[]string{"explain", "a"}, "accepts 2 arg(s), received 1", "Usage: tunejet explain"},
		{[]string{"stauts"}, `unknown command "stauts" for "tunejet"`, "Usage: tunejet COMMAND [flags]"},
	} {
		r := tunejet(t, "", baseEnv(), c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.err) || !strings.Contains(r.stderr, c.usage) {
			t.Errorf("tunejet %s: want exit status 2, %q and %q:\n%s", strings.Join(c.args, " "), c.err, c.usage, r)
		}
	}
	if r := tunejet(t, "", baseEnv()); r.code != 0 || !strings.Contains(r.stdout, "Available Commands") {
		t.Errorf("tunejet alone: want the help:\n%s", r)
	}
}
