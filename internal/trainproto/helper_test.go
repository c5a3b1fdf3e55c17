package trainproto

import (
	"bufio"
	"context"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// waitLimit bounds every wait in these tests: a deadline for hangs, not a
// sleep.
const waitLimit = 30 * time.Second

// gotReport is one Report call as the handler saw it.
type gotReport struct {
	Metrics map[string]any
	Dir     string
	// Files holds the checkpoint's files (path relative to Dir -> content),
	// read during Report as a runner stages them.
	Files map[string]string
}

// recordingHandler records reports and answers as configured.
type recordingHandler struct {
	stopAt     int    // answer stop from the stopAt-th report on; 0: never
	checkpoint string // what GetCheckpoint returns
	err        error  // returned by every call when set
	// blocked, when set, receives once per Report, which then waits for its
	// ctx to end and records the ctx's error in ctxErrs.
	blocked chan struct{}

	mu      sync.Mutex
	reports []gotReport
	ctxErrs []error
}

func (h *recordingHandler) Report(ctx context.Context, metrics map[string]any, dir string) (bool, error) {
	if h.blocked != nil {
		h.blocked <- struct{}{}
		<-ctx.Done()
		h.mu.Lock()
		h.ctxErrs = append(h.ctxErrs, ctx.Err())
		h.mu.Unlock()
		return false, ctx.Err()
	}
	if h.err != nil {
		return false, h.err
	}
	files, err := readTree(dir)
	if err != nil {
		return false, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reports = append(h.reports, gotReport{Metrics: metrics, Dir: dir, Files: files})
	return h.stopAt > 0 && len(h.reports) >= h.stopAt, nil
}

func (h *recordingHandler) GetCheckpoint(context.Context) (string, error) {
	return h.checkpoint, h.err
}

func (h *recordingHandler) got() []gotReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]gotReport(nil), h.reports...)
}

// readTree returns the regular files under dir, or nil when dir is "".
func readTree(dir string) (map[string]string, error) {
	if dir == "" {
		return nil, nil
	}
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	return files, err
}

// server is a running Serve.
type server struct {
	path   string
	cancel context.CancelFunc
	done   chan error
}

// startServer runs Serve with h on a socket in a fresh directory until the
// test ends.
func startServer(t *testing.T, h Handler) *server {
	t.Helper()
	ln, path, err := Listen(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{path: path, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- Serve(ctx, ln, h) }()
	t.Cleanup(func() { _ = s.stop(t) })
	return s
}

// stop cancels Serve and waits for it to return; it may be called twice.
func (s *server) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err, ok := <-s.done:
		if ok {
			close(s.done)
		}
		return err
	case <-time.After(waitLimit):
		t.Fatal("Serve did not return after its context was cancelled")
		return nil
	}
}

func dial(t *testing.T, path string) *Client {
	t.Helper()
	c, err := Dial(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rawConn is a connection for writing request lines by hand.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dialRaw(t *testing.T, path string) *rawConn {
	t.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(waitLimit))
	return &rawConn{t: t, conn: conn, r: bufio.NewReader(conn)}
}

// roundTrip writes line plus a newline and returns the reply line without
// its newline.
func (c *rawConn) roundTrip(line string) string {
	c.t.Helper()
	if _, err := c.conn.Write([]byte(line + "\n")); err != nil {
		c.t.Fatal(err)
	}
	reply, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("reading the reply to %.80q: %v", line, err)
	}
	return reply[:len(reply)-1]
}
