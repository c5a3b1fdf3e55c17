package bus_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

const wait = 10 * time.Second

// report is a valid runner event carrying its iteration, so order shows.
func report(b *bus.Bus, exp string, it int) *events.Event {
	return b.Event(exp, events.WriterRunner, &events.TrialReported{
		TrialID: "t1", Attempt: 1, Result: map[string]any{"training_iteration": it},
	})
}

func publish(t *testing.T, b *bus.Bus, ev *events.Event) uint64 {
	t.Helper()
	seq, err := b.Publish(t.Context(), ev)
	if err != nil {
		t.Fatalf("publish %s: %v", ev.Type(), err)
	}
	return seq
}

func streamInfo(t *testing.T, js jetstream.JetStream, name string) *jetstream.StreamInfo {
	t.Helper()
	s, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatalf("stream %s info: %v", name, err)
	}
	return info
}

func TestProvisionIsIdempotent(t *testing.T) {
	srv := bustest.Start(t)
	b := srv.Bus("test") // provisions once
	js := srv.JetStream()
	before := map[string]*jetstream.StreamInfo{}
	names := js.StreamNames(t.Context())
	for name := range names.Name() {
		before[name] = streamInfo(t, js, name)
	}
	if names.Err() != nil {
		t.Fatal(names.Err())
	}
	for _, name := range []string{bus.StreamName, bus.DLQStreamName} {
		if before[name] == nil {
			t.Fatalf("Provision did not create stream %s", name)
		}
	}
	if got := before[bus.StreamName].Config.Subjects; !cmp.Equal(got, []string{
		"tunejet.*.client.>", "tunejet.*.controller.>", "tunejet.*.runner.>", "tunejet.*.syncer.>", "tunejet.*.restorer.>",
	}) {
		t.Fatalf("log subjects = %v", got)
	}
	publish(t, b, report(b, "e1", 1))
	for i := 0; i < 2; i++ {
		if err := b.Provision(t.Context()); err != nil {
			t.Fatalf("provision again: %v", err)
		}
	}
	for name, was := range before {
		now := streamInfo(t, js, name)
		if diff := cmp.Diff(was.Config, now.Config); diff != "" {
			t.Errorf("stream %s config changed by a second Provision (-before +after):\n%s", name, diff)
		}
		if !now.Created.Equal(was.Created) {
			t.Errorf("stream %s was recreated: created %v, then %v", name, was.Created, now.Created)
		}
	}
	if n := streamInfo(t, js, bus.StreamName).State.Msgs; n != 1 {
		t.Fatalf("the log holds %d messages after re-provisioning, want the 1 published", n)
	}
}

func TestPublishDeduplicatesByEventID(t *testing.T) {
	srv := bustest.Start(t)
	b, js := srv.Bus("test"), srv.JetStream()
	ev := report(b, "e1", 1)
	first := publish(t, b, ev)
	again := *ev
	again.Seq = 0
	second := publish(t, b, &again)
	if second != first {
		t.Fatalf("re-publishing event %s stored it at seq %d, first at %d", ev.ID, second, first)
	}
	if n := streamInfo(t, js, bus.StreamName).State.Msgs; n != 1 {
		t.Fatalf("the log holds %d messages, want 1", n)
	}
	other := publish(t, b, report(b, "e1", 1)) // same content, new id
	if other == first {
		t.Fatalf("an event with a new id was treated as a duplicate")
	}
}

func TestPublishRejectsAnInvalidEvent(t *testing.T) {
	srv := bustest.Start(t)
	b, js := srv.Bus("test"), srv.JetStream()
	ev := b.Event("e1", events.WriterRunner, &events.TrialReported{TrialID: "t1", Attempt: 1, Result: map[string]any{"loss": 1.0}})
	_, err := b.Publish(t.Context(), ev)
	if !errors.Is(err, events.ErrInvalid) || !strings.Contains(err.Error(), "training_iteration") {
		t.Fatalf("Publish = %v, want ErrInvalid naming training_iteration", err)
	}
	if n := streamInfo(t, js, bus.StreamName).State.Msgs; n != 0 {
		t.Fatalf("the log holds %d messages, want none", n)
	}
}

// recorder collects what a Watch delivers.
type recorder struct {
	mu        sync.Mutex
	its       []int    // training_iteration of each event, in delivery order
	invalid   []string // subjects of invalid messages
	caught    int      // CaughtUp calls
	caughtAt  int      // events delivered when CaughtUp was called
	watchDone chan error
}

func (r *recorder) handler() bus.Handler {
	return bus.Handler{
		Event: func(ev *events.Event) {
			r.mu.Lock()
			defer r.mu.Unlock()
			p := ev.Data.(*events.TrialReported)
			r.its = append(r.its, int(p.Result["training_iteration"].(float64)))
		},
		Invalid: func(m bus.Raw, err error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.invalid = append(r.invalid, m.Subject)
		},
		CaughtUp: func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.caught++
			r.caughtAt = len(r.its) + len(r.invalid)
		},
	}
}

func (r *recorder) snapshot() (its []int, invalid []string, caught, caughtAt int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.its...), append([]string(nil), r.invalid...), r.caught, r.caughtAt
}

// watch runs b.Watch until the test ends.
func watch(t *testing.T, b *bus.Bus, filter string, from uint64) *recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &recorder{watchDone: make(chan error, 1)}
	go func() { r.watchDone <- b.Watch(ctx, filter, from, r.handler()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.watchDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Watch: %v", err)
		}
	})
	return r
}

func TestWatchReplaysThenFollows(t *testing.T) {
	b := bustest.Start(t).Bus("test")
	for it := 1; it <= 3; it++ {
		publish(t, b, report(b, "e1", it))
	}
	publish(t, b, report(b, "other", 9)) // not matched by the filter
	r := watch(t, b, events.ExperimentSubjects("e1"), 0)
	bustest.Eventually(t, wait, "the replay to catch up", func() bool {
		_, _, caught, _ := r.snapshot()
		return caught > 0
	})
	its, _, caught, at := r.snapshot()
	if caught != 1 || at != 3 || !cmp.Equal(its, []int{1, 2, 3}) {
		t.Fatalf("after catch-up: events %v, CaughtUp called %d times after %d events; want [1 2 3], once, after 3", its, caught, at)
	}
	for it := 4; it <= 5; it++ {
		publish(t, b, report(b, "e1", it))
	}
	bustest.Eventually(t, wait, "new events to be followed", func() bool {
		its, _, _, _ := r.snapshot()
		return len(its) >= 5
	})
	its, _, caught, _ = r.snapshot()
	if caught != 1 || !cmp.Equal(its, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("after following: events %v, CaughtUp called %d times; want [1 2 3 4 5], once", its, caught)
	}
}

func TestWatchCaughtUpWhenNothingMatches(t *testing.T) {
	b := bustest.Start(t).Bus("test")
	publish(t, b, report(b, "other", 1))
	r := watch(t, b, events.ExperimentSubjects("e1"), 0)
	bustest.Eventually(t, wait, "CaughtUp on an empty replay", func() bool {
		_, _, caught, _ := r.snapshot()
		return caught > 0
	})
	publish(t, b, report(b, "e1", 1))
	bustest.Eventually(t, wait, "the new event", func() bool {
		its, _, _, _ := r.snapshot()
		return len(its) == 1
	})
	its, _, caught, at := r.snapshot()
	if caught != 1 || at != 0 || !cmp.Equal(its, []int{1}) {
		t.Fatalf("events %v, CaughtUp called %d times after %d events; want [1], once, after 0", its, caught, at)
	}
}

func TestWatchFromASequence(t *testing.T) {
	b := bustest.Start(t).Bus("test")
	var seqs []uint64
	for it := 1; it <= 4; it++ {
		seqs = append(seqs, publish(t, b, report(b, "e1", it)))
	}
	r := watch(t, b, events.ExperimentSubjects("e1"), seqs[2])
	bustest.Eventually(t, wait, "the replay to catch up", func() bool {
		_, _, caught, _ := r.snapshot()
		return caught > 0
	})
	its, _, caught, at := r.snapshot()
	if caught != 1 || at != 2 || !cmp.Equal(its, []int{3, 4}) {
		t.Fatalf("events %v, CaughtUp called %d times after %d events; want [3 4], once, after 2", its, caught, at)
	}
}

func TestWatchPassesMalformedMessagesToInvalid(t *testing.T) {
	srv := bustest.Start(t)
	b := srv.Bus("test")
	publish(t, b, report(b, "e1", 1))
	bad := "tunejet.e1.runner.trial.reported.t1"
	if _, err := srv.JetStream().Publish(t.Context(), bad, []byte("not a cloudevent")); err != nil {
		t.Fatal(err)
	}
	r := watch(t, b, events.ExperimentSubjects("e1"), 0)
	bustest.Eventually(t, wait, "the replay to catch up", func() bool {
		_, _, caught, _ := r.snapshot()
		return caught > 0
	})
	its, invalid, caught, at := r.snapshot()
	if !cmp.Equal(its, []int{1}) || !cmp.Equal(invalid, []string{bad}) || caught != 1 || at != 2 {
		t.Fatalf("events %v, invalid %v, CaughtUp %d times after %d messages; want [1], [%s], once, after 2", its, invalid, caught, at, bad)
	}
}

func TestLastSeq(t *testing.T) {
	b := bustest.Start(t).Bus("test")
	if seq, err := b.LastSeq(t.Context(), events.ExperimentSubjects("e1")); err != nil || seq != 0 {
		t.Fatalf("LastSeq of nothing = %d, %v; want 0", seq, err)
	}
	want := publish(t, b, report(b, "e1", 1))
	publish(t, b, report(b, "other", 1))
	if seq, err := b.LastSeq(t.Context(), events.ExperimentSubjects("e1")); err != nil || seq != want {
		t.Fatalf("LastSeq = %d, %v; want %d", seq, err, want)
	}
}

func TestEnsureWorkConsumer(t *testing.T) {
	srv := bustest.Start(t)
	b, js := srv.Bus("test"), srv.JetStream()
	tests := []struct {
		name           string
		exp            string
		wc             bus.WorkConfig
		wantMaxDeliver int
		wantAckWait    time.Duration
	}{
		{"no retries", "e1", bus.WorkConfig{MaxFailures: 0, AckWait: 3}, 1, 3 * time.Second},
		{"two retries", "e2", bus.WorkConfig{MaxFailures: 2, AckWait: 1.5}, 3, 1500 * time.Millisecond},
		{"unlimited", "e3", bus.WorkConfig{MaxFailures: -1, AckWait: 10}, -1, 10 * time.Second},
		{"updated in place", "e1", bus.WorkConfig{MaxFailures: 4, AckWait: 5}, 5, 5 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := b.EnsureWorkConsumer(t.Context(), tc.exp, tc.wc); err != nil {
				t.Fatal(err)
			}
			c, err := js.Consumer(t.Context(), bus.StreamName, bus.WorkConsumerName(tc.exp))
			if err != nil {
				t.Fatal(err)
			}
			info, err := c.Info(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			cfg := info.Config
			if cfg.MaxDeliver != tc.wantMaxDeliver || cfg.AckWait != tc.wantAckWait {
				t.Errorf("MaxDeliver=%d AckWait=%v; want %d, %v", cfg.MaxDeliver, cfg.AckWait, tc.wantMaxDeliver, tc.wantAckWait)
			}
			if cfg.Durable != bus.WorkConsumerName(tc.exp) || cfg.AckPolicy != jetstream.AckExplicitPolicy {
				t.Errorf("durable %q ack policy %v; want %q, explicit", cfg.Durable, cfg.AckPolicy, bus.WorkConsumerName(tc.exp))
			}
			if want := events.TypeSubjects(tc.exp, events.WriterController, events.TypeTrialScheduled); cfg.FilterSubject != want {
				t.Errorf("filter %q, want %q", cfg.FilterSubject, want)
			}
		})
	}
	if _, err := b.WorkQueue(t.Context(), "missing"); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("WorkQueue of an experiment without a work consumer = %v, want an error naming it", err)
	}
}

func TestDeadLetterMovesTheMessageOnce(t *testing.T) {
	var logs syncBuffer
	srv := bustest.Start(t)
	b, err := bus.New(srv.Conn(), "test", zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Provision(t.Context()); err != nil {
		t.Fatal(err)
	}
	js := srv.JetStream()
	subject := "tunejet.e1.runner.trial.reported.t1"
	// A careful foreign publisher pins the stream; that directive must not
	// follow the message into the dead-letter stream.
	msg := &nats.Msg{Subject: subject, Data: []byte("garbage"), Header: nats.Header{
		"Nats-Expected-Stream": {bus.StreamName}, events.HeaderMsgID: {"foreign-1"}, "X-Origin": {"fuzzer"},
	}}
	ack, err := js.PublishMsg(t.Context(), msg)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := js.Stream(t.Context(), bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stored.GetMsg(t.Context(), ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("invalid event: not a CloudEvent")
	// Twice: two watchers may see the same message, or a controller may
	// crash between copying and deleting and retry after a restart.
	for i := 0; i < 2; i++ {
		b.DeadLetter(t.Context(), raw.Subject, raw.Sequence, raw.Header, raw.Data, cause)
	}

	if _, err := stored.GetMsg(t.Context(), ack.Sequence); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the message is still in the log (GetMsg: %v)", err)
	}
	if n := streamInfo(t, js, bus.DLQStreamName).State.Msgs; n != 1 {
		t.Fatalf("the dead-letter stream holds %d messages, want 1", n)
	}
	dlq, err := js.Stream(t.Context(), bus.DLQStreamName)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := dlq.GetLastMsgForSubject(t.Context(), "tunejet-dlq.>")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		bus.HeaderDLQError: cause.Error(), bus.HeaderDLQSubject: subject,
		bus.HeaderDLQSequence: "1", "X-Origin": "fuzzer",
	}
	for k, v := range want {
		if got := dead.Header.Get(k); got != v {
			t.Errorf("dead letter header %s = %q, want %q", k, got, v)
		}
	}
	if dead.Subject != "tunejet-dlq."+subject || string(dead.Data) != "garbage" {
		t.Errorf("dead letter on %q with %q; want tunejet-dlq.%s with the original data", dead.Subject, dead.Data, subject)
	}
	if strings.Contains(logs.String(), `"level":"error"`) {
		t.Errorf("dead-lettering logged an error:\n%s", logs.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestConnectErrors(t *testing.T) {
	t.Setenv("NATS_URL", "")
	tests := []struct {
		name string
		o    bus.ConnectOptions
		want string
	}{
		{"no URL", bus.ConnectOptions{}, "no URL given"},
		{"nothing listening", bus.ConnectOptions{URL: "nats://127.0.0.1:1"}, "connect to NATS at nats://127.0.0.1:1"},
		{"not a URL", bus.ConnectOptions{URL: "nats://bad host:4222"}, "connect to NATS at nats://bad host:4222"},
		{"cert without key", bus.ConnectOptions{URL: "nats://127.0.0.1:1", TLSCert: "c.pem"}, "needs both --tls-cert and --tls-key"},
		{"missing nkey file", bus.ConnectOptions{URL: "nats://127.0.0.1:1", NKeyFile: "/nonexistent/seed.nk"}, "nkey file /nonexistent/seed.nk"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := bus.Connect(t.Context(), tc.o)
			if err == nil {
				nc.Close()
				t.Fatalf("Connect(%+v) succeeded", tc.o)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Connect: %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestConnectUsesNATSURL(t *testing.T) {
	srv := bustest.Start(t)
	t.Setenv("NATS_URL", srv.URL())
	nc, err := bus.Connect(t.Context(), bus.ConnectOptions{Name: "from-env"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !nc.IsConnected() || nc.Opts.Name != "from-env" {
		t.Fatalf("connected=%v name=%q", nc.IsConnected(), nc.Opts.Name)
	}
}

// startAuthServer runs a nats-server that requires the auth set by opt.
func startAuthServer(t *testing.T, opt func(*server.Options)) string {
	t.Helper()
	o := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true}
	opt(o)
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(wait) {
		t.Fatal("nats-server not ready")
	}
	return s.ClientURL()
}

func TestConnectAuthenticates(t *testing.T) {
	userURL := startAuthServer(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "alice", Password: "s3cret"}}
	})
	tokenURL := startAuthServer(t, func(o *server.Options) { o.Authorization = "t0ken" })
	tests := []struct {
		name string
		o    bus.ConnectOptions
		ok   bool
	}{
		{"user and password", bus.ConnectOptions{URL: userURL, User: "alice", Password: "s3cret"}, true},
		{"wrong password", bus.ConnectOptions{URL: userURL, User: "alice", Password: "nope"}, false},
		{"no credentials", bus.ConnectOptions{URL: userURL}, false},
		{"token", bus.ConnectOptions{URL: tokenURL, Token: "t0ken"}, true},
		{"wrong token", bus.ConnectOptions{URL: tokenURL, Token: "other"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := bus.Connect(t.Context(), tc.o)
			if tc.ok {
				if err != nil {
					t.Fatalf("Connect: %v", err)
				}
				defer nc.Close()
				if err := nc.Flush(); err != nil {
					t.Fatalf("flush: %v", err)
				}
				return
			}
			if err == nil {
				nc.Close()
				t.Fatal("Connect succeeded with bad credentials")
			}
			if !errors.Is(err, nats.ErrAuthorization) || !strings.Contains(err.Error(), tc.o.URL) {
				t.Fatalf("Connect: %v; want an authorization error naming %s", err, tc.o.URL)
			}
		})
	}
}
