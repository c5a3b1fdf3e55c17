package trainproto

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
)

// Handler answers a trainable's requests. Serve calls it from one goroutine
// per connection: calls for one connection are sequential, calls for
// different connections may overlap. An error is sent back to the trainable
// as {"ok": false, "error": err.Error()}.
type Handler interface {
	// Report accepts one result. checkpointDir is "" or an existing
	// directory, absolute. Report must have staged the directory's files
	// before it returns: the trainable may delete the directory as soon as it
	// has the reply. stop asks the trainable to exit now.
	Report(ctx context.Context, metrics map[string]any, checkpointDir string) (stop bool, err error)
	// GetCheckpoint returns the local directory holding the checkpoint the
	// attempt resumes from, or "" when it starts fresh.
	GetCheckpoint(ctx context.Context) (dir string, err error)
}

// ObjectGetter is implemented by a Handler that serves get_object: it
// returns a local file holding the bytes of the object stored under name
// (tune.Put, or tunejet.put in Python), readable until the trainable exits.
type ObjectGetter interface {
	GetObject(ctx context.Context, name string) (path string, err error)
}

// Pauser is implemented by a Handler that tells, when Report asks a
// trainable to stop, whether the trial is paused rather than stopped: it
// resumes later, on any runner, from its latest checkpoint. The reply says
// so ("pause": true); the trainable exits either way.
type Pauser interface {
	Paused() bool
}

// Serve accepts connections on ln and answers their requests with h until
// ctx is done, then closes ln and every connection, waits for its goroutines
// (including Handler calls, whose ctx is cancelled) and returns nil. Serve
// owns ln: it also closes it when Accept fails, and returns that error.
func Serve(ctx context.Context, ln net.Listener, h Handler) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	closeOnDone(ctx, &wg, ln)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("trainproto: accept: %w", err)
		}
		wg.Go(func() { serveConn(ctx, &wg, conn, h) })
	}
}

// closeOnDone closes c once ctx is done, in a goroutine counted by wg.
func closeOnDone(ctx context.Context, wg *sync.WaitGroup, c interface{ Close() error }) {
	wg.Go(func() {
		<-ctx.Done()
		_ = c.Close()
	})
}

// serveConn answers the requests of one connection, one line at a time,
// until the peer closes it, a write fails, a line is too long or ctx is done.
func serveConn(ctx context.Context, wg *sync.WaitGroup, conn net.Conn, h Handler) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	closeOnDone(ctx, wg, conn)
	r := bufio.NewReader(conn)
	for {
		line, err := readLine(r)
		if errors.Is(err, errLineTooLong) {
			_ = writeReply(conn, errorReply{Error: "request " + err.Error() + "; closing the connection"})
			return
		}
		if err != nil {
			return
		}
		if err := writeReply(conn, handle(ctx, h, line)); err != nil {
			return
		}
	}
}

// handle decodes one request line and returns the reply to write.
func handle(ctx context.Context, h Handler, line []byte) any {
	req, err := decodeRequest(line)
	if err != nil {
		return errorReply{Error: err.Error()}
	}
	if req.Op == OpReport {
		var dir string
		if req.CheckpointDir != nil {
			dir = *req.CheckpointDir
		}
		stop, err := h.Report(ctx, req.Metrics, dir)
		if err != nil {
			return errorReply{Error: err.Error()}
		}
		p, ok := h.(Pauser)
		return reportReply{OK: true, Stop: stop, Pause: stop && ok && p.Paused()}
	}
	if req.Op == OpGetObject {
		g, ok := h.(ObjectGetter)
		if !ok {
			return errorReply{Error: "get_object: this runner serves no objects"}
		}
		path, err := g.GetObject(ctx, req.Name)
		if err != nil {
			return errorReply{Error: err.Error()}
		}
		return objectReply{OK: true, Path: path}
	}
	dir, err := h.GetCheckpoint(ctx)
	if err != nil {
		return errorReply{Error: err.Error()}
	}
	reply := checkpointReply{OK: true}
	if dir != "" {
		reply.CheckpointDir = &dir
	}
	return reply
}

func writeReply(conn net.Conn, reply any) error {
	b, err := json.Marshal(reply)
	if err != nil {
		return err
	}
	_, err = conn.Write(append(b, '\n'))
	return err
}

// SocketName is the file name Listen gives the socket.
const SocketName = ".tunejet.sock"

// maxSocketPath is the longest socket path that works everywhere: sun_path
// holds 108 bytes on Linux and 104 on macOS, including the final NUL.
const maxSocketPath = 103

// Listen creates a Unix stream socket named SocketName in dir and returns
// the listener and the socket's absolute path, for EnvSocket. When that path
// would be too long for a Unix socket, the socket goes in a fresh directory
// under os.TempDir() instead, removed again by the listener's Close. A stale
// socket file left at the path by a crashed runner is replaced; a socket
// that still accepts connections is an error. The socket is accessible to
// its owner only.
func Listen(dir string) (net.Listener, string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, "", fmt.Errorf("trainproto: listen: %w", err)
	}
	path, tmpDir := filepath.Join(dir, SocketName), ""
	if len(path) > maxSocketPath {
		if tmpDir, err = os.MkdirTemp("", "tunejet-"); err != nil {
			return nil, "", fmt.Errorf("trainproto: listen: %w", err)
		}
		path = filepath.Join(tmpDir, SocketName)
	}
	ln, err := listenUnix(path)
	if err != nil {
		if tmpDir != "" {
			_ = os.RemoveAll(tmpDir)
		}
		return nil, "", fmt.Errorf("trainproto: listen: %w", err)
	}
	return &unixListener{UnixListener: ln, tmpDir: tmpDir}, path, nil
}

func listenUnix(path string) (*net.UnixListener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is longer than %d bytes", path, maxSocketPath)
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == fs.ModeSocket {
		if conn, err := net.Dial("unix", path); err == nil {
			_ = conn.Close()
			return nil, fmt.Errorf("socket %s is in use", path)
		}
		_ = os.Remove(path) // stale: nobody listens on it
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// unixListener removes its temporary directory, if any, on Close.
type unixListener struct {
	*net.UnixListener
	tmpDir string
}

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	if l.tmpDir != "" {
		_ = os.RemoveAll(l.tmpDir)
	}
	return err
}
