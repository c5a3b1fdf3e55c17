// Package bustest starts a real nats-server with JetStream for tests: on a
// free loopback port, with its store in the test's temp dir, shut down and
// removed when the test ends.
package bustest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
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

// JetStream is a JetStream handle on a new connection to the server: see
// the package's JetStream.
func (s *Server) JetStream() jetstream.JetStream {
	s.t.Helper()
	return JetStream(s.t, s.URL())
}

// JetStream is a JetStream handle on a new connection to url (several
// URLs, comma-separated, fail over; it reconnects forever), closed when
// the test ends. A bus keeps its connection to itself: tests that read the
// log behind the services' backs or break things on purpose (delete a
// consumer, store garbage) use this handle.
func JetStream(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("tunejet-test-raw"), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

// WorkConsumer is experiment exp's work consumer (which the controller
// creates) on js: tests that take or inspect trial work behind the bus's
// back use it, as the bus hands out only a WorkQueue.
func WorkConsumer(ctx context.Context, js jetstream.JetStream, exp string) (jetstream.Consumer, error) {
	return js.Consumer(ctx, bus.StreamName, bus.WorkConsumerName(exp))
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

// Eventually polls cond every 10 ms until it is true, failing the test
// when it is not within the given time. Use it instead of sleeping; when
// cond depends on a call that can fail, CheckFor says how.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if poll(within, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) != nil {
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// CheckFor polls check every 10 ms until it returns nil, failing the test
// with the last error check returned when it does not within the given
// time (nats-server's checkFor): the failure says what was still wrong.
func CheckFor(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	if err := poll(within, check); err != nil {
		t.Fatalf("timed out after %v: %v", within, err)
	}
}

var errNotYet = errors.New("not yet")

// poll calls check every 10 ms until it returns nil or within has passed
// since the first call, and returns its last error.
func poll(within time.Duration, check func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Log returns every event of experiment exp in b's log, in log order, as
// far as the log held them when it was read; it fails the test when the
// read does not catch up within a minute.
func Log(t testing.TB, b *bus.Bus, exp string) []*events.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out []*events.Event
	caught := false
	err := b.Watch(ctx, events.ExperimentSubjects(exp), 0, bus.Handler{
		Event:    func(ev *events.Event) { out = append(out, ev) },
		CaughtUp: func() { caught = true; cancel() },
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("read the log of %s: %v", exp, err)
	}
	if !caught {
		t.Fatalf("the read of %s's log did not catch up: %v", exp, err)
	}
	return out
}
