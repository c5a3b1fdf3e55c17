package controller

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

const livenessWait = 15 * time.Second

// livenessFixture is a controller's liveness watcher, and one runner
// running one delivery of trial work, with a heartbeat timeout far longer
// than any test waits: only a nak redelivers the work in time.
type livenessFixture struct {
	t      *testing.T
	srv    *bustest.Server
	w      *livenessWatcher
	ctl    *bus.Bus
	runner *nats.Conn
	work   jetstream.Msg
	naks   *nats.Subscription // every publish to an ack subject
	nc     *nats.Conn         // naks's connection
}

const (
	lvExp    = "lv"
	lvTrial  = "t1"
	lvRunner = "gpu-host.example.com-42-ab12"
)

func newLivenessFixture(t *testing.T, answer bool) *livenessFixture {
	t.Helper()
	ctx := t.Context()
	srv := bustest.Start(t)
	ctl := srv.Bus("controller-1")
	if err := ctl.ProvisionBuckets(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ctl.EnsureWorkConsumer(ctx, lvExp, bus.WorkConfig{MaxFailures: 3, AckWait: 600}); err != nil {
		t.Fatal(err)
	}
	// The work's payload does not matter: the watcher never reads it.
	if _, err := srv.JetStream().Publish(ctx, events.Subject(lvExp, events.WriterController, events.TypeTrialScheduled, lvTrial), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	runner, err := nats.Connect(srv.URL(), nats.Name(lvRunner))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runner.Close)
	rb, err := bus.New(runner, "runner", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if answer {
		if _, err := rb.AnswerLiveness(lvRunner); err != nil {
			t.Fatal(err)
		}
	} else { // subscribed, never answers: a frozen (or very busy) runner
		if _, err := runner.SubscribeSync(bus.LivenessSubject(lvRunner)); err != nil {
			t.Fatal(err)
		}
		if err := runner.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	rjs, err := jetstream.New(runner)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := bustest.WorkConsumer(ctx, rjs, lvExp)
	if err != nil {
		t.Fatal(err)
	}
	work, err := cons.Next(jetstream.FetchMaxWait(livenessWait))
	if err != nil {
		t.Fatalf("fetch the trial work: %v", err)
	}
	nc := srv.Conn()
	naks, err := nc.SubscribeSync("$JS.ACK.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	f := &livenessFixture{t: t, srv: srv, ctl: ctl, runner: runner, work: work, naks: naks, nc: nc}
	f.w = newLivenessWatcher(New(ctl, Config{}))
	f.w.grace = 0
	f.lead("controller-1")
	f.register(1, 1)
	return f
}

// lead gives the experiment's lease to holder.
func (f *livenessFixture) lead(holder string) {
	f.t.Helper()
	kv, err := f.srv.JetStream().KeyValue(f.t.Context(), bus.LeaseBucket)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := kv.Put(f.t.Context(), lvExp, []byte(holder)); err != nil {
		f.t.Fatal(err)
	}
}

// register writes the runner's registry entry, running attempt on the
// work's delivery, and hands
// it to the watcher as its registry watch would.
func (f *livenessFixture) register(attempt, delivery int) {
	f.t.Helper()
	ctx := f.t.Context()
	info := bus.RunnerInfo{Name: lvRunner, Slots: 1, Trials: []bus.RunnerTrial{
		{Experiment: lvExp, TrialID: lvTrial, Attempt: attempt, Ack: f.work.Reply(), Delivery: delivery},
	}}
	if ok, err := f.ctl.PutRunnerInfo(ctx, info); err != nil || !ok {
		f.t.Fatalf("register the runner: %v (registry found: %v)", err, ok)
	}
	f.w.update(bus.RunnerUpdate{Name: lvRunner, Info: &info})
}

// kill closes the runner's connection as its process's death does, and
// waits until the server has dropped its interest.
func (f *livenessFixture) kill() {
	f.t.Helper()
	f.runner.Close()
	bustest.Eventually(f.t, livenessWait, "the runner's subscription to go", func() bool {
		ctx, cancel := context.WithTimeout(f.t.Context(), time.Second)
		defer cancel()
		return f.ctl.ProbeRunner(ctx, lvRunner) == bus.Gone
	})
}

// nakked returns the naks sent so far. poll flushes its naks, so the
// server has routed them; a round trip on the subscription's connection
// then brings everything the server queued for it before.
func (f *livenessFixture) nakked() []string {
	f.t.Helper()
	if err := f.nc.Flush(); err != nil {
		f.t.Fatal(err)
	}
	n, _, err := f.naks.Pending()
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for range n {
		m, err := f.naks.NextMsg(time.Second)
		if err != nil {
			f.t.Fatal(err)
		}
		if string(m.Data) == "-NAK" {
			out = append(out, m.Subject)
		}
	}
	return out
}

func TestGoneRunnersWorkIsNakkedOnce(t *testing.T) {
	f := newLivenessFixture(t, true)
	ctx := t.Context()
	announced := make(chan struct{}, 4)
	stop, err := f.srv.Bus("observer").OnWorkAgain(lvExp, func() { announced <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	f.w.poll(ctx)
	if !f.w.runners[lvRunner].seen {
		t.Fatal("a runner that answers is not recorded as present")
	}
	f.kill()
	f.w.poll(ctx)
	f.w.poll(ctx) // the second finds the runner gone again: no second nak
	if got := f.nakked(); len(got) != 1 || got[0] != f.work.Reply() {
		t.Fatalf("naks %q; want one, to %s", got, f.work.Reply())
	}
	// An idle runner polls for work handed out again only now and then: the
	// nak is announced, so that it fetches at once.
	select {
	case <-announced:
	case <-time.After(livenessWait):
		t.Fatal("the work handed on was not announced to the runners")
	}
	// The heartbeat timeout is 600 s: only the nak can have redelivered it.
	cons, err := bustest.WorkConsumer(ctx, f.srv.JetStream(), lvExp)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next(jetstream.FetchMaxWait(livenessWait))
	if err != nil {
		t.Fatalf("the work was not redelivered: %v", err)
	}
	if md, err := m.Metadata(); err != nil || md.NumDelivered != 2 {
		t.Fatalf("redelivery metadata %+v, %v; want the second delivery", md, err)
	}
}

func TestLiveRunnersWorkIsNeverNakked(t *testing.T) {
	tests := []struct {
		name   string
		answer bool
	}{
		{"answering", true},
		{"subscribed but silent (frozen or busy)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newLivenessFixture(t, tt.answer)
			for range 4 {
				f.w.poll(t.Context())
			}
			if got := f.nakked(); len(got) != 0 {
				t.Fatalf("naks %q for a runner whose connection is up", got)
			}
			if r := f.w.runners[lvRunner]; !r.seen || !r.goneSince.IsZero() {
				t.Fatalf("runner state %+v; want present", r)
			}
		})
	}
}

// TestGoneRunnersStaleWorkIsLeftAlone: the watcher naks nothing it cannot
// be sure is the current delivery of work it decides about. nats-server
// takes a nak for an earlier delivery of a message that is pending again
// (processNak checks only that the message is pending), so naking stale
// work would pull the trial from the runner now running it. Nor does it
// nak a last delivery, which only its expiry reports exhausted.
func TestGoneRunnersStaleWorkIsLeftAlone(t *testing.T) {
	tests := []struct {
		name  string
		setup func(f *livenessFixture)
	}{
		{"a newer attempt has started", func(f *livenessFixture) {
			started := f.ctl.Event(lvExp, events.WriterRunner, &events.TrialStarted{TrialID: lvTrial, Attempt: 2, Runner: "other", Hostname: "h", PID: 1})
			if _, err := f.ctl.Publish(f.t.Context(), started); err != nil {
				f.t.Fatal(err)
			}
		}},
		{"another controller leads the experiment", func(f *livenessFixture) { f.lead("controller-2") }},
		// A nakked message is found out of deliveries only when a runner
		// pulls again; an expired one at once, even with no runner left.
		{"it is the work's last delivery", func(f *livenessFixture) { f.register(1, 4) }},
		{"the runner does not say which delivery it runs", func(f *livenessFixture) { f.register(1, 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newLivenessFixture(t, true)
			tt.setup(f)
			f.w.poll(t.Context())
			f.kill()
			f.w.poll(t.Context())
			if _, decided := f.w.handled[f.work.Reply()]; !decided {
				t.Fatal("the watcher did not find the runner gone")
			}
			if got := f.nakked(); len(got) != 0 {
				t.Fatalf("naks %q; want none", got)
			}
		})
	}
}

// TestRunnerNeverSeenPresentIsNotDeclaredGone: no responders for a runner
// the watcher never found present proves nothing (its subscription may not
// have reached this server yet).
func TestRunnerNeverSeenPresentIsNotDeclaredGone(t *testing.T) {
	f := newLivenessFixture(t, true)
	f.kill()
	for range 3 {
		f.w.poll(t.Context())
	}
	if got := f.nakked(); len(got) != 0 {
		t.Fatalf("naks %q; want none", got)
	}
}

func TestLivenessSubjectIsOneToken(t *testing.T) {
	tests := []struct{ name, want string }{
		{"r1", "tunejet-alive.r1"},
		{"gpu-host.example.com-42-ab12", "tunejet-alive.gpu-host_example_com-42-ab12"},
		{"a b*>", "tunejet-alive.a_b__"},
		{"", "tunejet-alive._"},
	}
	for _, tt := range tests {
		if got := bus.LivenessSubject(tt.name); got != tt.want {
			t.Errorf("LivenessSubject(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
