package trainproto

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"time"
)

// Client is the trainable's side of the protocol: one connection to the
// runner's socket. Its methods may be called from several goroutines; calls
// are serialized. A call whose ctx ends while it waits leaves the connection
// out of step, so the Client fails every later call; Dial again.
type Client struct {
	conn net.Conn
	r    *bufio.Reader

	mu     sync.Mutex
	broken error // set when the connection can no longer be used
}

// Dial connects to the runner's socket at path (the value of EnvSocket).
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("trainproto: dial: %w", err)
	}
	return &Client{conn: conn, r: bufio.NewReader(conn)}, nil
}

// Report sends one result, with the directory checkpointDir as a checkpoint
// unless it is "" (a relative path is made absolute first). It returns once
// the runner has accepted the report and staged the checkpoint, so the
// caller may delete checkpointDir then. stop reports that the trial should
// end: the trainable should exit 0 promptly. A nil metrics sends {}.
func (c *Client) Report(ctx context.Context, metrics map[string]any, checkpointDir string) (stop bool, err error) {
	req := Request{Op: OpReport, Metrics: metrics}
	if req.Metrics == nil {
		req.Metrics = map[string]any{}
	}
	if checkpointDir != "" {
		abs, err := filepath.Abs(checkpointDir)
		if err != nil {
			return false, fmt.Errorf("trainproto: report: %w", err)
		}
		req.CheckpointDir = &abs
	}
	reply, err := c.roundTrip(ctx, req)
	if err != nil {
		return false, fmt.Errorf("trainproto: report: %w", err)
	}
	return reply.Stop, nil
}

// GetCheckpoint returns the directory holding the checkpoint the attempt
// resumes from, or "" when it starts fresh.
func (c *Client) GetCheckpoint(ctx context.Context) (string, error) {
	reply, err := c.roundTrip(ctx, Request{Op: OpGetCheckpoint})
	if err != nil {
		return "", fmt.Errorf("trainproto: get_checkpoint: %w", err)
	}
	return reply.CheckpointDir, nil
}

// GetObject returns a local file holding the bytes of the object stored
// under name (the name in a config's {"object_ref": name}).
func (c *Client) GetObject(ctx context.Context, name string) (string, error) {
	reply, err := c.roundTrip(ctx, Request{Op: OpGetObject, Name: name})
	if err != nil {
		return "", fmt.Errorf("trainproto: get_object %s: %w", name, err)
	}
	return reply.Path, nil
}

// Close closes the connection; a call in progress fails.
func (c *Client) Close() error {
	return c.conn.Close()
}

// roundTrip sends req and reads its reply; an ok:false reply is an error
// wrapping ErrRejected.
func (c *Client) roundTrip(ctx context.Context, req Request) (Reply, error) {
	line, err := json.Marshal(req)
	if err != nil {
		return Reply{}, err
	}
	if len(line) > MaxLineSize {
		return Reply{}, fmt.Errorf("request is %d bytes, over the %d-byte limit", len(line), MaxLineSize)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return Reply{}, fmt.Errorf("connection unusable after an earlier error: %w", c.broken)
	}
	reply, err := c.exchange(ctx, append(line, '\n'))
	if err != nil {
		c.broken = err
		_ = c.conn.Close()
		return Reply{}, err
	}
	if !reply.OK {
		return Reply{}, fmt.Errorf("%w: %s", ErrRejected, reply.Error)
	}
	return reply, nil
}

// exchange writes one line and reads one reply, giving up when ctx ends.
func (c *Client) exchange(ctx context.Context, line []byte) (Reply, error) {
	deadline, _ := ctx.Deadline() // zero: none
	if err := c.conn.SetDeadline(deadline); err != nil {
		return Reply{}, err
	}
	interrupted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = c.conn.SetDeadline(time.Unix(1, 0)) // wake up Read and Write now
		close(interrupted)
	})
	defer func() {
		if !stop() {
			<-interrupted // so it cannot touch the deadline of a later call
		}
	}()
	if _, err := c.conn.Write(line); err != nil {
		return Reply{}, ctxOr(ctx, err)
	}
	b, err := readLine(c.r)
	if err != nil {
		return Reply{}, ctxOr(ctx, fmt.Errorf("read reply: %w", err))
	}
	var reply Reply
	if err := json.Unmarshal(b, &reply); err != nil {
		return Reply{}, fmt.Errorf("bad reply %q: %w", b, err)
	}
	return reply, nil
}

// ctxOr puts ctx's cause in front of err when ctx is done, since err is then
// only its symptom.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", context.Cause(ctx), err)
	}
	return err
}
