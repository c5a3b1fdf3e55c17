package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tunejet/tunejet/internal/trainproto"
)

// exitError is a command trainable that exited non-zero; its text carries
// the last lines of stderr.
type exitError struct {
	code int
	tail string
}

func (e *exitError) Error() string {
	if e.tail == "" {
		return fmt.Sprintf("trainable exited with status %d", e.code)
	}
	return fmt.Sprintf("trainable exited with status %d; last lines of stderr:\n%s", e.code, e.tail)
}

// stderrTailLines is how many stderr lines a failure keeps.
const stderrTailLines = 20

// runCommand runs a command trainable in the trial directory, serving the
// trainable protocol on a Unix socket while it runs.
func runCommand(a *attempt) error {
	// The socket lives beside the trial directory, not in it: the trial
	// directory holds the trainable's artifacts.
	sockDir := filepath.Join(a.s.cfg.WorkDir, ".sockets", fmt.Sprintf("%s-%d", a.work.TrialID, a.num))
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return fmt.Errorf("trainable socket: %w", err)
	}
	defer os.RemoveAll(sockDir)
	ln, sock, err := trainproto.Listen(sockDir)
	if err != nil {
		return fmt.Errorf("trainable socket: %w", err)
	}
	sctx, stopServe := context.WithCancel(context.WithoutCancel(a.ctx))
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := trainproto.Serve(sctx, ln, handler{a}); err != nil && !errors.Is(err, context.Canceled) {
			a.log.Warn().Err(err).Msg("trainable socket")
		}
	}()
	defer func() { stopServe(); <-served }()

	cmd, tail, closeFiles, err := a.command(sock)
	if err != nil {
		return err
	}
	defer closeFiles()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start trainable %q: %w", cmd.Path, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-a.ctx.Done():
		err = a.terminate(cmd, waited)
	}
	return exitResult(err, tail)
}

// command builds the process: program and arguments resolved against the
// experiment file's folder, the trial directory as working directory, the
// protocol's environment, stdout and stderr into the trial directory.
func (a *attempt) command(sock string) (*exec.Cmd, *tailBuffer, func(), error) {
	t := a.work.Trainable
	args := make([]string, len(t.Command))
	for i, arg := range t.Command {
		args[i] = resolveArg(t.Dir, arg, i == 0)
	}
	config, err := json.Marshal(a.work.Config)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encode trial config: %w", err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = a.dir
	cmd.Env = append(os.Environ(), trainproto.Env{
		Config: config, TrialID: a.work.TrialID, TrialName: a.work.TrialName, Experiment: a.exp,
		TrialDir: a.dir, Attempt: a.num, Socket: sock, CheckpointDir: a.Checkpoint(),
	}.Environ()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := os.OpenFile(filepath.Join(a.dir, "stdout"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("trial stdout: %w", err)
	}
	stderr, err := os.OpenFile(filepath.Join(a.dir, "stderr"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		stdout.Close()
		return nil, nil, nil, fmt.Errorf("trial stderr: %w", err)
	}
	tail := &tailBuffer{}
	cmd.Stdout = stdout
	cmd.Stderr = io.MultiWriter(stderr, tail)
	closeFiles := func() { stdout.Close(); stderr.Close() }
	return cmd, tail, closeFiles, nil
}

// resolveArg makes relative paths that exist in the experiment file's
// folder absolute, so "python3 train.py" works from the trial directory.
// The program itself is looked up in PATH unless it contains a slash.
func resolveArg(dir, arg string, program bool) string {
	if dir == "" || filepath.IsAbs(arg) || arg == "" {
		return arg
	}
	if program && !strings.Contains(arg, "/") {
		return arg
	}
	p := filepath.Join(dir, arg)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return arg
}

// terminate ends a stopped command: SIGTERM to its process group, then
// SIGKILL after the grace period.
func (a *attempt) terminate(cmd *exec.Cmd, waited chan error) error {
	pgid := -cmd.Process.Pid
	if errors.Is(context.Cause(a.ctx), ErrSuperseded) { // another runner owns the trial now
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		return <-waited
	}
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	t := time.NewTimer(a.s.cfg.StopGrace)
	defer t.Stop()
	select {
	case err := <-waited:
		return err
	case <-t.C:
		a.log.Warn().Msg("trainable ignored SIGTERM; killing it")
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		return <-waited
	}
}

func exitResult(err error, tail *tailBuffer) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.ExitCode(), tail: tail.String()}
	}
	return err
}

// handler serves the trainable protocol for one attempt.
type handler struct{ a *attempt }

func (h handler) Report(ctx context.Context, metrics map[string]any, checkpointDir string) (bool, error) {
	stop, err := h.a.Report(ctx, metrics, checkpointDir)
	if stop {
		return true, nil
	}
	return false, err
}

func (h handler) GetCheckpoint(context.Context) (string, error) { return h.a.Checkpoint(), nil }

// tailBuffer keeps the last lines written to it.
type tailBuffer struct {
	mu    sync.Mutex
	lines []string
	part  bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range p {
		if c != '\n' {
			if t.part.Len() < 4096 {
				t.part.WriteByte(c)
			}
			continue
		}
		t.lines = append(t.lines, t.part.String())
		t.part.Reset()
		if len(t.lines) > stderrTailLines {
			t.lines = t.lines[len(t.lines)-stderrTailLines:]
		}
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if t.part.Len() > 0 {
		lines = append(append([]string(nil), lines...), t.part.String())
	}
	if len(lines) > stderrTailLines {
		lines = lines[len(lines)-stderrTailLines:]
	}
	return strings.Join(lines, "\n")
}
