package bus_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/internal/bus"
)

// lockHolderEnv, set, makes TestStoreLockHolder the child process that
// holds the store dir it names.
const lockHolderEnv = "TUNEJET_TEST_LOCK_HOLDER"

// TestStoreLockedWhileServing: a second server on a store dir in use fails
// with ErrStoreInUse naming the dir and the process that holds it; once
// the first shuts down, the dir can be used again.
func TestStoreLockedWhileServing(t *testing.T) {
	dir := t.TempDir()
	first, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	second, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: dir})
	if err == nil {
		second.Shutdown()
		first.Shutdown()
		t.Fatal("a second server started on a store dir in use")
	}
	checkInUse(t, err, dir, os.Getpid())
	if !bus.StoreInUse(dir) {
		t.Error("StoreInUse: false while a server runs on the dir")
	}
	first.Shutdown()
	if bus.StoreInUse(dir) {
		t.Error("StoreInUse: true after Shutdown")
	}
	again, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: dir})
	if err != nil {
		t.Fatalf("store dir still locked after Shutdown (or by StoreInUse): %v", err)
	}
	again.Shutdown()
	if bus.StoreInUse(dir + "/deleted") {
		t.Error("StoreInUse: true for a dir that does not exist")
	}
}

// TestStoreUnlockedWhenHolderKilled: a process killed with SIGKILL while
// it serves a store dir leaves the dir usable.
func TestStoreUnlockedWhenHolderKilled(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStoreLockHolder$")
	child.Env = append(os.Environ(), lockHolderEnv+"="+dir)
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe() // the child ends when it closes
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	out := bufio.NewReader(stdout)
	for {
		line, err := out.ReadString('\n')
		if line == "serving\n" {
			break
		}
		if err != nil {
			t.Fatalf("the child did not start serving the store: %v", err)
		}
	}

	_, err = bus.StartEmbedded(bus.EmbedOptions{StoreDir: dir})
	checkInUse(t, err, dir, child.Process.Pid)
	if !bus.StoreInUse(dir) {
		t.Error("StoreInUse: false while another process serves the dir")
	}

	if err := child.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait() // it was killed, as its error says
	if bus.StoreInUse(dir) {
		t.Error("StoreInUse: true after the process that served the dir was killed")
	}
	e, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: dir})
	if err != nil {
		t.Fatalf("store dir still locked after its holder was killed: %v", err)
	}
	e.Shutdown()
}

// TestStoreLockHolder is the child process of
// TestStoreUnlockedWhenHolderKilled: it serves the store dir lockHolderEnv
// names, says so on stdout, and waits for stdin to close.
func TestStoreLockHolder(t *testing.T) {
	dir := os.Getenv(lockHolderEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestStoreUnlockedWhenHolderKilled")
	}
	e, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	fmt.Println("serving")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// checkInUse fails t unless err is ErrStoreInUse naming dir and pid.
func checkInUse(t *testing.T, err error, dir string, pid int) {
	t.Helper()
	if !errors.Is(err, bus.ErrStoreInUse) {
		t.Fatalf("error %v, want one wrapping ErrStoreInUse", err)
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "pid "+strconv.Itoa(pid)) {
		t.Errorf("error %q does not name the dir %s and the pid %d holding it", msg, dir, pid)
	}
}
