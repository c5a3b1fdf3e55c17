package main_test

// The tests of this package run the tunejet binary as users and operators
// do: built once by TestMain, started as real processes, killed for real.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	// tunejetBin is the binary under test, built by TestMain.
	tunejetBin string
	// moduleRoot is the directory holding go.mod.
	moduleRoot string
)

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == os.DevNull {
		fmt.Fprintf(os.Stderr, "cannot find the module root (go env GOMOD: %q): %v\n", out, err)
		return 1
	}
	moduleRoot = filepath.Dir(strings.TrimSpace(string(out)))
	dir, err := os.MkdirTemp("", "tunejet-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	tunejetBin = filepath.Join(dir, "tunejet")
	build := exec.Command("go", "build", "-o", tunejetBin, "./cmd/tunejet")
	build.Dir = moduleRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/tunejet: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// processTimeout bounds every process a test waits for, so that a hang
// fails the test with the process's output instead of stalling the run.
const processTimeout = 2 * time.Minute

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// baseEnv is the test process's environment without anything that would
// change how tunejet behaves (a NATS URL, a trainable socket, log options),
// plus extra ("KEY=value").
func baseEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		key, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(key, "NATS_") || strings.HasPrefix(key, "TUNEJET_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// result is how a finished tunejet process ended.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit status %d\n--- stdout ---\n%s\n--- stderr ---\n%s", r.code, r.stdout, r.stderr)
}

// tunejet runs the binary to its end in dir (the test's working directory
// when empty) with env and returns how it ended.
func tunejet(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	p := startTunejet(t, dir, env, args...)
	return p.wait(t)
}

// proc is a tunejet process started by a test.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan struct{}
	waitErr        error
}

func startTunejet(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	return startProc(t, dir, env, false, args...)
}

// startProc starts tunejet with args in dir; in a process group of its
// own when group is set (killGroup kills it with the trainables it ran).
func startProc(t *testing.T, dir string, env []string, group bool, args ...string) *proc {
	t.Helper()
	p := &proc{name: strings.Join(args, " "), stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(tunejetBin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if group {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start tunejet %s: %v", p.name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	// Whatever happens to the test, the process does not outlive it.
	t.Cleanup(func() {
		if group {
			p.killGroup()
		} else {
			p.kill()
		}
		if t.Failed() {
			t.Logf("tunejet %s:\n--- stdout ---\n%s\n--- stderr ---\n%s", p.name, p.stdout, p.stderr)
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to be reaped.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit, killing it after processTimeout.
func (p *proc) wait(t *testing.T) result {
	t.Helper()
	timer := time.NewTimer(processTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.kill()
		t.Fatalf("tunejet %s did not exit within %v; killed it\n--- stdout ---\n%s\n--- stderr ---\n%s", p.name, processTimeout, p.stdout, p.stderr)
	}
	r := result{code: 0, stdout: p.stdout.String(), stderr: p.stderr.String()}
	var ee *exec.ExitError
	switch {
	case p.waitErr == nil:
	case errors.As(p.waitErr, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("tunejet %s was killed by %v\n%s", p.name, ws.Signal(), r)
		}
	default:
		t.Fatalf("wait for tunejet %s: %v", p.name, p.waitErr)
	}
	return r
}

// writeFile writes content to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// jsonResults is the output of `tunejet results --json`.
type jsonResults struct {
	ExperimentPath string   `json:"experiment_path"`
	ParetoFront    []string `json:"pareto_front"`
	Trials         []struct {
		TrialID     string         `json:"trial_id"`
		TrialName   string         `json:"trial_name"`
		Status      string         `json:"status"`
		Config      map[string]any `json:"config"`
		Metrics     map[string]any `json:"metrics"`
		Error       string         `json:"error"`
		Path        string         `json:"path"`
		NumFailures int            `json:"num_failures"`
		EndReason   string         `json:"end_reason"`
		Checkpoint  string         `json:"checkpoint"`
		Best        []string       `json:"best_checkpoints"`
	} `json:"trials"`
	Best string `json:"best_trial_id"`
}

// resultsJSON runs `tunejet results --json path` and decodes its output.
func resultsJSON(t *testing.T, path string) jsonResults {
	t.Helper()
	r := tunejet(t, "", baseEnv(), "results", "--json", path)
	if r.code != 0 {
		t.Fatalf("tunejet results --json %s:\n%s", path, r)
	}
	var out jsonResults
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("tunejet results --json: output is not the documented JSON: %v\n%s", err, r.stdout)
	}
	return out
}

// resultLines reads a trial's result.json: one JSON object per line.
func resultLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("%s line %d: %v: %q", path, i+1, err, line)
		}
		rows = append(rows, row)
	}
	return rows
}
