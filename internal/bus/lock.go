package bus

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ErrStoreInUse is the error StartEmbedded wraps when another embedded
// server, in this process or another, already runs on the store dir.
var ErrStoreInUse = errors.New("store dir in use")

// storeLockFile is the lock file inside a store dir. It holds the pid of
// the process that holds the lock; it is never removed (a process could
// lock the old file while another creates a new one).
const storeLockFile = "tunejet.lock"

// storeLock is an exclusive flock on a store dir's lock file. The kernel
// drops it when the process dies, however it dies; the file is opened
// close-on-exec, so no child process keeps it.
type storeLock struct {
	f    *os.File
	once sync.Once
}

// lockStore takes the lock on dir without waiting, and writes this
// process's pid into the lock file. When another holds it, the error wraps
// ErrStoreInUse and names the dir and the holder's pid.
func lockStore(dir string) (*storeLock, error) {
	path := filepath.Join(dir, storeLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock store dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := lockHolder(f)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked by %s (%s)", ErrStoreInUse, dir, holder, path)
		}
		return nil, fmt.Errorf("lock store dir %s: %w", dir, err)
	}
	if err := writePid(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock store dir: write pid to %s: %w", path, err)
	}
	return &storeLock{f: f}, nil
}

// writePid replaces the lock file's content with this process's pid.
func writePid(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// lockHolder names the process that holds the lock by the pid written in
// the lock file; the holder may not have written it yet.
func lockHolder(f *os.File) string {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 32))
	pid := strings.TrimSpace(string(b))
	if _, perr := strconv.Atoi(pid); err != nil || perr != nil {
		return "a process whose pid is not written yet"
	}
	return "pid " + pid
}

// release drops the lock; later calls, and calls on nil, do nothing.
func (l *storeLock) release() {
	if l == nil {
		return
	}
	l.once.Do(func() { _ = l.f.Close() })
}

// StoreInUse reports whether an embedded server, in this process or
// another, runs on the store dir: whether it holds the dir's lock. A dir
// with no lock file, or none at all (deleted), is not in use; one whose
// lock file cannot be opened (another user's) is taken to be. It takes a
// shared lock for an instant when the lock is free, during which another
// server could not start on the dir.
func StoreInUse(dir string) bool {
	f, err := os.Open(filepath.Join(dir, storeLockFile))
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
