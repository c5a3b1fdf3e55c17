package bus_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// freePort is a loopback port nothing listens on (until a test starts
// something there).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type connectResult struct {
	err  error
	done chan struct{}
}

// connectInBackground runs Connect with o and closes done when it returns.
func connectInBackground(t *testing.T, ctx context.Context, o bus.ConnectOptions) *connectResult {
	t.Helper()
	r := &connectResult{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		nc, err := bus.Connect(ctx, o)
		if err == nil {
			if !nc.IsConnected() {
				err = errors.New("Connect returned a connection that is not connected")
			}
			nc.Close()
		}
		r.err = err
	}()
	t.Cleanup(func() { <-r.done })
	return r
}

func (r *connectResult) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(time.Minute):
		t.Fatal("Connect did not return within a minute")
		return nil
	}
}

// TestConnectWaitsForTheServer: with ConnectForever, Connect keeps trying
// while nothing listens, logs that it does, and returns a live connection
// once a server starts on the address.
func TestConnectWaitsForTheServer(t *testing.T) {
	port := freePort(t)
	var logs syncBuffer
	r := connectInBackground(t, t.Context(), bus.ConnectOptions{
		URL: "nats://127.0.0.1:" + strconv.Itoa(port), ConnectTimeout: bus.ConnectForever, Log: zerolog.New(&logs),
	})
	bustest.Eventually(t, wait, "a logged failed attempt", func() bool {
		return strings.Contains(logs.String(), "NATS is not answering")
	})
	select {
	case <-r.done:
		t.Fatalf("Connect returned while nothing listens: %v", r.err)
	default:
	}
	for _, field := range []string{`"url":"nats://127.0.0.1:` + strconv.Itoa(port) + `"`, `"attempts":1`, `"elapsed":`, `"error":`} {
		if !strings.Contains(logs.String(), field) {
			t.Errorf("the failure log lacks %s:\n%s", field, logs.String())
		}
	}
	srv, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: t.TempDir(), Listen: true, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	if err := r.wait(t); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if !strings.Contains(logs.String(), "connected to NATS") {
		t.Errorf("no log of the connection made after failures:\n%s", logs.String())
	}
}

// TestConnectStopsWithContext: cancelling ctx ends the wait with an error
// that wraps context.Canceled.
func TestConnectStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var logs syncBuffer
	r := connectInBackground(t, ctx, bus.ConnectOptions{
		URL: "nats://127.0.0.1:" + strconv.Itoa(freePort(t)), ConnectTimeout: bus.ConnectForever, Log: zerolog.New(&logs),
	})
	bustest.Eventually(t, wait, "a logged failed attempt", func() bool {
		return strings.Contains(logs.String(), "NATS is not answering")
	})
	cancel()
	err := r.wait(t)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Connect after cancel: %v; want an error wrapping context.Canceled", err)
	}
}

// TestConnectTimeoutEnds: a positive ConnectTimeout ends the attempts with
// an error saying so.
func TestConnectTimeoutEnds(t *testing.T) {
	url := "nats://127.0.0.1:" + strconv.Itoa(freePort(t))
	err := connectInBackground(t, t.Context(), bus.ConnectOptions{URL: url, ConnectTimeout: time.Second}).wait(t)
	if err == nil || !strings.Contains(err.Error(), "no answer within the connect timeout of 1s") || !strings.Contains(err.Error(), url) {
		t.Fatalf("Connect: %v; want no answer within the connect timeout of 1s from %s", err, url)
	}
}

// TestConnectDoesNotRetryWhatCannotMend: a bad URL or refused credentials
// fail at once, even with ConnectForever.
func TestConnectDoesNotRetryWhatCannotMend(t *testing.T) {
	userURL := startAuthServer(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "alice", Password: "s3cret"}}
	})
	tests := []struct {
		name string
		o    bus.ConnectOptions
		want string
	}{
		{"not a URL", bus.ConnectOptions{URL: "nats://bad host:4222"}, "connect to NATS at nats://bad host:4222"},
		{"wrong password", bus.ConnectOptions{URL: userURL, User: "alice", Password: "nope"}, "uthorization"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.ConnectTimeout = bus.ConnectForever
			err := connectInBackground(t, t.Context(), tc.o).wait(t)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Connect: %v; want an error containing %q", err, tc.want)
			}
		})
	}
}
