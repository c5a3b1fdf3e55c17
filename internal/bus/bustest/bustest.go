// Package bustest starts a real nats-server with JetStream for tests: on a
// free loopback port, with its store in the test's temp dir, shut down and
// removed when the test ends.
package bustest

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/bus"
)

// Server is a test nats-server.
type Server struct {
	*bus.Embedded
	t testing.TB
}

// Start runs a nats-server with JetStream on 127.0.0.1 and a free port.
func Start(t testing.TB) *Server {
	t.Helper()
	e, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: t.TempDir(), Listen: true, Port: -1})
	if err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	t.Cleanup(e.Shutdown)
	return &Server{Embedded: e, t: t}
}

// Conn opens a client connection that is closed when the test ends.
func (s *Server) Conn() *nats.Conn {
	s.t.Helper()
	nc, err := nats.Connect(s.URL())
	if err != nil {
		s.t.Fatalf("connect: %v", err)
	}
	s.t.Cleanup(nc.Close)
	return nc
}

// Bus returns a provisioned bus on a new connection.
func (s *Server) Bus(source string) *bus.Bus {
	s.t.Helper()
	b, err := bus.New(s.Conn(), source, zerolog.New(zerolog.NewTestWriter(s.t)).Level(zerolog.InfoLevel))
	if err != nil {
		s.t.Fatal(err)
	}
	if err := b.Provision(s.t.Context()); err != nil {
		s.t.Fatal(err)
	}
	return b
}

// Eventually polls cond every 10 ms until it is true or the deadline passes.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
