package trainproto

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReportRoundTrip(t *testing.T) {
	h := &recordingHandler{}
	c := dial(t, startServer(t, h).path)
	ckpt := t.TempDir()
	if err := os.WriteFile(filepath.Join(ckpt, "model.json"), []byte(`{"w":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	metrics := map[string]any{
		"loss": 0.25, "step": 3, "big": 1e300, "neg": -2, "name": "a", "done": false,
		"nested": map[string]any{"acc": 0.5}, "list": []any{1, "x"}, "none": nil, "a/b": 1,
	}
	for _, dir := range []string{"", ckpt} {
		stop, err := c.Report(t.Context(), metrics, dir)
		if err != nil || stop {
			t.Fatalf("Report(dir %q) = %v, %v; want false, nil", dir, stop, err)
		}
	}
	// The trainable may delete the checkpoint once Report returns.
	if err := os.RemoveAll(ckpt); err != nil {
		t.Fatal(err)
	}
	wantMetrics := map[string]any{
		"loss": 0.25, "step": 3.0, "big": 1e300, "neg": -2.0, "name": "a", "done": false,
		"nested": map[string]any{"acc": 0.5}, "list": []any{1.0, "x"}, "none": nil, "a/b": 1.0,
	}
	want := []gotReport{
		{Metrics: wantMetrics},
		{Metrics: wantMetrics, Dir: ckpt, Files: map[string]string{"model.json": `{"w":1}`}},
	}
	if diff := cmp.Diff(want, h.got()); diff != "" {
		t.Errorf("handler got (-want +got):\n%s", diff)
	}
}

func TestReportNilMetricsSendsEmptyObject(t *testing.T) {
	h := &recordingHandler{}
	c := dial(t, startServer(t, h).path)
	if _, err := c.Report(t.Context(), nil, ""); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]gotReport{{Metrics: map[string]any{}}}, h.got()); diff != "" {
		t.Errorf("handler got (-want +got):\n%s", diff)
	}
}

func TestReportRelativeCheckpointDir(t *testing.T) {
	h := &recordingHandler{}
	c := dial(t, startServer(t, h).path)
	work := t.TempDir()
	t.Chdir(work)
	if err := os.Mkdir("ckpt", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Report(t.Context(), map[string]any{}, "ckpt"); err != nil {
		t.Fatal(err)
	}
	if got, want := h.got()[0].Dir, filepath.Join(work, "ckpt"); got != want {
		t.Errorf("handler got dir %q, want %q", got, want)
	}
}

func TestReportStop(t *testing.T) {
	h := &recordingHandler{stopAt: 2}
	c := dial(t, startServer(t, h).path)
	for i, want := range []bool{false, true} {
		stop, err := c.Report(t.Context(), map[string]any{"i": i}, "")
		if err != nil || stop != want {
			t.Fatalf("report %d = %v, %v; want %v, nil", i, stop, err, want)
		}
	}
}

func TestGetCheckpoint(t *testing.T) {
	for _, dir := range []string{"", "/restored/checkpoint_000003"} {
		c := dial(t, startServer(t, &recordingHandler{checkpoint: dir}).path)
		got, err := c.GetCheckpoint(t.Context())
		if err != nil || got != dir {
			t.Errorf("GetCheckpoint = %q, %v; want %q, nil", got, err, dir)
		}
	}
}

func TestClientRejected(t *testing.T) {
	h := &recordingHandler{}
	c := dial(t, startServer(t, h).path)
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := c.Report(t.Context(), map[string]any{"x": 1}, missing)
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("Report with a missing checkpoint dir: err = %v; want ErrRejected naming the problem", err)
	}
	// An ok:false reply leaves the connection usable.
	if _, err := c.Report(t.Context(), map[string]any{"x": 2}, ""); err != nil {
		t.Fatalf("Report after a rejected one: %v", err)
	}
	if got := len(h.got()); got != 1 {
		t.Errorf("handler got %d reports, want 1 (the rejected one must not reach it)", got)
	}
}

func TestHandlerErrorIsSentBack(t *testing.T) {
	c := dial(t, startServer(t, &recordingHandler{err: errors.New("staging failed: disk full")}).path)
	_, err := c.Report(t.Context(), map[string]any{}, "")
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "staging failed: disk full") {
		t.Errorf("Report err = %v; want ErrRejected with the handler's message", err)
	}
	_, err = c.GetCheckpoint(t.Context())
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("GetCheckpoint err = %v; want ErrRejected with the handler's message", err)
	}
}

// TestWireForms sends request lines by hand on one connection: every bad
// request gets an ok:false reply naming the problem, and the connection keeps
// working afterwards.
func TestWireForms(t *testing.T) {
	h := &recordingHandler{checkpoint: "/ckpt"}
	c := dialRaw(t, startServer(t, h).path)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, line, want string
	}{
		{"report", `{"op":"report","metrics":{"loss":1}}`, `{"ok":true,"stop":false}`},
		{"report with checkpoint", `{"op":"report","metrics":{},"checkpoint_dir":"` + dir + `"}`, `{"ok":true,"stop":false}`},
		{"report with null checkpoint", `{"op":"report","metrics":{},"checkpoint_dir":null}`, `{"ok":true,"stop":false}`},
		{"crlf and spaces", ` {"op": "get_checkpoint"} ` + "\r", `{"ok":true,"checkpoint_dir":"/ckpt"}`},
		{"unknown fields ignored", `{"op":"get_checkpoint","v":2}`, `{"ok":true,"checkpoint_dir":"/ckpt"}`},
		{"garbage", `hello`, `{"ok":false,"error":"invalid JSON: invalid character 'h' looking for beginning of value"}`},
		{"empty line", ``, `{"ok":false,"error":"empty request line: want a JSON object"}`},
		{"trailing data", `{"op":"get_checkpoint"} {}`, `{"ok":false,"error":"invalid JSON: invalid character '{' after top-level value"}`},
		{"NaN", `{"op":"report","metrics":{"x":NaN}}`, `{"ok":false,"error":"invalid JSON: invalid character 'N' looking for beginning of value"}`},
		{"not an object", `[1]`, `{"ok":false,"error":"request must be a JSON object, got array"}`},
		{"no op", `{}`, `{"ok":false,"error":"field \"op\": required (\"report\", \"get_checkpoint\" or \"get_object\")"}`},
		{"op not a string", `{"op":5}`, `{"ok":false,"error":"field \"op\": must be a string, got number"}`},
		{"unknown op", `{"op":"fly"}`, `{"ok":false,"error":"unknown op \"fly\" (want \"report\", \"get_checkpoint\" or \"get_object\")"}`},
		{"get_object without name", `{"op":"get_object"}`, `{"ok":false,"error":"field \"name\": required, the object's name"}`},
		{"get_object name not a string", `{"op":"get_object","name":5}`, `{"ok":false,"error":"field \"name\": must be a string, got number"}`},
		{"get_object from a handler without objects", `{"op":"get_object","name":"data"}`, `{"ok":false,"error":"get_object: this runner serves no objects"}`},
		{"no metrics", `{"op":"report"}`, `{"ok":false,"error":"field \"metrics\": required, a JSON object"}`},
		{"null metrics", `{"op":"report","metrics":null}`, `{"ok":false,"error":"field \"metrics\": required, a JSON object"}`},
		{"metrics not an object", `{"op":"report","metrics":[1]}`, `{"ok":false,"error":"field \"metrics\": must be a JSON object, got array"}`},
		{"checkpoint_dir not a string", `{"op":"report","metrics":{},"checkpoint_dir":5}`, `{"ok":false,"error":"field \"checkpoint_dir\": must be a string or null, got number"}`},
		{"relative checkpoint_dir", `{"op":"report","metrics":{},"checkpoint_dir":"ckpt"}`, `{"ok":false,"error":"field \"checkpoint_dir\": must be an absolute path, got \"ckpt\""}`},
		{"empty checkpoint_dir", `{"op":"report","metrics":{},"checkpoint_dir":""}`, `{"ok":false,"error":"field \"checkpoint_dir\": must be an absolute path, got \"\""}`},
		{"missing checkpoint_dir", `{"op":"report","metrics":{},"checkpoint_dir":"` + dir + `/nope"}`, `{"ok":false,"error":"field \"checkpoint_dir\": stat ` + dir + `/nope: no such file or directory"}`},
		{"checkpoint_dir is a file", `{"op":"report","metrics":{},"checkpoint_dir":"` + file + `"}`, `{"ok":false,"error":"field \"checkpoint_dir\": ` + file + ` is not a directory"}`},
		{"good after bad", `{"op":"report","metrics":{"loss":2}}`, `{"ok":true,"stop":false}`},
	}
	for _, tt := range tests {
		if got := c.roundTrip(tt.line); got != tt.want {
			t.Errorf("%s: %s\n got: %s\nwant: %s", tt.name, tt.line, got, tt.want)
		}
	}
	if got := len(h.got()); got != 4 {
		t.Errorf("handler got %d reports, want 4 (only the valid ones)", got)
	}
}

func TestLineLimit(t *testing.T) {
	h := &recordingHandler{}
	path := startServer(t, h).path
	prefix, suffix := `{"op":"report","metrics":{"pad":"`, `"}}`

	// A line of exactly MaxLineSize bytes is fine.
	c := dialRaw(t, path)
	pad := strings.Repeat("x", MaxLineSize-len(prefix)-len(suffix))
	if got := c.roundTrip(prefix + pad + suffix); got != `{"ok":true,"stop":false}` {
		t.Fatalf("line of MaxLineSize bytes: reply %s", got)
	}

	// One byte more gets an error reply, then the connection is closed.
	c = dialRaw(t, path)
	go func() { _, _ = c.conn.Write([]byte(prefix + pad + "x" + suffix + "\n")) }()
	reply, err := c.r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the reply to an over-long line: %v", err)
	}
	if want := `{"ok":false,"error":"request line exceeds 1048576 bytes; closing the connection"}` + "\n"; reply != want {
		t.Errorf("reply to an over-long line: %s want %s", reply, want)
	}
	if _, err := c.r.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Errorf("after an over-long line: read err = %v, want EOF", err)
	}
	if got := len(h.got()); got != 1 {
		t.Errorf("handler got %d reports, want 1", got)
	}

	// The client refuses to send an over-long request.
	_, err = dial(t, path).Report(t.Context(), map[string]any{"pad": pad + "x"}, "")
	if err == nil || !strings.Contains(err.Error(), "over the 1048576-byte limit") {
		t.Errorf("Client.Report of an over-long request: err = %v", err)
	}
}

func TestConcurrentClients(t *testing.T) {
	const clients, reports = 8, 25
	h := &recordingHandler{}
	path := startServer(t, h).path
	var wg sync.WaitGroup
	for id := range clients {
		c := dial(t, path)
		wg.Go(func() {
			for i := range reports {
				if _, err := c.Report(t.Context(), map[string]any{"client": id, "i": i}, ""); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	next := make([]float64, clients) // the i each client's next report must carry
	for _, r := range h.got() {
		id := int(r.Metrics["client"].(float64))
		if i := r.Metrics["i"].(float64); i != next[id] {
			t.Fatalf("client %d: report i=%v arrived when i=%v was due", id, i, next[id])
		}
		next[id]++
	}
	for id, n := range next {
		if n != reports {
			t.Errorf("client %d: handler got %v reports, want %d", id, n, reports)
		}
	}
}

// TestServeShutdown cancels Serve while one connection waits in the handler
// and another is idle: Serve must return nil after closing both, cancelling
// the handler's ctx and removing the socket.
func TestServeShutdown(t *testing.T) {
	h := &recordingHandler{blocked: make(chan struct{}, 1)}
	s := startServer(t, h)
	busy, idle := dial(t, s.path), dial(t, s.path)
	if _, err := idle.GetCheckpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	reported := make(chan error, 1)
	go func() {
		_, err := busy.Report(t.Context(), map[string]any{}, "")
		reported <- err
	}()
	select {
	case <-h.blocked:
	case <-time.After(waitLimit):
		t.Fatal("the report never reached the handler")
	}

	if err := s.stop(t); err != nil {
		t.Fatalf("Serve returned %v after cancel, want nil", err)
	}
	// Serve has returned, so its handler call has too.
	if diff := cmp.Diff([]error{context.Canceled}, h.ctxErrs, cmp.Comparer(errors.Is)); diff != "" {
		t.Errorf("handler ctx errors (-want +got):\n%s", diff)
	}
	select {
	case err := <-reported:
		if err == nil {
			t.Error("Report in flight at shutdown returned no error")
		}
	case <-time.After(waitLimit):
		t.Fatal("Report in flight at shutdown did not return")
	}
	if _, err := idle.GetCheckpoint(t.Context()); err == nil {
		t.Error("idle connection still answers after shutdown")
	}
	if _, err := os.Lstat(s.path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file after shutdown: %v, want it removed", err)
	}
}

func TestServeReturnsAcceptError(t *testing.T) {
	ln, _, err := Listen(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Serve(t.Context(), ln, &recordingHandler{}) }()
	_ = ln.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve = %v, want an error wrapping net.ErrClosed", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Serve did not return after its listener was closed")
	}
}

func TestClientCancel(t *testing.T) {
	h := &recordingHandler{blocked: make(chan struct{}, 1)}
	c := dial(t, startServer(t, h).path)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-h.blocked
		cancel()
	}()
	_, err := c.Report(ctx, map[string]any{}, "")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Report with a cancelled ctx: err = %v, want context.Canceled", err)
	}
	_, err = c.GetCheckpoint(t.Context())
	if err == nil || !strings.Contains(err.Error(), "unusable") {
		t.Errorf("call after a cancelled one: err = %v, want the connection reported unusable", err)
	}
}

func TestListen(t *testing.T) {
	t.Run("in dir", func(t *testing.T) {
		dir := t.TempDir()
		ln, path, err := Listen(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if want := filepath.Join(dir, SocketName); path != want {
			t.Errorf("path = %s, want %s", path, want)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
			t.Errorf("socket file: %v, %v; want a socket with mode 0600", fi.Mode(), err)
		}
	})
	t.Run("long dir falls back to a temp dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		ln, path, err := Listen(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(path, os.TempDir()) || len(path) > maxSocketPath {
			t.Errorf("path = %s, want a short path under %s", path, os.TempDir())
		}
		conn, err := net.Dial("unix", path)
		if err != nil {
			t.Fatalf("dial %s: %v", path, err)
		}
		_ = conn.Close()
		_ = ln.Close()
		if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("temp dir after Close: %v, want it removed", err)
		}
	})
	t.Run("stale socket is replaced", func(t *testing.T) {
		dir := t.TempDir()
		old, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, SocketName), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		old.SetUnlinkOnClose(false)
		_ = old.Close()
		ln, _, err := Listen(dir)
		if err != nil {
			t.Fatalf("Listen over a stale socket: %v", err)
		}
		_ = ln.Close()
	})
	t.Run("live socket is kept", func(t *testing.T) {
		dir := t.TempDir()
		ln, _, err := Listen(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if ln2, _, err := Listen(dir); err == nil {
			_ = ln2.Close()
			t.Fatal("Listen over a live socket succeeded")
		}
	})
}

func TestEnviron(t *testing.T) {
	e := Env{
		Config: []byte(`{"lr":0.1}`), TrialID: "t1", TrialName: "train_t1", Experiment: "exp",
		TrialDir: "/r/exp/t1", Attempt: 2, Socket: "/r/exp/t1/.tunejet.sock",
	}
	want := []string{
		`TUNEJET_CONFIG={"lr":0.1}`, "TUNEJET_TRIAL_ID=t1", "TUNEJET_TRIAL_NAME=train_t1",
		"TUNEJET_TRIAL_DIR=/r/exp/t1", "TUNEJET_ATTEMPT=2", "TUNEJET_EXPERIMENT=exp",
		"TUNEJET_SOCKET=/r/exp/t1/.tunejet.sock",
	}
	if diff := cmp.Diff(want, e.Environ()); diff != "" {
		t.Errorf("Environ() (-want +got):\n%s", diff)
	}
	e.CheckpointDir = "/tmp/ckpt"
	if diff := cmp.Diff(append(want, "TUNEJET_CHECKPOINT_DIR=/tmp/ckpt"), e.Environ()); diff != "" {
		t.Errorf("Environ() with a checkpoint (-want +got):\n%s", diff)
	}
}
