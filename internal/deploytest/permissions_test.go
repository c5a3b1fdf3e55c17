package deploytest

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/ckpt"
)

// wait bounds every wait for the server in these tests.
const wait = 10 * time.Second

// startNATS runs a nats-server in this process from deploy/nats/accounts.conf,
// on a free loopback port with JetStream in a temporary directory.
func startNATS(t *testing.T) *server.Server {
	t.Helper()
	setPasswords(t)
	opts, err := server.ProcessConfigFile(filepath.Join(deployDir(t), "nats", "accounts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	opts.ServerName = "deploytest"
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.JetStream, opts.StoreDir = true, t.TempDir()
	opts.NoSigs, opts.NoLog = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(wait) {
		t.Fatal("nats-server not ready")
	}
	return s
}

// conn is a connection as one user that records the asynchronous errors the
// server sends it (permission violations arrive that way).
type conn struct {
	*nats.Conn
	user string

	mu     sync.Mutex
	errs   []error
	notify chan struct{}
}

func connect(t *testing.T, s *server.Server, user string) *conn {
	t.Helper()
	c := &conn{user: user, notify: make(chan struct{}, 1)}
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(user, testPassword(user)), nats.Name("deploytest-"+user),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.mu.Lock()
			c.errs = append(c.errs, err)
			c.mu.Unlock()
			select {
			case c.notify <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	c.Conn = nc
	return c
}

func (c *conn) bus(t *testing.T) *bus.Bus {
	t.Helper()
	b, err := bus.New(c.Conn, "tunejet/"+c.user+"/deploytest", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (c *conn) js(t *testing.T) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(c.Conn)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// violations returns the permission violations the server reported so far.
func (c *conn) violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, err := range c.errs {
		if errors.Is(err, nats.ErrPermissionViolation) {
			out = append(out, err.Error())
		}
	}
	return out
}

// noViolations fails the test if the user was refused anything: what it did
// is what its service does.
func (c *conn) noViolations(t *testing.T) {
	t.Helper()
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if v := c.violations(); len(v) > 0 {
		t.Fatalf("the %s user was refused what its service needs:\n%s", c.user, strings.Join(v, "\n"))
	}
}

// waitRefused waits until the server has reported that the user may not
// publish to (verb "Publish") or subscribe to (verb "Subscription") subject.
func (c *conn) waitRefused(t *testing.T, verb, subject string) {
	t.Helper()
	want := fmt.Sprintf("Permissions Violation for %s to %q", verb, subject)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		for _, v := range c.violations() {
			if strings.Contains(v, want) {
				return
			}
		}
		select {
		case <-c.notify:
		case <-timer.C:
			t.Fatalf("the %s user was not refused: %s (violations: %v)", c.user, want, c.violations())
		}
	}
}

// refusedPublish publishes and waits for the server to refuse it.
func (c *conn) refusedPublish(t *testing.T, subject string) {
	t.Helper()
	if err := c.Publish(subject, []byte("refused")); err != nil {
		t.Fatal(err)
	}
	c.waitRefused(t, "Publish", subject)
}

// refusedSubscribe subscribes and waits for the server to refuse it.
func (c *conn) refusedSubscribe(t *testing.T, subject string) {
	t.Helper()
	sub, err := c.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c.waitRefused(t, "Subscription", subject)
}

// notInLog checks that nothing was stored on subject.
func notInLog(t *testing.T, js jetstream.JetStream, subject string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	st, err := js.Stream(ctx, bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, subject)
	if err == nil {
		t.Fatalf("the log holds %s (seq %d) although its publish was refused", subject, m.Sequence)
	}
	if !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatal(err)
	}
}

// provision creates tunejet's streams as the controller does on start.
func provision(t *testing.T, c *conn) *bus.Bus {
	t.Helper()
	b := c.bus(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := b.Provision(ctx); err != nil {
		t.Fatalf("provision as %s: %v", c.user, err)
	}
	if c.user == "controller" { // what the controller creates, as it runs
		if err := b.ProvisionBuckets(ctx); err != nil {
			t.Fatalf("provision the buckets as %s: %v", c.user, err)
		}
		if _, err := b.Checkpoints(ctx, "e1"); err != nil {
			t.Fatalf("create the checkpoint bucket of e1 as %s: %v", c.user, err)
		}
	}
	return b
}

// openStreams looks up tunejet's streams: what Provision does once the
// controller has created them (see TestEveryServiceCanProvision).
func openStreams(t *testing.T, c *conn) *bus.Bus {
	t.Helper()
	b := c.bus(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, name := range []string{bus.StreamName, bus.DLQStreamName, bus.AdvisoryStreamName} {
		if _, err := c.js(t).Stream(ctx, name); err != nil {
			t.Fatalf("look up stream %s as %s: %v", name, c.user, err)
		}
	}
	return b
}

// TestRunnerCannotPublishControllerEvents is the permission test of issue 6:
// the runner user is refused a controller event, and the refused event never
// reaches the log, while its own events are stored; the controller may
// publish controller events; the observer reads every event and publishes
// none.
func TestRunnerCannotPublishControllerEvents(t *testing.T) {
	s := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	controller, runner, observer, admin := connect(t, s, "controller"), connect(t, s, "runner"), connect(t, s, "observer"), connect(t, s, "admin")
	cb := provision(t, controller)
	rb := runner.bus(t)

	watch, err := observer.SubscribeSync("tunejet.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := observer.Flush(); err != nil {
		t.Fatal(err)
	}

	// A runner forging trial work for the controller: refused by the server.
	const forged = "tunejet.e1.controller.trial.scheduled.t1"
	runner.refusedPublish(t, forged)
	// Through JetStream too: the server drops the publish, so no stream
	// acknowledges it and the publish fails.
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	_, err = runner.js(t).Publish(pctx, forged, []byte(`{}`))
	pcancel()
	if err == nil {
		t.Fatal("a JetStream publish of a controller event by the runner was acknowledged")
	}
	notInLog(t, admin.js(t), forged)

	// The runner's own events are stored.
	reported := rb.Event("e1", events.WriterRunner, &events.TrialReported{TrialID: "t1", Attempt: 1, Result: map[string]any{"training_iteration": 1, "loss": 0.5}})
	if _, err := rb.Publish(ctx, reported); err != nil {
		t.Fatalf("the runner could not publish its own event: %v", err)
	}

	// The controller publishes controller events.
	stop := cb.Event("e1", events.WriterController, &events.TrialStopRequested{TrialID: "t1", Reason: "stopped"})
	if _, err := cb.Publish(ctx, stop); err != nil {
		t.Fatalf("the controller could not publish its own event: %v", err)
	}
	controller.noViolations(t)

	// The observer saw both, in order, and nothing of the refused publishes.
	for _, want := range []string{reported.Subject(), stop.Subject()} {
		m, err := watch.NextMsg(wait)
		if err != nil {
			t.Fatalf("observer waiting for %s: %v", want, err)
		}
		if m.Subject != want {
			t.Fatalf("observer got %s, want %s", m.Subject, want)
		}
	}
	// ... and may publish nothing under tunejet.
	observer.refusedPublish(t, "tunejet.e1.runner.trial.reported.t1")
	observer.refusedPublish(t, "tunejet.e1.controller.trial.scheduled.t1")
	notInLog(t, admin.js(t), "tunejet.e1.controller.trial.scheduled.t1")
}

// TestWritersPublishOnlyTheirOwnEvents checks every user against every
// writer's subjects: allowed exactly when the writer is the user.
func TestWritersPublishOnlyTheirOwnEvents(t *testing.T) {
	s := startNATS(t)
	admin := connect(t, s, "admin")
	provision(t, admin)
	writers := []events.Writer{events.WriterClient, events.WriterController, events.WriterRunner, events.WriterSyncer, events.WriterRestorer}
	for _, user := range []string{"client", "controller", "runner", "syncer", "restorer", "observer"} {
		t.Run(user, func(t *testing.T) {
			c := connect(t, s, user)
			js := c.js(t)
			for _, w := range writers {
				subject := fmt.Sprintf("tunejet.m1.%s.probe.sent.%s", w, user)
				if string(w) != user {
					c.refusedPublish(t, subject)
					notInLog(t, admin.js(t), subject)
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				_, err := js.Publish(ctx, subject, []byte(`{}`))
				cancel()
				if err != nil {
					t.Errorf("the %s user cannot publish its own subject %s: %v", user, subject, err)
				}
			}
		})
	}
}

// TestUsersCannotReachPastTheirRole checks what each user is refused
// beyond other writers' events: the log's configuration and messages, the
// buckets of other services, the restore API.
func TestUsersCannotReachPastTheirRole(t *testing.T) {
	s := startNATS(t)
	refused := []struct {
		user, verb string
		subjects   []string
	}{
		{"runner", "Publish", []string{
			"$JS.API.STREAM.UPDATE.TUNEJET", "$JS.API.STREAM.DELETE.TUNEJET", "$JS.API.STREAM.PURGE.TUNEJET",
			"$JS.API.STREAM.MSG.DELETE.TUNEJET", "$JS.API.STREAM.UPDATE.TUNEJET_ADVISORIES",
			"$KV.tunejet_leases.e1", "$JS.API.STREAM.UPDATE.KV_tunejet_leases",
			"tunejet-dlq.tunejet.e1.controller.trial.scheduled.t1", "tunejet.api.restore", "tunejet-alive.r1",
		}},
		{"runner", "Subscription", []string{"tunejet.api.restore", "tunejet.>", "tunejet.*.controller.trial.scheduled.*"}},
		{"syncer", "Publish", []string{
			"$O.ckpt_e1.C.x", "$JS.API.STREAM.CREATE.OBJ_ckpt_e1", "$JS.API.STREAM.UPDATE.TUNEJET",
			"$JS.API.STREAM.MSG.DELETE.TUNEJET", "$JS.API.STREAM.PURGE.TUNEJET", "$KV.tunejet_runners.r1", "tunejet-alive.r1",
		}},
		{"restorer", "Publish", []string{
			"$JS.API.STREAM.UPDATE.TUNEJET", "$JS.API.STREAM.MSG.DELETE.TUNEJET", "$JS.API.STREAM.PURGE.TUNEJET",
			"$KV.tunejet_runners.r1", "$KV.tunejet_leases.e1", "tunejet-alive.r1",
		}},
		{"client", "Publish", []string{
			"$JS.API.STREAM.UPDATE.TUNEJET", "$JS.API.STREAM.DELETE.TUNEJET", "$JS.API.STREAM.MSG.DELETE.TUNEJET",
			"$KV.tunejet_runners.r1", "$KV.tunejet_leases.e1", "$O.ckpt_e1.M.x", "$JS.ACK.TUNEJET.work_e1.1.1.1.1.0",
			"tunejet-alive.r1",
		}},
		{"client", "Subscription", []string{"tunejet.api.restore", "tunejet.>", "tunejet-alive.r1"}},
		{"controller", "Publish", []string{"$KV.tunejet_runners.r1", "$O.ckpt_e1.C.x", "tunejet.api.restore", "$JS.API.STREAM.DELETE.TUNEJET"}},
		// A controller answering for a runner would hide its death.
		{"controller", "Subscription", []string{"tunejet.api.restore", "tunejet-alive.r1"}},
		{"observer", "Publish", []string{
			"$JS.API.CONSUMER.CREATE.TUNEJET.x", "$JS.API.STREAM.MSG.DELETE.TUNEJET", "$KV.tunejet_runners.r1",
			"tunejet.api.can_restore", "tunejet-dlq.x", "tunejet-alive.r1",
		}},
		{"observer", "Subscription", []string{"tunejet.api.restore", "tunejet-alive.r1"}},
	}
	for _, r := range refused {
		t.Run(r.user+" "+r.verb, func(t *testing.T) {
			c := connect(t, s, r.user)
			for _, subject := range r.subjects {
				if r.verb == "Publish" {
					c.refusedPublish(t, subject)
				} else {
					c.refusedSubscribe(t, subject)
				}
			}
		})
	}
}

// TestServicesCanDoTheirWork runs, as each service's user, the JetStream
// operations the service performs, with the code it performs them with
// (internal/bus, internal/ckpt): least privilege that breaks a service is no
// use. The server must refuse none of them.
func TestServicesCanDoTheirWork(t *testing.T) {
	s := startNATS(t)
	const exp, trial = "e1", "t1"
	admin := connect(t, s, "admin")
	var (
		objectName   = ckpt.LegacyObjectName(trial, ckpt.Name(1))
		objectDigest string
	)

	t.Run("controller", func(t *testing.T) {
		c := connect(t, s, "controller")
		b := provision(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := b.EnsureWorkConsumer(ctx, exp, bus.WorkConfig{MaxFailures: 2, AckWait: 30}); err != nil {
			t.Fatalf("work consumer: %v", err)
		}
		// Trial work (its payload does not matter here: the runner below only
		// moves it through the work consumer).
		if _, err := c.js(t).Publish(ctx, events.Subject(exp, events.WriterController, events.TypeTrialScheduled, trial), []byte(`{}`)); err != nil {
			t.Fatalf("publish trial work: %v", err)
		}
		// Replay the experiment, point reads.
		if err := b.Replay(ctx, events.ExperimentSubjects(exp), func(*events.Event) {}); err != nil {
			t.Fatalf("replay: %v", err)
		}
		last, err := b.LastSeq(ctx, events.WriterSubjects(exp, events.WriterController))
		if err != nil || last == 0 {
			t.Fatalf("last controller event: %d, %v", last, err)
		}
		if _, err := b.RawEvent(ctx, last); err != nil {
			t.Fatalf("read event %d: %v", last, err)
		}
		// Dead-letter a malformed message: copied to TUNEJET_DLQ, removed from the log.
		bad := events.Subject(exp, events.WriterController, events.TypeExperimentInterrupted, "")
		ack, err := c.js(t).Publish(ctx, bad, []byte("not an event"))
		if err != nil {
			t.Fatal(err)
		}
		b.DeadLetter(ctx, bad, ack.Sequence, nil, []byte("not an event"), errors.New("malformed"))
		if _, err := b.RawEvent(ctx, ack.Sequence); !errors.Is(err, bus.ErrNoEvent) {
			t.Fatalf("the dead-lettered message is still in the log: %v", err)
		}
		dlq, err := admin.js(t).Stream(ctx, bus.DLQStreamName)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dlq.GetLastMsgForSubject(ctx, "tunejet-dlq."+bad); err != nil {
			t.Fatalf("the dead letter is not in %s: %v", bus.DLQStreamName, err)
		}
		// Follow the max-deliveries advisories until the watch's consumer exists.
		watchExhausted(t, b, admin, exp)

		// The leader lease.
		kv, err := c.js(t).CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "tunejet_leases", TTL: time.Minute, History: 1})
		if err != nil {
			t.Fatalf("lease bucket: %v", err)
		}
		rev, err := kv.Create(ctx, exp, []byte("controller-1"))
		if err != nil {
			t.Fatalf("take the lease: %v", err)
		}
		if _, err := kv.Update(ctx, exp, []byte("controller-1"), rev); err != nil {
			t.Fatalf("renew the lease: %v", err)
		}
		w, err := kv.Watch(ctx, exp)
		if err != nil {
			t.Fatalf("watch the lease: %v", err)
		}
		if e := <-w.Updates(); e == nil || string(e.Value()) != "controller-1" {
			t.Fatalf("lease watch: first entry %v", e)
		}
		if err := w.Stop(); err != nil {
			t.Fatal(err)
		}
		// The liveness watch follows the runner registry.
		wctx, stopWatch := context.WithCancel(ctx)
		rw, err := b.WatchRunners(wctx)
		if err != nil {
			t.Fatalf("watch the runner registry: %v", err)
		}
		if u := <-rw; !u.Current {
			t.Fatalf("runner registry watch: first update %+v, want the end of the (empty) initial values", u)
		}
		stopWatch()
		c.noViolations(t)
	})

	t.Run("runner", func(t *testing.T) {
		c := connect(t, s, "runner")
		b := openStreams(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()

		// The registry: the controller created it.
		const name = "gpu-host.example.com-42-ab12" // host names have dots
		if ok, err := b.PutRunnerInfo(ctx, bus.RunnerInfo{Name: name, Hostname: "gpu-host.example.com", PID: 42, Slots: 2}); err != nil || !ok {
			t.Fatalf("register in the runner registry: %v (found %v)", err, ok)
		}
		// It answers the controller's liveness requests while it lives.
		stopAnswering, err := b.AnswerLiveness(name)
		if err != nil {
			t.Fatal(err)
		}
		ctl := connect(t, s, "controller")
		if _, err := ctl.Request(bus.LivenessSubject(name), nil, wait); err != nil {
			t.Fatalf("liveness request: %v", err)
		}

		// The controller's stop request reaches a running trial (core subscription).
		stops, err := c.SubscribeSync(events.Subject(exp, events.WriterController, events.TypeTrialStopRequested, trial))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		cb := connect(t, s, "controller").bus(t)
		if _, err := cb.Publish(ctx, cb.Event(exp, events.WriterController, &events.TrialStopRequested{TrialID: trial, Reason: "stopped"})); err != nil {
			t.Fatal(err)
		}
		if _, err := stops.NextMsg(wait); err != nil {
			t.Fatalf("stop request: %v", err)
		}

		// Trial work: pull, heartbeat, ack.
		cons, err := c.js(t).Consumer(ctx, bus.StreamName, bus.WorkConsumerName(exp))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := cons.Next(jetstream.FetchMaxWait(wait))
		if err != nil {
			t.Fatalf("fetch trial work: %v", err)
		}
		// Gone (no subscriber), the runner's work is nakked by the controller
		// and comes back at once (AckWait is 30 s).
		stopAnswering()
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := ctl.bus(t).ProbeRunner(ctx, name); got != bus.Gone {
			t.Fatalf("liveness of a runner without a subscription: %v, want Gone", got)
		}
		if err := ctl.Publish(msg.Reply(), []byte("-NAK")); err != nil {
			t.Fatal(err)
		}
		ctl.noViolations(t)
		if msg, err = cons.Next(jetstream.FetchMaxWait(wait)); err != nil {
			t.Fatalf("fetch the nakked trial work again: %v", err)
		}
		if err := msg.InProgress(); err != nil {
			t.Fatal(err)
		}
		if err := msg.DoubleAck(ctx); err != nil {
			t.Fatalf("ack trial work: %v", err)
		}

		// Point reads and a trial's replay over several filters.
		if _, seq, err := b.LastEvent(ctx, events.TrialSubjects(exp, events.WriterController, trial)); err != nil || seq == 0 {
			t.Fatalf("last controller event of the trial: seq %d, %v", seq, err)
		}
		rctx, rcancel := context.WithCancel(ctx)
		err = b.WatchSubjects(rctx, []string{
			events.TrialSubjects(exp, events.WriterController, trial),
			events.Subject(exp, events.WriterRunner, events.TypeTrialCheckpointed, trial),
		}, 0, bus.Handler{Event: func(*events.Event) {}, CaughtUp: rcancel})
		rcancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("replay the trial: %v", err)
		}

		// A checkpoint: the bucket is created on first use; stage it twice
		// (the second replaces the first's chunks) and fetch it back.
		obs, err := b.Checkpoints(ctx, exp)
		if err != nil {
			t.Fatalf("checkpoint bucket: %v", err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "model.bin"), make([]byte, 300<<10), 0o644); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			staged, err := ckpt.Stage(ctx, obs, objectName, dir)
			if err != nil {
				t.Fatalf("stage a checkpoint: %v", err)
			}
			objectDigest = staged.Digest
		}
		if err := ckpt.Fetch(ctx, obs, objectName, objectDigest, filepath.Join(t.TempDir(), "restore")); err != nil {
			t.Fatalf("fetch a checkpoint: %v", err)
		}

		started := b.Event(exp, events.WriterRunner, &events.TrialStarted{TrialID: trial, Attempt: 1, Runner: name, Hostname: "gpu-host.example.com", PID: 42})
		if _, err := b.Publish(ctx, started); err != nil {
			t.Fatal(err)
		}
		if err := b.RemoveRunnerInfo(ctx, name); err != nil {
			t.Fatalf("leave the registry: %v", err)
		}
		c.noViolations(t)
	})

	t.Run("syncer", func(t *testing.T) {
		c := connect(t, s, "syncer")
		b := openStreams(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		last, err := b.LastSeq(ctx, events.ExperimentSubjects(exp))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.RawEvent(ctx, last); err != nil {
			t.Fatal(err)
		}
		// Its durable consumer: reset, then read and ack.
		name := "sync_" + exp
		if err := c.js(t).DeleteConsumer(ctx, bus.StreamName, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatalf("reset %s: %v", name, err)
		}
		cons, err := c.js(t).CreateConsumer(ctx, bus.StreamName, jetstream.ConsumerConfig{
			Durable: name, FilterSubject: events.ExperimentSubjects(exp), AckPolicy: jetstream.AckAllPolicy,
			AckWait: time.Minute, MaxAckPending: -1, DeliverPolicy: jetstream.DeliverAllPolicy,
		})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		it, err := cons.Messages()
		if err != nil {
			t.Fatal(err)
		}
		m, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatalf("ack: %v", err)
		}
		it.Stop()
		// Copy the staged checkpoint out, then remove the staged copy.
		obs, err := b.Checkpoints(ctx, exp)
		if err != nil {
			t.Fatal(err)
		}
		r, err := obs.Get(ctx, objectName)
		if err != nil {
			t.Fatalf("read the staged checkpoint: %v", err)
		}
		err = ckpt.Walk(r, objectDigest, func(_ *tar.Header, _ string, body io.Reader) error {
			_, err := io.Copy(io.Discard, body)
			return err
		})
		_ = r.Close()
		if err != nil {
			t.Fatalf("read the staged checkpoint: %v", err)
		}
		if err := obs.Delete(ctx, objectName); err != nil {
			t.Fatalf("remove the staged copy: %v", err)
		}
		// The deployment's identity, created by the first to ask, and the
		// claims clients ask it to make.
		if _, err := b.Deployment(ctx); err != nil {
			t.Fatalf("the deployment's identity: %v", err)
		}
		stopClaims, err := b.Serve(ctx, "tunejet.api.storage_claim", "syncer", func(context.Context, []byte) any { return map[string]any{} })
		if err != nil {
			t.Fatal(err)
		}
		stopClaims()
		failed := b.Event(exp, events.WriterSyncer, &events.SyncFailed{Operation: "upload", Error: "test", Attempt: 1})
		if _, err := b.Publish(ctx, failed); err != nil {
			t.Fatal(err)
		}
		c.noViolations(t)
	})

	// The restorer serves the restore API while the client runs: its
	// connection lives as long as the whole test.
	restorer := connect(t, s, "restorer")
	t.Run("restorer", func(t *testing.T) {
		c := restorer
		b := openStreams(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		svc, err := micro.AddService(c.Conn, micro.Config{Name: "tunejet-restorer", Version: "0.1.0"})
		if err != nil {
			t.Fatal(err)
		}
		for _, subject := range []string{"tunejet.api.restore", "tunejet.api.can_restore"} {
			handler := micro.HandlerFunc(func(req micro.Request) { _ = req.RespondJSON(map[string]any{"ok": true}) })
			if err := svc.AddEndpoint(subject[strings.LastIndex(subject, ".")+1:], handler, micro.WithEndpointSubject(subject)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Replay(ctx, events.ExperimentSubjects(exp), func(*events.Event) {}); err != nil {
			t.Fatal(err)
		}
		// Stage a restored state, for this experiment and for one whose log
		// (and bucket) is gone.
		for _, e := range []string{exp, "e2"} {
			obs, err := b.Checkpoints(ctx, e)
			if err != nil {
				t.Fatalf("checkpoint bucket of %s: %v", e, err)
			}
			if _, err := obs.PutBytes(ctx, "restored/run-1", []byte(`{"state":1}`)); err != nil {
				t.Fatalf("stage the restored state of %s: %v", e, err)
			}
			if _, err := obs.GetInfo(ctx, "restored/run-1"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.js(t).Publish(ctx, events.Subject(exp, events.WriterRestorer, events.TypeExperimentRestored, ""), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		// Whether a live controller leads the experiment it would restore.
		leases, ok, err := b.ExistingLeases(ctx)
		if err != nil || !ok {
			t.Fatalf("the lease bucket: found %v, %v", ok, err)
		}
		if holder, _, err := leases.Holder(ctx, exp); err != nil || holder == "" {
			t.Fatalf("read the experiment's lease: holder %q, %v", holder, err)
		}
		// The deployment's identity, to claim the experiment's folder with.
		if _, err := b.Deployment(ctx); err != nil {
			t.Fatalf("the deployment's identity: %v", err)
		}
		// nats micro discovery reaches it.
		if _, err := admin.Request("$SRV.PING.tunejet-restorer", nil, wait); err != nil {
			t.Fatalf("micro ping: %v", err)
		}
		c.noViolations(t)
	})

	// Core subjects between services: the controller tells a runner that
	// waits for decisions its results are judged, and asks a client's
	// driver its questions, which the client answers.
	t.Run("core", func(t *testing.T) {
		ctl, run, cli := connect(t, s, "controller"), connect(t, s, "runner"), connect(t, s, "client")
		cb, rb, clb := ctl.bus(t), run.bus(t), cli.bus(t)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		heard := make(chan bus.Judged, 1)
		stop, err := rb.OnJudged(exp, trial, func(j bus.Judged) { heard <- j })
		if err != nil {
			t.Fatalf("runner: watch judgements: %v", err)
		}
		defer stop()
		if err := cb.AnnounceJudged(exp, trial, bus.Judged{Attempt: 1, Iteration: 3}); err != nil {
			t.Fatal(err)
		}
		select {
		case j := <-heard:
			if j.Iteration != 3 {
				t.Fatalf("runner heard %+v", j)
			}
		case <-ctx.Done():
			t.Fatal("the runner never heard the controller's judgement")
		}
		stopServing, err := clb.ServeDriver(ctx, exp, func(_ context.Context, q events.DriverQuestion) bus.DriverReply {
			return bus.DriverReply{By: "MyStopper", Answer: bus.DriverAnswer{DriverAnswer: events.DriverAnswer{Stop: q.Key == "stop/t1/3"}}}
		})
		if err != nil {
			t.Fatalf("client: serve the driver: %v", err)
		}
		defer stopServing()
		reply, err := cb.AskDriver(ctx, exp, events.DriverQuestion{Method: events.DriverStop, Key: "stop/t1/3", TrialID: trial})
		if err != nil || !reply.Answer.Stop || reply.By != "MyStopper" {
			t.Fatalf("controller: ask the driver: %+v, %v", reply, err)
		}
		for _, c := range []*conn{ctl, run, cli} {
			c.noViolations(t)
		}
	})

	t.Run("client", func(t *testing.T) {
		c := connect(t, s, "client")
		b := openStreams(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if _, err := b.LastSeq(ctx, events.TypeSubjects(exp, events.WriterClient, events.TypeExperimentSubmitted)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.js(t).Publish(ctx, events.Subject(exp, events.WriterClient, events.TypeExperimentSubmitted, ""), []byte(`{}`)); err != nil {
			t.Fatalf("submit: %v", err)
		}
		if err := b.Replay(ctx, events.ExperimentSubjects(exp), func(*events.Event) {}); err != nil {
			t.Fatalf("watch: %v", err)
		}
		// Ask a syncer to claim the experiment's folder (none serves it here).
		if _, err := c.Request("tunejet.api.storage_claim", []byte(`{}`), wait); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("storage claim: %v; want no responders", err)
		}
		// Ask the restorer.
		rep, err := c.Request("tunejet.api.can_restore", []byte(`{"path":"s3://bucket/e1"}`), wait)
		if err != nil {
			t.Fatalf("can_restore: %v", err)
		}
		if !strings.Contains(string(rep.Data), `"ok":true`) {
			t.Fatalf("can_restore replied %s", rep.Data)
		}
		// The fold of a restored run loads the staged state.
		obs, err := b.Checkpoints(ctx, exp)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := obs.GetBytes(ctx, "restored/run-1"); err != nil {
			t.Fatalf("load the restored state: %v", err)
		}
		// tunejet status: live runners, leases.
		if _, ok, err := b.LiveRunners(ctx); err != nil || !ok {
			t.Fatalf("list the live runners: %v (registry found: %v)", err, ok)
		}
		leases, err := c.js(t).KeyValue(ctx, "tunejet_leases")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leases.Get(ctx, exp); err != nil {
			t.Fatalf("read the lease: %v", err)
		}
		// A Python driver's cursor, in the bucket the controller made.
		if err := b.SetDriverCursor(ctx, exp, 7); err != nil {
			t.Fatalf("move the driver cursor: %v", err)
		}
		if seq, err := b.DriverCursor(ctx, exp); err != nil || seq != 7 {
			t.Fatalf("read the driver cursor: %d, %v; want 7", seq, err)
		}
		c.noViolations(t)
	})

	t.Run("observer", func(t *testing.T) {
		c := connect(t, s, "observer")
		sub, err := c.SubscribeSync("tunejet.>")
		if err != nil {
			t.Fatal(err)
		}
		dead, err := c.SubscribeSync("tunejet-dlq.>")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		// A restore request, then an event, from one client connection: the
		// observer gets the event first, so it never gets the request.
		client := connect(t, s, "client")
		if err := client.Publish("tunejet.api.can_restore", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		stopReq := events.Subject(exp, events.WriterClient, events.TypeExperimentStopRequested, "")
		if err := client.Publish(stopReq, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		m, err := sub.NextMsg(wait)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != stopReq {
			t.Fatalf("observer got %s first, want %s: restore requests are not events", m.Subject, stopReq)
		}
		// Dead letters, live.
		ctl := connect(t, s, "controller")
		cb := ctl.bus(t)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		bad := events.Subject(exp, events.WriterController, events.TypeExperimentInterrupted, "")
		ack, err := ctl.js(t).Publish(ctx, bad, []byte("garbage"))
		if err != nil {
			t.Fatal(err)
		}
		cb.DeadLetter(ctx, bad, ack.Sequence, nil, []byte("garbage"), errors.New("malformed"))
		if _, err := dead.NextMsg(wait); err != nil {
			t.Fatalf("dead letter: %v", err)
		}
		// Read-only JetStream requests.
		js := c.js(t)
		st, err := js.Stream(ctx, bus.StreamName)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.GetMsg(ctx, 1); err != nil {
			t.Fatal(err)
		}
		c.noViolations(t)
	})

	// Answering the client's requests was allowed too.
	restorer.noViolations(t)
}

// watchExhausted runs the controller's advisory watch until its consumer
// exists on the server, then stops it.
func watchExhausted(t *testing.T, b *bus.Bus, admin *conn, exp string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.WatchExhausted(ctx, exp, func(uint64) {}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("advisory watch: %v", err)
		}
	}()
	st, err := admin.js(t).Stream(context.Background(), bus.AdvisoryStreamName)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		info, err := st.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Consumers > 0 {
			return
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("advisory watch ended: %v", err)
		case <-tick.C:
		case <-deadline.C:
			t.Fatal("the advisory watch created no consumer")
		}
	}
}
