package blobsync

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"gocloud.dev/blob"
)

// Client moves a directory tree between local disk and one kind of remote
// storage: Ray Tune's Syncer (sync_up, sync_down, delete). remote is
// whatever the client understands: a key prefix for a BucketClient, a
// path or URI its commands take for a CommandClient. Each call runs once;
// Syncer.Run bounds and retries it.
type Client interface {
	// SyncUp copies localDir's files, but for those an exclude pattern
	// matches, to remote.
	SyncUp(ctx context.Context, localDir, remote string, exclude []string) error
	// SyncDown copies remote's files, but for excluded ones, into localDir.
	SyncDown(ctx context.Context, remote, localDir string, exclude []string) error
	// Delete removes remote and everything under it.
	Delete(ctx context.Context, remote string) error
}

// BucketClient is a Client for a gocloud.dev/blob bucket: remote is a key
// prefix in Bucket, and exclude patterns are matched as Match does.
type BucketClient struct {
	Bucket *blob.Bucket
}

// SyncUp is SyncUp into b.Bucket under the prefix remote.
func (b BucketClient) SyncUp(ctx context.Context, localDir, remote string, exclude []string) error {
	return SyncUp(ctx, localDir, b.Bucket, remote, exclude)
}

// SyncDown is SyncDown from b.Bucket's prefix remote.
func (b BucketClient) SyncDown(ctx context.Context, remote, localDir string, exclude []string) error {
	return SyncDown(ctx, b.Bucket, remote, localDir, exclude)
}

// Delete is Delete of b.Bucket's prefix remote.
func (b BucketClient) Delete(ctx context.Context, remote string) error {
	return Delete(ctx, b.Bucket, remote)
}

// DefaultExcludeTemplate renders one exclude pattern for {exclude}: the
// option rsync, rclone and GNU tar understand.
const DefaultExcludeTemplate = "--exclude {pattern}"

// Placeholders each template may hold.
var (
	SyncPlaceholders    = []string{"source", "target", "exclude"}
	DeletePlaceholders  = []string{"target"}
	ExcludePlaceholders = []string{"pattern"}
)

// ErrTemplate is wrapped by every error about a command template.
var ErrTemplate = errors.New("invalid syncer template")

// CommandClient is a Client that runs shell commands (Ray's
// CommandBasedClient), for storage gocloud does not speak: rclone, hdfs
// dfs, rsync over ssh. Each template is a Python format string: {source}
// and {target} are replaced by the paths, shell-quoted; {exclude} by the
// exclude patterns, each rendered with ExcludeTemplate ({pattern} quoted)
// and joined with spaces; "{{" and "}}" are literal braces. The command
// runs with sh -c in its own process group, which is killed when the
// call's context ends.
type CommandClient struct {
	// SyncUpTemplate copies {source} (a local folder) to {target} (a
	// remote); it must hold both. Required.
	SyncUpTemplate string
	// SyncDownTemplate copies {source} (a remote) into {target} (a local
	// folder, created first); it must hold both. Empty: SyncDown fails.
	SyncDownTemplate string
	// DeleteTemplate removes {target} (a remote). Empty: Delete does
	// nothing, as Ray's default ": {target}".
	DeleteTemplate string
	// ExcludeTemplate renders each exclude pattern; it must hold
	// {pattern}. Default DefaultExcludeTemplate.
	ExcludeTemplate string
}

// Validate reports every template that is missing, names an unknown
// placeholder, lacks a required one, or has an unmatched brace, joined;
// each error wraps ErrTemplate and names the template.
func (c CommandClient) Validate() error {
	var errs []error
	check := func(name, tmpl string, allowed, required []string) {
		if err := CheckTemplate(tmpl, allowed, required); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	if strings.TrimSpace(c.SyncUpTemplate) == "" {
		errs = append(errs, fmt.Errorf("sync_up: %w: must not be empty", ErrTemplate))
	} else {
		check("sync_up", c.SyncUpTemplate, SyncPlaceholders, []string{"source", "target"})
	}
	if c.SyncDownTemplate != "" {
		check("sync_down", c.SyncDownTemplate, SyncPlaceholders, []string{"source", "target"})
	}
	if c.DeleteTemplate != "" {
		check("delete", c.DeleteTemplate, DeletePlaceholders, []string{"target"})
	}
	if c.ExcludeTemplate != "" {
		check("exclude_template", c.ExcludeTemplate, ExcludePlaceholders, []string{"pattern"})
	}
	return errors.Join(errs...)
}

// CheckTemplate reports the first problem of tmpl: an unmatched brace, a
// placeholder not in allowed, or one of required missing. The error wraps
// ErrTemplate.
func CheckTemplate(tmpl string, allowed, required []string) error {
	names, err := placeholders(tmpl)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, n := range names {
		if !contains(allowed, n) {
			hint := ""
			if n == "options" {
				hint = " (Ray's {options} is {exclude} here)"
			}
			return fmt.Errorf("%w: unknown placeholder {%s} in %q%s; use %s, and {{ }} for literal braces", ErrTemplate, n, tmpl, hint, braced(allowed))
		}
		seen[n] = true
	}
	for _, n := range required {
		if !seen[n] {
			return fmt.Errorf("%w: %q must hold {%s}", ErrTemplate, tmpl, n)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func braced(names []string) string {
	b := make([]string, len(names))
	for i, n := range names {
		b[i] = "{" + n + "}"
	}
	return strings.Join(b, ", ")
}

// placeholders lists the {name}s of a format string.
func placeholders(tmpl string) ([]string, error) {
	var names []string
	_, err := render(tmpl, func(name string) string { names = append(names, name); return "" })
	return names, err
}

// render substitutes each {name} of a Python-style format string with
// value(name); "{{" and "}}" are literal braces.
func render(tmpl string, value func(string) string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(tmpl); i++ {
		c := tmpl[i]
		switch {
		case c == '{' && i+1 < len(tmpl) && tmpl[i+1] == '{':
			b.WriteByte('{')
			i++
		case c == '}' && i+1 < len(tmpl) && tmpl[i+1] == '}':
			b.WriteByte('}')
			i++
		case c == '{':
			end := strings.IndexByte(tmpl[i+1:], '}')
			if end < 0 {
				return "", fmt.Errorf("%w: unmatched '{' in %q (write {{ for a literal brace)", ErrTemplate, tmpl)
			}
			name := tmpl[i+1 : i+1+end]
			if name == "" || strings.ContainsAny(name, "{ ") {
				return "", fmt.Errorf("%w: bad placeholder {%s} in %q (write {{ and }} for literal braces)", ErrTemplate, name, tmpl)
			}
			b.WriteString(value(name))
			i += end + 1
		case c == '}':
			return "", fmt.Errorf("%w: unmatched '}' in %q (write }} for a literal brace)", ErrTemplate, tmpl)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// Quote quotes s for a POSIX shell as Python's shlex.quote does.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	if !strings.ContainsFunc(s, unsafeInShell) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// unsafeInShell reports whether r needs quoting (shlex's _find_unsafe).
func unsafeInShell(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("@%+=:,./_-", r)
}

// Command returns the shell command a sync template runs with these
// values; exclude is rendered with ExcludeTemplate.
func (c CommandClient) Command(tmpl, source, target string, exclude []string) (string, error) {
	excl := c.ExcludeTemplate
	if excl == "" {
		excl = DefaultExcludeTemplate
	}
	opts := make([]string, 0, len(exclude))
	for _, p := range exclude {
		o, err := render(excl, func(string) string { return Quote(p) })
		if err != nil {
			return "", fmt.Errorf("exclude_template: %w", err)
		}
		opts = append(opts, o)
	}
	return render(tmpl, func(name string) string {
		switch name {
		case "source":
			return Quote(source)
		case "target":
			return Quote(target)
		case "exclude":
			return strings.Join(opts, " ")
		}
		return "{" + name + "}"
	})
}

// SyncUp runs SyncUpTemplate with {source} localDir and {target} remote.
func (c CommandClient) SyncUp(ctx context.Context, localDir, remote string, exclude []string) error {
	if c.SyncUpTemplate == "" {
		return fmt.Errorf("sync up %s: %w: no sync_up template", localDir, ErrTemplate)
	}
	cmd, err := c.Command(c.SyncUpTemplate, localDir, remote, exclude)
	if err != nil {
		return fmt.Errorf("sync up %s: %w", localDir, err)
	}
	return runShell(ctx, "sync_up", cmd)
}

// SyncDown creates localDir, then runs SyncDownTemplate with {source}
// remote and {target} localDir.
func (c CommandClient) SyncDown(ctx context.Context, remote, localDir string, exclude []string) error {
	if c.SyncDownTemplate == "" {
		return fmt.Errorf("sync down %s: %w: no sync_down template", remote, ErrTemplate)
	}
	cmd, err := c.Command(c.SyncDownTemplate, remote, localDir, exclude)
	if err != nil {
		return fmt.Errorf("sync down %s: %w", remote, err)
	}
	if err := os.MkdirAll(localDir, 0o755); err != nil {
		return fmt.Errorf("sync down %s: %w", remote, err)
	}
	return runShell(ctx, "sync_down", cmd)
}

// Delete runs DeleteTemplate with {target} remote; without one it does
// nothing.
func (c CommandClient) Delete(ctx context.Context, remote string) error {
	if c.DeleteTemplate == "" {
		return nil
	}
	cmd, err := c.Command(c.DeleteTemplate, "", remote, nil)
	if err != nil {
		return fmt.Errorf("delete %s: %w", remote, err)
	}
	return runShell(ctx, "delete", cmd)
}

// CommandError is a syncer command that failed: it exited non-zero, or was
// killed.
type CommandError struct {
	Operation string
	Command   string
	// ExitCode is the command's exit status; -1 when it was killed.
	ExitCode int
	// Stderr is the end of what the command wrote to its standard error.
	Stderr string
	Err    error
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("%s: sync error. Ran command: %s\nError message (%d): %s", e.Operation, e.Command, e.ExitCode, e.Stderr)
}

func (e *CommandError) Unwrap() error { return e.Err }

// stderrTail is how much of a command's standard error an error keeps.
const stderrTail = 4 << 10

// killWait bounds how long a killed command's pipes are waited for (a
// grandchild outside the process group may hold them open).
const killWait = 2 * time.Second

// runShell runs command with sh -c in a new process group, killing the
// group when ctx ends.
func runShell(ctx context.Context, operation, command string) error {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = killWait
	tail := &tailBuffer{max: stderrTail}
	cmd.Stderr = tail
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return &CommandError{Operation: operation, Command: command, ExitCode: -1, Stderr: tail.String(), Err: context.Cause(ctx)}
	}
	code := -1
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	return &CommandError{Operation: operation, Command: command, ExitCode: code, Stderr: tail.String(), Err: err}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
