package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// TestCommandFailureKeepsStderrTail: a command that exits non-zero fails
// with its exit status and the last stderrTailLines lines of its stderr;
// the trial directory keeps all of it.
func TestCommandFailureKeepsStderrTail(t *testing.T) {
	r := newRecorder(t, "crash")
	err := r.run(t, pythonExecutor(t, testGrace))
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 3 || errorType(err) != "ExitError" {
		t.Fatalf("Execute = %v (%T), want an ExitError with status 3", err, err)
	}
	var want []string
	for i := 30 - stderrTailLines + 1; i < 30; i++ {
		want = append(want, fmt.Sprintf("line %d", i))
	}
	want = append(want, "fatal: out of cheese")
	if diff := cmp.Diff(want, strings.Split(ee.tail, "\n")); diff != "" {
		t.Errorf("stderr tail (-want +got):\n%s", diff)
	}
	if !strings.Contains(err.Error(), "exited with status 3; last lines of stderr:\nline 11") {
		t.Errorf("error text %q", err)
	}
	all, rerr := os.ReadFile(filepath.Join(r.info.TrialDir, "stderr"))
	if rerr != nil || !strings.HasPrefix(string(all), "line 0\n") {
		t.Errorf("trial dir stderr = %q, %v; want every line", all, rerr)
	}
}

// TestSupersededCommandIsKilledAtOnce: when another runner owns the trial,
// the command gets no grace period, even one that ignores SIGTERM.
func TestSupersededCommandIsKilledAtOnce(t *testing.T) {
	r := newRecorder(t, "hang")
	done := r.start(t, pythonExecutor(t, time.Hour))
	bustest.Eventually(t, waitLimit, "the trainable to hang", func() bool {
		_, err := os.Stat(filepath.Join(r.info.TrialDir, "hanging"))
		return err == nil
	})
	r.cancel(ErrSuperseded)
	_ = r.wait(t, done)
}

// TestMissingProgramFails: a command that cannot start fails the attempt.
func TestMissingProgramFails(t *testing.T) {
	r := newRecorder(t, "report")
	e := &commandExecutor{Command: []string{"./no-such-trainable"}, Sockets: t.TempDir(), Grace: testGrace, Log: testLog(t)}
	if err := r.run(t, e); err == nil || !strings.Contains(err.Error(), "start trainable") {
		t.Fatalf("Execute = %v, want a start error", err)
	}
}

func TestResolveArg(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "train.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, arg string
		program        bool
		want           string
	}{
		{"a file in the experiment's folder", dir, "train.py", false, filepath.Join(dir, "train.py")},
		{"a program name is looked up in PATH", dir, "python3", true, "python3"},
		{"a program path in the experiment's folder", dir, "./train.py", true, filepath.Join(dir, "train.py")},
		{"not a file there", dir, "--lr=0.1", false, "--lr=0.1"},
		{"absolute", dir, "/bin/sh", true, "/bin/sh"},
		{"no folder", "", "train.py", false, "train.py"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolveArg(tc.dir, tc.arg, tc.program); got != tc.want {
				t.Errorf("resolveArg(%q, %q, %t) = %q, want %q", tc.dir, tc.arg, tc.program, got, tc.want)
			}
		})
	}
}

func TestTailBuffer(t *testing.T) {
	many := strings.Repeat("x\n", stderrTailLines) + "last\n"
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"nothing", nil, ""},
		{"a line split across writes", []string{"hel", "lo\nwor", "ld\n"}, "hello\nworld"},
		{"an unfinished last line counts", []string{"a\nb"}, "a\nb"},
		{"only the last lines", []string{many}, strings.Repeat("x\n", stderrTailLines-1) + "last"},
		{"a long line is cut", []string{strings.Repeat("y", 5000) + "\n"}, strings.Repeat("y", 4096)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b tailBuffer
			for _, w := range tc.writes {
				if _, err := b.Write([]byte(w)); err != nil {
					t.Fatal(err)
				}
			}
			if got := b.String(); got != tc.want {
				t.Errorf("tail = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFuncPanicIsAFailure: a Go trainable's panic fails the attempt with
// its stack, and does not take the runner down.
func TestFuncPanicIsAFailure(t *testing.T) {
	r := newRecorder(t, "report")
	e := &funcExecutor{Func: func(context.Context, map[string]any) error { panic("out of cheese") }, Grace: testGrace, Log: testLog(t)}
	err := r.run(t, e)
	if err == nil || !strings.Contains(err.Error(), "trainable panicked: out of cheese") || !strings.Contains(err.Error(), "goroutine") {
		t.Fatalf("Execute = %v, want the panic with its stack", err)
	}
}

// TestFuncGetsItsOwnConfig: a Go trainable may change its config without
// touching the work's.
func TestFuncGetsItsOwnConfig(t *testing.T) {
	r := newRecorder(t, "report")
	r.config["nested"] = map[string]any{"lr": 0.1}
	e := &funcExecutor{Func: func(_ context.Context, c map[string]any) error {
		c["x"] = 1
		c["nested"].(map[string]any)["lr"] = 1
		return nil
	}, Grace: testGrace, Log: testLog(t)}
	if err := r.run(t, e); err != nil {
		t.Fatal(err)
	}
	if r.config["x"] != 0.5 || r.config["nested"].(map[string]any)["lr"] != 0.1 {
		t.Errorf("config changed under the work: %v", r.config)
	}
}
