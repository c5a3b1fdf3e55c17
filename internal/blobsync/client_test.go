package blobsync_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// tarUp copies {source} to {target} with GNU tar, which takes rsync's
// --exclude PATTERN.
const tarUp = "mkdir -p {target} && tar -C {source} -cf - {exclude} . | tar -C {target} -xf -"

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		got[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
}

// TestCommandClientSyncsWithRealCommands: sync_up through tar leaves out
// the excluded checkpoints, sync_down through cp brings the rest back,
// delete through rm removes the remote; paths with spaces and quotes reach
// the commands whole.
func TestCommandClientSyncsWithRealCommands(t *testing.T) {
	requireTools(t, "tar", "cp", "rm")
	base := t.TempDir()
	local := filepath.Join(base, "local dir's")
	remote := filepath.Join(base, "remote $HOME", "exp")
	writeFiles(t, local, map[string]string{
		"experiment_state-x.json":             "{}",
		"trial_1/result.json":                 "{\"a\": 1}\n",
		"trial_1/progress.csv":                "a\n1\n",
		"trial_1/checkpoint_000001/model.bin": "weights",
		"trial_1/checkpoint_000001/sub/x":     "x",
	})
	c := blobsync.CommandClient{
		SyncUpTemplate:   tarUp,
		SyncDownTemplate: "cp -r {source}/. {target}",
		DeleteTemplate:   "rm -rf {target}",
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.SyncUp(ctx, local, remote, []string{"*/checkpoint_*"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"experiment_state-x.json": "{}",
		"trial_1/result.json":     "{\"a\": 1}\n",
		"trial_1/progress.csv":    "a\n1\n",
	}
	if got := readFiles(t, remote); !equalTrees(got, want) {
		t.Fatalf("remote after sync_up with exclude = %v, want %v", got, want)
	}
	down := filepath.Join(base, "restored", "exp")
	if err := c.SyncDown(ctx, remote, down, nil); err != nil {
		t.Fatal(err)
	}
	if got := readFiles(t, down); !equalTrees(got, want) {
		t.Fatalf("local after sync_down = %v, want %v", got, want)
	}
	if err := c.Delete(ctx, remote); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(remote); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("remote after delete: %v, want it gone", err)
	}
	if _, err := os.Stat(filepath.Join(base, "remote $HOME")); err != nil {
		t.Fatalf("delete removed more than its target: %v", err)
	}
}

func equalTrees(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestCommandClientErrorCarriesStderrAndExitCode: a failing command's error
// names the command, its exit status and the end of its stderr.
func TestCommandClientErrorCarriesStderrAndExitCode(t *testing.T) {
	c := blobsync.CommandClient{SyncUpTemplate: "echo cannot reach {target} >&2; exit 7 # {source}"}
	err := c.SyncUp(context.Background(), t.TempDir(), "remote:bucket/x", nil)
	var ce *blobsync.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *CommandError", err)
	}
	if ce.ExitCode != 7 || ce.Stderr != "cannot reach remote:bucket/x" || ce.Operation != "sync_up" {
		t.Fatalf("CommandError = %+v, want exit 7 and the stderr", ce)
	}
	if !strings.Contains(err.Error(), "Error message (7): cannot reach remote:bucket/x") {
		t.Fatalf("message %q lacks the exit status and stderr", err)
	}
}

// TestCommandClientStderrTail: only the end of a long stderr is kept.
func TestCommandClientStderrTail(t *testing.T) {
	c := blobsync.CommandClient{SyncUpTemplate: "i=0; while [ $i -lt 2000 ]; do echo line$i >&2; i=$((i+1)); done; exit 1 # {source} {target}"}
	err := c.SyncUp(context.Background(), t.TempDir(), "r", nil)
	var ce *blobsync.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *CommandError", err)
	}
	if !strings.HasSuffix(ce.Stderr, "line1999") || strings.Contains(ce.Stderr, "line0\n") || len(ce.Stderr) > 4096 {
		t.Fatalf("stderr kept %d bytes ending %q; want the last 4 KiB", len(ce.Stderr), ce.Stderr[max(0, len(ce.Stderr)-20):])
	}
}

// TestCommandClientHungCommandIsKilledAndRetried: an attempt that outlives
// sync_timeout is killed with its whole process group, and the retry
// succeeds.
func TestCommandClientHungCommandIsKilledAndRetried(t *testing.T) {
	base := t.TempDir()
	local := filepath.Join(base, "local")
	writeFiles(t, local, map[string]string{"result.json": "{}\n"})
	marker, pidFile := filepath.Join(base, "tried"), filepath.Join(base, "sleeper.pid")
	// The first attempt starts a sleeper in the background (same process
	// group) and waits for it; the second copies.
	script := "if [ -e " + blobsync.Quote(marker) + " ]; then mkdir -p {target} && cp -r {source}/. {target}; " +
		"else touch " + blobsync.Quote(marker) + "; sleep 600 & echo $! > " + blobsync.Quote(pidFile) + "; wait; fi"
	c := blobsync.CommandClient{SyncUpTemplate: script}
	s, logs := newSyncer(t, blobsync.Config{SyncTimeout: 300 * time.Millisecond, MaxRetries: 2, RetryBackoff: time.Millisecond})
	remote := filepath.Join(base, "remote")
	err := s.Run(context.Background(), "sync_up", func(ctx context.Context) error {
		return c.SyncUp(ctx, local, remote, nil)
	})
	if err != nil {
		t.Fatalf("Run: %v (logs: %s)", err, logs)
	}
	if got := readFiles(t, remote); got["result.json"] != "{}\n" {
		t.Fatalf("remote = %v after the retry", got)
	}
	if !strings.Contains(logs.String(), "did not finish running within the timeout of 0.3 seconds") {
		t.Fatalf("logs lack the timeout of the first attempt: %s", logs)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 10*time.Second, fmt.Sprintf("the hung command's child %d gone with its process group", pid), func() bool {
		return !alive(pid)
	})
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestCommandClientValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    blobsync.CommandClient
		want string
	}{
		{"empty sync_up", blobsync.CommandClient{}, "sync_up: invalid syncer template: must not be empty"},
		{"unknown", blobsync.CommandClient{SyncUpTemplate: "cp {source} {target} {dest}"}, "unknown placeholder {dest}"},
		{"ray options", blobsync.CommandClient{SyncUpTemplate: "rsync {options} {source} {target}"}, "Ray's {options} is {exclude} here"},
		{"no target", blobsync.CommandClient{SyncUpTemplate: "cp {source} /x"}, "must hold {target}"},
		{"unmatched", blobsync.CommandClient{SyncUpTemplate: "cp {source} {target"}, "unmatched '{'"},
		{"stray close", blobsync.CommandClient{SyncUpTemplate: "cp {source} {target} }"}, "unmatched '}'"},
		{"down", blobsync.CommandClient{SyncUpTemplate: "cp {source} {target}", SyncDownTemplate: "cp {source} x"}, "sync_down:"},
		{"delete source", blobsync.CommandClient{SyncUpTemplate: "cp {source} {target}", DeleteTemplate: "rm {source}"}, "delete: invalid syncer template: unknown placeholder {source}"},
		{"exclude", blobsync.CommandClient{SyncUpTemplate: "cp {source} {target}", ExcludeTemplate: "--exclude"}, "exclude_template:"},
	} {
		err := tc.c.Validate()
		if err == nil || !errors.Is(err, blobsync.ErrTemplate) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.want)
		}
	}
	ok := blobsync.CommandClient{SyncUpTemplate: "x=${{HOME}}; rclone copy {exclude} {source} {target}", DeleteTemplate: "rclone purge {target}", ExcludeTemplate: "--exclude={pattern}"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v", ok, err)
	}
}

func TestCommandRendering(t *testing.T) {
	c := blobsync.CommandClient{SyncUpTemplate: "x=${{HOME}} sync {exclude} {source} {target}"}
	got, err := c.Command(c.SyncUpTemplate, "/a b", "remote:it's", []string{"*/checkpoint_*", "x"})
	if err != nil {
		t.Fatal(err)
	}
	want := `x=${HOME} sync --exclude '*/checkpoint_*' --exclude x '/a b' 'remote:it'"'"'s'`
	if got != want {
		t.Fatalf("Command = %s\nwant      %s", got, want)
	}
	got, err = c.Command(c.SyncUpTemplate, "/a", "/b", nil)
	if err != nil || got != "x=${HOME} sync  /a /b" {
		t.Fatalf("Command without exclude = %q, %v", got, err)
	}
}

func TestQuoteIsShlexQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":           "''",
		"abc/d.e-f":  "abc/d.e-f",
		"s3://b/x=1": "s3://b/x=1",
		"a b":        "'a b'",
		"it's":       `'it'"'"'s'`,
		"$HOME":      "'$HOME'",
		"*":          "'*'",
	} {
		if got := blobsync.Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestBucketClient: the gocloud Client honours exclude as Match does.
func TestBucketClient(t *testing.T) {
	b := memblob.OpenBucket(nil)
	defer b.Close()
	local := t.TempDir()
	writeFiles(t, local, map[string]string{"t/result.json": "1", "t/checkpoint_000001/m": "w"})
	var c blobsync.Client = blobsync.BucketClient{Bucket: b}
	ctx := context.Background()
	if err := c.SyncUp(ctx, local, "exp", []string{"*/checkpoint_*"}); err != nil {
		t.Fatal(err)
	}
	down := t.TempDir()
	if err := c.SyncDown(ctx, "exp", down, nil); err != nil {
		t.Fatal(err)
	}
	if got := readFiles(t, down); !equalTrees(got, map[string]string{"t/result.json": "1"}) {
		t.Fatalf("round trip = %v", got)
	}
	if err := c.Delete(ctx, "exp"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.Exists(ctx, "exp/t/result.json"); ok {
		t.Fatal("Delete left exp/t/result.json")
	}
}
