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

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/session"
	"github.com/tunejet/tunejet/internal/trainproto"
)

// exitError is a command trainable that exited non-zero; its text carries
// the last lines of stderr.
type exitError struct {
	code   int
	signal syscall.Signal // the signal that ended it, if one did (code is -1)
	tail   string
}

func (e *exitError) Error() string {
	what := fmt.Sprintf("trainable exited with status %d", e.code)
	if e.signal != 0 {
		what = fmt.Sprintf("trainable was killed by signal %d (%v)", int(e.signal), e.signal)
	}
	if e.tail == "" {
		return what
	}
	return what + "; last lines of stderr:\n" + e.tail
}

// stderrTailLines is how many stderr lines a failure keeps.
const stderrTailLines = 20

// commandExecutor runs a command trainable in the trial directory, serving
// the trainable protocol on a Unix socket while it runs. A stopped command
// gets SIGTERM, and SIGKILL after Grace.
type commandExecutor struct {
	// Command is the program and its arguments; Dir the experiment file's
	// folder, which relative paths in Command resolve against.
	Command []string
	Dir     string
	// Sockets holds each attempt's socket directory. The socket lives
	// beside the trial directory, not in it: the trial directory holds the
	// trainable's artifacts.
	Sockets string
	Grace   time.Duration
	Log     zerolog.Logger
	// SDK puts the runner's tunejet package on the path of a Python
	// command that cannot import its own; nil adds nothing.
	SDK *pythonSDK
	// Warm, when set, forks the attempt's process from a warm worker of
	// the command (warm.go); nil starts it cold.
	Warm *warmSet
}

// Execute implements Executor.
func (e *commandExecutor) Execute(ctx context.Context, s session.Session, config map[string]any) error {
	info := s.Info()
	sock, stopServe, err := e.serve(ctx, fmt.Sprintf("%s-%d", info.TrialID, info.Attempt), handler{s})
	if err != nil {
		return err
	}
	defer stopServe()

	cmd, tail, closeFiles, err := e.command(s, config, sock)
	if err != nil {
		return err
	}
	defer closeFiles()
	extra := e.SDK.env(ctx, cmd.Args, e.Dir, cmd.Env)
	if r, ok := session.ResourcesFrom(ctx); ok { // later entries win over the runner's own
		extra = append(extra, resourceEnv(r)...)
	}
	cmd.Env = append(cmd.Env, extra...)
	if e.Warm != nil {
		key := strings.Join(cmd.Args, "\x00") + "\x00" + e.Dir + "\x00" + strings.Join(extra, "\x00")
		if w := e.Warm.worker(ctx, e, key, cmd.Args, append(os.Environ(), extra...)); w != nil {
			defer e.Warm.release(w)
			return e.forked(ctx, w, cmd)
		}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start trainable %q: %w", cmd.Path, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		err = e.terminate(ctx, -cmd.Process.Pid, waited)
	}
	return exitResult(err, tail)
}

// forked runs the attempt's process cmd as a fork of the warm worker w.
// Its stdio go to the trial directory's files as a cold process's do; the
// tail of stderr is read back from its file.
func (e *commandExecutor) forked(ctx context.Context, w *warmWorker, cmd *exec.Cmd) error {
	stderr := filepath.Join(cmd.Dir, "stderr")
	var from int64
	if st, err := os.Stat(stderr); err == nil {
		from = st.Size()
	}
	pid, ended, err := w.fork(cmd.Env, cmd.Dir, filepath.Join(cmd.Dir, "stdout"), stderr)
	if err != nil {
		return fmt.Errorf("start trainable %q in a warm worker: %w", cmd.Path, err)
	}
	select {
	case err = <-ended:
	case <-ctx.Done():
		err = e.terminate(ctx, -pid, ended)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		ee.tail = fileTail(stderr, from)
	}
	return err
}

// serve serves the trainable protocol with h on a socket of its own,
// named name, until stop is called.
func (e *commandExecutor) serve(ctx context.Context, name string, h trainproto.Handler) (sock string, stop func(), err error) {
	sockDir := filepath.Join(e.Sockets, name)
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return "", nil, fmt.Errorf("trainable socket: %w", err)
	}
	ln, sock, err := trainproto.Listen(sockDir)
	if err != nil {
		_ = os.RemoveAll(sockDir)
		return "", nil, fmt.Errorf("trainable socket: %w", err)
	}
	sctx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := trainproto.Serve(sctx, ln, h); err != nil && !errors.Is(err, context.Canceled) {
			e.Log.Warn().Err(err).Msg("trainable socket")
		}
	}()
	return sock, func() { stopServe(); <-served; _ = os.RemoveAll(sockDir) }, nil
}

// command builds the process: program and arguments resolved against the
// experiment file's folder, the trial directory as working directory, the
// protocol's environment, stdout and stderr into the trial directory.
func (e *commandExecutor) command(s session.Session, config map[string]any, sock string) (*exec.Cmd, *tailBuffer, func(), error) {
	args := make([]string, len(e.Command))
	for i, arg := range e.Command {
		args[i] = resolveArg(e.Dir, arg, i == 0)
	}
	encoded, err := json.Marshal(config)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encode trial config: %w", err)
	}
	info := s.Info()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = info.TrialDir
	cmd.Env = append(os.Environ(), trainproto.Env{
		Config: encoded, TrialID: info.TrialID, TrialName: info.TrialName, Experiment: info.Experiment,
		TrialDir: info.TrialDir, Attempt: info.Attempt, Socket: sock, CheckpointDir: s.Checkpoint(),
	}.Environ()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := os.OpenFile(filepath.Join(info.TrialDir, "stdout"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("trial stdout: %w", err)
	}
	stderr, err := os.OpenFile(filepath.Join(info.TrialDir, "stderr"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		_ = stdout.Close()
		return nil, nil, nil, fmt.Errorf("trial stderr: %w", err)
	}
	tail := &tailBuffer{}
	cmd.Stdout = stdout
	cmd.Stderr = io.MultiWriter(stderr, tail)
	closeFiles := func() { _ = stdout.Close(); _ = stderr.Close() }
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

// terminate ends a stopped command, process group pgid: SIGTERM, then
// SIGKILL after the grace period. waited receives how it ended.
func (e *commandExecutor) terminate(ctx context.Context, pgid int, waited <-chan error) error {
	if errors.Is(context.Cause(ctx), ErrSuperseded) { // another runner owns the trial now
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		return <-waited
	}
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	t := time.NewTimer(e.Grace)
	defer t.Stop()
	select {
	case err := <-waited:
		return err
	case <-t.C:
		e.Log.Warn().Msg("trainable ignored SIGTERM; killing it")
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		return <-waited
	}
}

func exitResult(err error, tail *tailBuffer) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		out := &exitError{code: ee.ExitCode(), tail: tail.String()}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.signal = ws.Signal()
		}
		return out
	}
	return err
}

// fileTail is the last lines of file path written after offset from.
func fileTail(path string, from int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	const most = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size()-from > most {
		from = st.Size() - most
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return ""
	}
	t := &tailBuffer{}
	_, _ = io.Copy(t, f)
	return t.String()
}

// handler serves the trainable protocol for one attempt's session.
type handler struct{ s session.Session }

func (h handler) Report(ctx context.Context, metrics map[string]any, checkpointDir string) (bool, error) {
	stop, err := h.s.Report(ctx, metrics, checkpointDir)
	if stop {
		return true, nil
	}
	return false, err
}

func (h handler) GetCheckpoint(context.Context) (string, error) { return h.s.Checkpoint(), nil }

// Paused tells the trainable, once told to stop, that the trial is paused.
func (h handler) Paused() bool {
	p, ok := h.s.(interface{ Paused() bool })
	return ok && p.Paused()
}

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
