package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/services/controller"
)

const wait = 15 * time.Second

// startController runs a controller on its own connection until the
// returned stop is called (or the test ends).
func startController(t *testing.T, srv *bustest.Server, name string) (stop func()) {
	t.Helper()
	c := controller.New(srv.Bus(name), controller.Config{Tick: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller %s: %v", name, err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func gridSpec(name string, points, maxConcurrent int, storage string) events.ExperimentSpec {
	xs := make([]any, points)
	for i := range xs {
		xs[i] = float64(i)
	}
	return events.ExperimentSpec{
		Name: name, Trainable: events.Trainable{Name: "fn"},
		ParamSpace: map[string]any{"x": map[string]any{"grid_search": xs}},
		TuneConfig: events.TuneConfig{NumSamples: 1, MaxConcurrentTrials: maxConcurrent},
		RunConfig:  events.RunConfig{StoragePath: storage},
	}
}

func submit(t *testing.T, b *bus.Bus, sp events.ExperimentSpec) {
	t.Helper()
	if _, err := b.Publish(t.Context(), b.Event(sp.Name, events.WriterClient, &events.ExperimentSubmitted{Spec: sp})); err != nil {
		t.Fatal(err)
	}
}

func count(evs []*events.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type() == typ {
			n++
		}
	}
	return n
}

func waitForCount(t *testing.T, b *bus.Bus, exp, typ string, n int) {
	t.Helper()
	bustest.Eventually(t, wait, fmt.Sprintf("%d %s events", n, typ), func() bool {
		return count(bustest.Log(t, b, exp), typ) >= n
	})
}

// completion waits for the experiment's end and returns it.
func completion(t *testing.T, b *bus.Bus, exp string) *events.ExperimentCompleted {
	t.Helper()
	waitForCount(t, b, exp, events.TypeExperimentCompleted, 1)
	for _, ev := range bustest.Log(t, b, exp) {
		if p, ok := ev.Data.(*events.ExperimentCompleted); ok {
			return p
		}
	}
	panic("unreachable")
}

// worker plays a runner on the bus: it pulls trial work from the
// experiment's work consumer and publishes what a runner publishes.
type worker struct {
	t    *testing.T
	b    *bus.Bus
	exp  string
	cons jetstream.Consumer
}

func newWorker(t *testing.T, srv *bustest.Server, exp string) *worker {
	t.Helper()
	w := &worker{t: t, b: srv.Bus("worker"), exp: exp}
	js := srv.JetStream()
	bustest.Eventually(t, wait, "the work consumer", func() bool {
		c, err := bustest.WorkConsumer(t.Context(), js, exp)
		w.cons = c
		return err == nil
	})
	return w
}

// next fetches the next trial work. A consumer just created may not take
// pull requests yet (no responders): it tries again, as a runner does.
func (w *worker) next() (jetstream.Msg, error) {
	for deadline := time.Now().Add(wait); ; {
		msg, err := w.cons.Next(jetstream.FetchMaxWait(time.Until(deadline)))
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(deadline) {
			return msg, err
		}
		time.Sleep(10 * time.Millisecond) // the pace of the retries, as a runner's
	}
}

// runOne runs the next trial work to completion and returns its trial id.
func (w *worker) runOne() string {
	w.t.Helper()
	msg, err := w.next()
	if err != nil {
		w.t.Fatalf("no trial work within %v: %v", wait, err)
	}
	ev, err := bus.FromJS(msg)
	if err != nil {
		w.t.Fatalf("trial work does not decode: %v", err)
	}
	work := ev.Data.(*events.TrialScheduled)
	md, err := msg.Metadata()
	if err != nil {
		w.t.Fatal(err)
	}
	attempt := work.AttemptBase + int(md.NumDelivered)
	for _, p := range []events.Payload{
		&events.TrialStarted{TrialID: work.TrialID, Attempt: attempt, Runner: "worker"},
		&events.TrialReported{TrialID: work.TrialID, Attempt: attempt, Result: map[string]any{"training_iteration": 1, "loss": work.Config["x"]}},
		&events.TrialCompleted{TrialID: work.TrialID, Attempt: attempt, Status: events.StatusTerminated, Reason: "finished"},
	} {
		if _, err := w.b.Publish(w.t.Context(), w.b.Event(w.exp, events.WriterRunner, p)); err != nil {
			w.t.Fatal(err)
		}
	}
	if err := msg.DoubleAck(w.t.Context()); err != nil {
		w.t.Fatal(err)
	}
	return work.TrialID
}

// checkTrials checks that an experiment created exactly n trials, each
// once, with indexes 0..n-1, and that all of them ended TERMINATED.
func checkTrials(t *testing.T, evs []*events.Event, n int) {
	t.Helper()
	created := map[string]int{}
	indexes := map[int]bool{}
	st := state.New(evs[0].Experiment)
	for _, ev := range evs {
		st, _, _ = state.Fold(t.Context(), st, ev, nil)
		if p, ok := ev.Data.(*events.TrialCreated); ok {
			created[p.TrialID]++
			indexes[p.Index] = true
		}
	}
	if len(created) != n || count(evs, events.TypeTrialCreated) != n {
		t.Errorf("%d trial.created events for %d trials, want %d for %d", count(evs, events.TypeTrialCreated), len(created), n, n)
	}
	for id, c := range created {
		if c != 1 {
			t.Errorf("trial %s was created %d times", id, c)
		}
	}
	for i := 0; i < n; i++ {
		if !indexes[i] {
			t.Errorf("no trial has index %d", i)
		}
	}
	if got := st.Counts()[events.StatusTerminated]; got != n {
		t.Errorf("%d trials TERMINATED, want %d: %v", got, n, st.Counts())
	}
	if c := count(evs, events.TypeExperimentStarted); c != 1 {
		t.Errorf("%d experiment.started events, want 1", c)
	}
	if c := count(evs, events.TypeExperimentCompleted); c != 1 {
		t.Errorf("%d experiment.completed events, want 1", c)
	}
}

// garbage is a message a foreign publisher might send on our subjects.
type garbage struct {
	name    string
	subject string
	header  nats.Header
	data    []byte
	want    string // in the dead letter's error header
}

// envelope returns the headers and data of a valid event, to tamper with.
func envelope(t *testing.T, ev *events.Event) (nats.Header, []byte) {
	t.Helper()
	m, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	return nats.Header(m.Header), m.Data
}

// deadLettered waits until the message at seq has left the log for the
// dead-letter stream, and returns the dead letter.
func deadLettered(t *testing.T, js jetstream.JetStream, seq uint64) *jetstream.RawStreamMsg {
	t.Helper()
	logStream, err := js.Stream(t.Context(), bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := js.Stream(t.Context(), bus.DLQStreamName)
	if err != nil {
		t.Fatal(err)
	}
	var dead *jetstream.RawStreamMsg
	bustest.Eventually(t, wait, fmt.Sprintf("message %d to be dead-lettered", seq), func() bool {
		if _, err := logStream.GetMsg(t.Context(), seq); !errors.Is(err, jetstream.ErrMsgNotFound) {
			return false
		}
		info, err := dlq.Info(t.Context())
		if err != nil {
			return false
		}
		for s := info.State.FirstSeq; s <= info.State.LastSeq; s++ {
			m, err := dlq.GetMsg(t.Context(), s)
			if err == nil && m.Header.Get(bus.HeaderDLQSequence) == fmt.Sprint(seq) {
				dead = m
				return true
			}
		}
		return false
	})
	return dead
}

func TestGarbageIsDeadLetteredAndTheExperimentStillRuns(t *testing.T) {
	srv := bustest.Start(t)
	client := srv.Bus("client")
	js := srv.JetStream() // a publisher of garbage
	startController(t, srv, "controller")

	submitted := events.TypeSubjects("e1", events.WriterClient, events.TypeExperimentSubmitted)
	ack, err := js.Publish(t.Context(), submitted, []byte("\x00\xffnot an event"))
	if err != nil {
		t.Fatal(err)
	}
	dead := deadLettered(t, js, ack.Sequence)
	if got := dead.Header.Get(bus.HeaderDLQError); !strings.Contains(got, "ce-specversion") {
		t.Errorf("dead letter error %q does not name the missing ce-specversion header", got)
	}
	if dead.Subject != "tunejet-dlq."+submitted || dead.Header.Get(bus.HeaderDLQSubject) != submitted || string(dead.Data) != "\x00\xffnot an event" {
		t.Errorf("dead letter %q %v %q does not keep the original subject and data", dead.Subject, dead.Header, dead.Data)
	}

	sp := gridSpec("good", 3, 2, t.TempDir())
	submit(t, client, sp)
	waitForCount(t, client, "good", events.TypeTrialScheduled, 2)

	// A runner-side publisher with bad payloads, on the running experiment.
	trial := "abcde_00000"
	rh, _ := envelope(t, client.Event("good", events.WriterRunner, &events.TrialReported{TrialID: trial, Attempt: 1, Result: map[string]any{"training_iteration": 1}}))
	ch, cdata := envelope(t, client.Event("good", events.WriterController, &events.TrialCreated{TrialID: trial, TrialName: "fn", DirName: "d", Config: map[string]any{}}))
	cases := []garbage{
		{"report without training_iteration", events.Subject("good", events.WriterRunner, events.TypeTrialReported, trial), rh,
			[]byte(`{"trial_id":"abcde_00000","attempt":1,"result":{"loss":0.5}}`), "result.training_iteration"},
		{"report that is not JSON", events.Subject("good", events.WriterRunner, events.TypeTrialReported, trial), rh,
			[]byte(`{"trial_id":`), "data"},
		{"unknown event kind", "tunejet.good.runner.trial.exploded." + trial, nil, []byte("{}"), `unknown event kind "trial.exploded"`},
		{"a runner posing as the controller", "tunejet.good.runner.trial.created." + trial, ch, cdata, `writer "runner" may not publish`},
	}
	for _, g := range cases {
		t.Run(g.name, func(t *testing.T) {
			h := nats.Header{}
			for k, v := range g.header {
				h[k] = v
			}
			h.Set(events.HeaderMsgID, events.NewID())
			ack, err := js.PublishMsg(t.Context(), &nats.Msg{Subject: g.subject, Header: h, Data: g.data})
			if err != nil {
				t.Fatal(err)
			}
			dead := deadLettered(t, js, ack.Sequence)
			if got := dead.Header.Get(bus.HeaderDLQError); !strings.Contains(got, g.want) {
				t.Errorf("dead letter error %q does not contain %q", got, g.want)
			}
		})
	}

	w := newWorker(t, srv, "good")
	for i := 0; i < 3; i++ {
		w.runOne()
	}
	if c := completion(t, client, "good"); c.Reason != "finished" {
		t.Fatalf("experiment completed with reason %q, want finished", c.Reason)
	}
	checkTrials(t, bustest.Log(t, client, "good"), 3)
}

func TestRestartedControllerContinues(t *testing.T) {
	srv := bustest.Start(t)
	client := srv.Bus("client")
	stopA := startController(t, srv, "controller-a")

	const n = 6
	submit(t, client, gridSpec("resume", n, 2, t.TempDir()))
	w := newWorker(t, srv, "resume")
	w.runOne()
	waitForCount(t, client, "resume", events.TypeTrialCreated, 3) // the first controller refilled the window

	stopA()
	w.runOne() // a trial ends while no controller runs
	before := bustest.Log(t, client, "resume")
	if c := count(before, events.TypeTrialCreated); c != 3 {
		t.Fatalf("%d trials created with no controller running, want still 3", c)
	}

	startController(t, srv, "controller-b")
	for i := 2; i < n; i++ {
		w.runOne()
	}
	if c := completion(t, client, "resume"); c.Reason != "finished" {
		t.Fatalf("experiment completed with reason %q, want finished", c.Reason)
	}
	evs := bustest.Log(t, client, "resume")
	checkTrials(t, evs, n)
	st := state.New("resume")
	for _, ev := range evs {
		st, _, _ = state.Fold(t.Context(), st, ev, nil)
		if st.InFlight() > 2 {
			t.Fatalf("after %s at seq %d, %d trials in flight; max_concurrent_trials is 2", ev.Type(), ev.Seq, st.InFlight())
		}
	}
}
