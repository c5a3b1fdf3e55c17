package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// iteration is the training_iteration a report event carries.
func iteration(ev *events.Event) int {
	p, ok := ev.Data.(*events.TrialReported)
	if !ok {
		return -1
	}
	it, err := strconv.Atoi(fmt.Sprint(p.Result["training_iteration"]))
	if err != nil {
		return -1
	}
	return it
}

// handled is what a consumer's handler saw: each event's iteration and
// delivery, in order.
type handled struct {
	mu   sync.Mutex
	seen []string
}

func (h *handled) add(it, num int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, fmt.Sprintf("%d#%d", it, num))
}

func (h *handled) has(s string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range h.seen {
		if x == s {
			return true
		}
	}
	return false
}

func (h *handled) count(it int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, x := range h.seen {
		var i, num int
		if _, err := fmt.Sscanf(x, "%d#%d", &i, &num); err == nil && i == it {
			n++
		}
	}
	return n
}

func consume(t *testing.T, b *bus.Bus, c bus.Consumer, h func(ctx context.Context, d *bus.Delivery) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.Consume(ctx, c, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Consume returned %v, want context.Canceled", err)
		}
	})
}

// TestConsumeSettlesByTheHandlersError: nil acks, Retry hands the message
// out again, Terminate ends it, a plain error and a panic hand it out
// again, and a panic on one message does not stop the next from being
// handled.
func TestConsumeSettlesByTheHandlersError(t *testing.T) {
	b := bustest.Start(t).Bus("test")
	for it := 1; it <= 5; it++ {
		publish(t, b, report(b, "e1", it))
	}
	var h handled
	consume(t, b, bus.Consumer{Name: "c1", Filter: events.ExperimentSubjects("e1"), AckWait: time.Minute}, func(_ context.Context, d *bus.Delivery) error {
		it := iteration(d.Event)
		h.add(it, d.Num)
		if d.Event.Seq == 0 {
			t.Errorf("iteration %d: no sequence", it)
		}
		switch {
		case it == 2 && d.Num == 1:
			panic("handler bug")
		case it == 3 && d.Num == 1:
			return bus.Retry(errors.New("not now"), 10*time.Millisecond)
		case it == 4 && d.Num == 1:
			return errors.New("failed")
		case it == 5:
			return bus.Terminate(errors.New("never"))
		}
		return nil
	})
	bustest.Eventually(t, wait, "every message handled, the failed ones again", func() bool {
		return h.has("1#1") && h.has("2#1") && h.has("2#2") && h.has("3#1") && h.has("3#2") && h.has("4#1") && h.has("4#2") && h.has("5#1")
	})
	// The acked ones and the terminated one are not handed out again: a
	// sixth message is handled after them, and they are still handled once.
	publish(t, b, report(b, "e1", 6))
	bustest.Eventually(t, wait, "the sixth message", func() bool { return h.has("6#1") })
	for it, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 2, 5: 1} {
		if got := h.count(it); got != want {
			t.Errorf("iteration %d handled %d times, want %d", it, got, want)
		}
	}
}

// TestConsumeFollowsALostConsumer: a consumer deleted under Consume is
// created again, and consuming goes on.
func TestConsumeFollowsALostConsumer(t *testing.T) {
	srv := bustest.Start(t)
	b := srv.Bus("test")
	var h handled
	consume(t, b, bus.Consumer{Name: "c2", Filter: events.ExperimentSubjects("e2"), AckWait: time.Minute}, func(_ context.Context, d *bus.Delivery) error {
		h.add(iteration(d.Event), d.Num)
		return nil
	})
	publish(t, b, report(b, "e2", 1))
	bustest.Eventually(t, wait, "the first message", func() bool { return h.has("1#1") })
	if err := srv.JetStream().DeleteConsumer(t.Context(), bus.StreamName, "c2"); err != nil {
		t.Fatal(err)
	}
	publish(t, b, report(b, "e2", 2))
	bustest.Eventually(t, time.Minute, "a message after the consumer was lost", func() bool { return h.has("2#1") })
}

func TestLastEvent(t *testing.T) {
	srv := bustest.Start(t)
	b := srv.Bus("test")
	subject := events.ExperimentSubjects("e3")
	ev, seq, err := b.LastEvent(t.Context(), subject)
	if err != nil || ev != nil || seq != 0 {
		t.Fatalf("empty log: %v, %d, %v; want nothing", ev, seq, err)
	}
	publish(t, b, report(b, "e3", 1))
	want := publish(t, b, report(b, "e3", 2))
	publish(t, b, report(b, "other", 3))
	ev, seq, err = b.LastEvent(t.Context(), subject)
	if err != nil || ev == nil || seq != want || ev.Seq != want || iteration(ev) != 2 {
		t.Fatalf("LastEvent = %v, %d, %v; want iteration 2 at %d", ev, seq, err, want)
	}
	ack, err := srv.JetStream().PublishMsg(t.Context(), &nats.Msg{Subject: "tunejet.e3.runner.trial.reported.t1", Data: []byte("garbage")})
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	b.Log = zerolog.New(&logged).Level(zerolog.DebugLevel)
	for range 3 { // a heartbeat's check reads the last event again and again
		ev, seq, err = b.LastEvent(t.Context(), subject)
		if err != nil || ev != nil || seq != ack.Sequence {
			t.Fatalf("malformed last message: %v, %d, %v; want no event at %d", ev, seq, err, ack.Sequence)
		}
	}
	if n := strings.Count(logged.String(), "does not decode"); n != 1 {
		t.Errorf("the malformed message was logged %d times, want once:\n%s", n, logged.String())
	}
}

func TestPublishWithAFence(t *testing.T) {
	b := bustest.Start(t).Bus("test")
	subject := events.ExperimentSubjects("e4")
	first := publish(t, b, report(b, "e4", 1))
	if _, err := b.Publish(t.Context(), report(b, "e4", 2), bus.Fence{Subject: subject, Seq: first}); err != nil {
		t.Fatalf("a fence that holds: %v", err)
	}
	_, err := b.Publish(t.Context(), report(b, "e4", 3), bus.Fence{Subject: subject, Seq: first})
	if !bus.Fenced(err) {
		t.Fatalf("a stale fence: %v, want Fenced", err)
	}
	if _, err := b.Publish(t.Context(), report(b, "e5", 1), bus.Fence{Subject: events.ExperimentSubjects("e5")}); err != nil {
		t.Fatalf("a fence on an empty subject: %v", err)
	}
}

func TestSubscribeGetsNewEventsAndSurvivesAPanic(t *testing.T) {
	b := bustest.Start(t).Bus("test")
	var h handled
	stop, err := b.Subscribe(events.ExperimentSubjects("e6"), func(ev *events.Event) {
		it := iteration(ev)
		h.add(it, 1)
		if it == 1 {
			panic("handler bug")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := b.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	publish(t, b, report(b, "e6", 1))
	publish(t, b, report(b, "e6", 2))
	bustest.Eventually(t, wait, "both events", func() bool { return h.has("1#1") && h.has("2#1") })
}

type echo struct {
	Text string `json:"text"`
}

func TestRequestAndServe(t *testing.T) {
	srv := bustest.Start(t)
	server, client := srv.Bus("server"), srv.Bus("client")
	var reply echo
	if err := client.Request(t.Context(), "test.echo", echo{Text: "hi"}, &reply); !errors.Is(err, bus.ErrNoResponders) {
		t.Fatalf("nobody serving: %v, want ErrNoResponders", err)
	}
	stop, err := server.Serve(t.Context(), "test.echo", "echoers", func(_ context.Context, req []byte) any {
		if string(req) == `{"text":"boom"}` {
			panic("handler bug")
		}
		return echo{Text: "echo " + string(req)}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := client.Request(ctx, "test.echo", echo{Text: "boom"}, &reply); err == nil {
		t.Fatal("a panicking handler answered")
	}
	if err := client.Request(t.Context(), "test.echo", echo{Text: "hi"}, &reply); err != nil || reply.Text != `echo {"text":"hi"}` {
		t.Fatalf("Request = %+v, %v", reply, err)
	}
}

func TestRegisterAnswersPingAndEndpoints(t *testing.T) {
	srv := bustest.Start(t)
	server, client := srv.Bus("server"), srv.Bus("client")
	stop, err := server.Register(t.Context(), "tester", "a test service", bus.Endpoint{
		Subject: "test.svc.hello",
		Handle:  func(_ context.Context, req []byte) any { return echo{Text: "hello " + string(req)} },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := srv.Conn().Request("$SRV.PING.tunejet-tester", nil, wait); err != nil {
		t.Fatalf("ping: %v", err)
	}
	var reply echo
	if err := client.Request(t.Context(), "test.svc.hello", "you", &reply); err != nil || reply.Text != `hello "you"` {
		t.Fatalf("Request = %+v, %v", reply, err)
	}
}

func TestLoopsRecoverAPanic(t *testing.T) {
	var loops bus.Loops
	log := zerolog.New(zerolog.NewTestWriter(t))
	ran := make(chan struct{})
	loops.Start(t.Context(), "exp", "loop failed", log, func(context.Context) error { panic("loop bug") })
	loops.Wait()
	// The experiment can be followed again.
	loops.Start(t.Context(), "exp", "loop failed", log, func(context.Context) error { close(ran); return nil })
	loops.Wait()
	select {
	case <-ran:
	default:
		t.Fatal("the loop did not run again after a panic")
	}
}

func TestCheckpointsOpensTheBucket(t *testing.T) {
	b := bustest.Start(t).Bus("test")
	obs, err := b.Checkpoints(t.Context(), "e7")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(t.Context(), "x", []byte("data")); err != nil {
		t.Fatal(err)
	}
	again, err := b.Checkpoints(t.Context(), "e7")
	if err != nil {
		t.Fatal(err)
	}
	if data, err := again.GetBytes(t.Context(), "x"); err != nil || string(data) != "data" {
		t.Fatalf("GetBytes = %q, %v", data, err)
	}
}

// TestFollowGoesOnAfterALostConsumer: Follow creates its consumer again
// when it is lost, from the message after the last it sent: nothing is
// missed, nothing sent twice.
func TestFollowGoesOnAfterALostConsumer(t *testing.T) {
	srv := bustest.Start(t)
	b := srv.Bus("test")
	publish(t, b, report(b, "e8", 1))
	publish(t, b, report(b, "e8", 2))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	msgs := b.Follow(ctx, bus.Consumer{Name: "f1", Filter: events.ExperimentSubjects("e8"), AckWait: time.Minute})
	next := func() *bus.Delivery {
		t.Helper()
		select {
		case d := <-msgs:
			return d
		case <-time.After(time.Minute):
			t.Fatal("no message within a minute")
			return nil
		}
	}
	if d1, d2 := next(), next(); iteration(d1.Event) != 1 || iteration(d2.Event) != 2 || !d2.Last {
		t.Fatalf("got iterations %d, %d (last %v); want 1, 2 and the second last", iteration(d1.Event), iteration(d2.Event), d2.Last)
	}
	if err := srv.JetStream().DeleteConsumer(t.Context(), bus.StreamName, "f1"); err != nil {
		t.Fatal(err)
	}
	publish(t, b, report(b, "e8", 3))
	if d := next(); iteration(d.Event) != 3 {
		t.Fatalf("after the consumer was lost: iteration %d, want 3", iteration(d.Event))
	}
}

// countingHold is a hold of countingAdmit.
type countingHold struct{ a *countingAdmit }

func (h countingHold) Release() {
	h.a.mu.Lock()
	defer h.a.mu.Unlock()
	h.a.held--
	h.a.released++
}

// countingAdmit admits up to n messages at once and counts its holds.
type countingAdmit struct {
	slots                 func(context.Context) (bus.Hold, error)
	mu                    sync.Mutex
	held, released, most  int
	handling, mostHandled int
}

func (a *countingAdmit) admit(ctx context.Context) (bus.Hold, error) {
	s, err := a.slots(ctx)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held++
	a.most = max(a.most, a.held)
	// The count goes down before the slot is free: else an admit taking
	// the freed slot at once would count one hold too many.
	return multiHold{countingHold{a}, s}, nil
}

type multiHold []bus.Hold

func (m multiHold) Release() {
	for _, h := range m {
		h.Release()
	}
}

// TestConsumeAdmit: with Admit, two messages are handled at once, each
// handler sees its hold, and every hold is released once its handler
// returned.
func TestConsumeAdmit(t *testing.T) {
	b := bustest.Start(t).Bus("test")
	for it := 1; it <= 4; it++ {
		publish(t, b, report(b, "e1", it))
	}
	a := &countingAdmit{slots: bus.Slots(2)}
	both := make(chan struct{})
	var once sync.Once
	var h handled
	consume(t, b, bus.Consumer{Name: "c1", Filter: events.ExperimentSubjects("e1"), AckWait: time.Minute, Admit: a.admit}, func(_ context.Context, d *bus.Delivery) error {
		if d.Hold == nil {
			t.Error("a handler without its hold")
		}
		a.mu.Lock()
		a.handling++
		a.mostHandled = max(a.mostHandled, a.handling)
		if a.handling == 2 {
			once.Do(func() { close(both) })
		}
		a.mu.Unlock()
		<-both // the first two wait for each other: two run at once
		a.mu.Lock()
		a.handling--
		a.mu.Unlock()
		h.add(iteration(d.Event), d.Num)
		return nil
	})
	bustest.Eventually(t, 10*time.Second, "all four messages handled and their holds released", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return h.count(1)+h.count(2)+h.count(3)+h.count(4) == 4 && a.released >= 4
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.most > 2 || a.mostHandled != 2 {
		t.Fatalf("holds at once %d (want <= 2), handlers at once %d (want 2)", a.most, a.mostHandled)
	}
}

// noHold is a Hold that holds nothing.
type noHold struct{}

func (noHold) Release() {}

// TestConsumeHandsOnAMessageFetchedAsItsContextEnds: a message the server
// handed out to a fetch whose context ended meanwhile is handled and
// settled, not dropped: with max_failures 0 its one delivery is the
// trial's only attempt, and a dropped one ends the trial ERROR after the
// ack wait with no runner having seen it.
func TestConsumeHandsOnAMessageFetchedAsItsContextEnds(t *testing.T) {
	srv := bustest.Start(t)
	b := srv.Bus("test")
	publish(t, b, report(b, "e7", 1))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	admitted := 0
	c := bus.Consumer{
		Name: "c7", Filter: events.ExperimentSubjects("e7"), AckWait: time.Minute, MaxDeliver: 1, NoWait: true,
		Admit: func(ctx context.Context) (bus.Hold, error) {
			if admitted++; admitted > 1 {
				return nil, ctx.Err()
			}
			cancel() // the run ends as this fetch goes out
			return noHold{}, nil
		},
	}
	var h handled
	err := b.Consume(ctx, c, func(_ context.Context, d *bus.Delivery) error {
		h.add(iteration(d.Event), d.Num)
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume returned %v, want context.Canceled", err)
	}
	if !h.has("1#1") {
		t.Errorf("the fetched message was not handled (handled %v)", h.seen)
	}
	cons, err := srv.JetStream().Consumer(t.Context(), bus.StreamName, "c7")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.NumPending != 0 {
		t.Errorf("the consumer holds %d messages awaiting an ack and %d pending; want the one message settled", info.NumAckPending, info.NumPending)
	}
}
