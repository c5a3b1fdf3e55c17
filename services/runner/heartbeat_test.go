package runner

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// TestHeartbeatStopsWhenOvertaken: the heartbeat asks after each beat
// whether a newer attempt has started, and once one has it says so once
// and beats no more.
func TestHeartbeatStopsWhenOvertaken(t *testing.T) {
	b := bustest.Start(t).Bus("runner")
	if err := b.EnsureWorkConsumer(t.Context(), "exp", bus.WorkConfig{AckWait: 30}); err != nil {
		t.Fatal(err)
	}
	publish(t, b, events.WriterController, &events.TrialScheduled{
		TrialID: "t1", TrialName: "t1", DirName: "t1", Config: map[string]any{},
		Trainable: events.Trainable{Name: "f"}, HeartbeatTimeoutS: 30,
	})
	msg := nextWork(t, b)
	var asked atomic.Int32
	overtaken := make(chan struct{})
	stop := heartbeat(msg, 0.03, testLog(t), func() bool { return asked.Add(1) == 3 }, func() { close(overtaken) })
	select {
	case <-overtaken:
	case <-time.After(waitLimit):
		t.Fatalf("not overtaken within %v", waitLimit)
	}
	stop()
	if n := asked.Load(); n != 3 {
		t.Errorf("asked %d times whether overtaken, want 3: the heartbeat goes on after it was overtaken", n)
	}
}

// nextWork takes the next piece of the experiment "exp"'s work.
func nextWork(t *testing.T, b *bus.Bus) *bus.Delivery {
	t.Helper()
	q, err := b.WorkQueue(t.Context(), "exp")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := q.Next(t.Context(), waitLimit)
	if err != nil || msg == nil {
		t.Fatalf("no work within %v: %v", waitLimit, err)
	}
	return msg
}

// countingDelivery counts the heartbeats sent on a real delivery.
type countingDelivery struct {
	*bus.Delivery
	beats atomic.Int32
}

func (d *countingDelivery) Progress() error {
	d.beats.Add(1)
	return d.Delivery.Progress()
}

// TestHeartbeatNotDelayedBySlowCheck: the check whether the attempt was
// overtaken reads the log, which is slow under load; the beats go on
// meanwhile, else the gap between two beats grows past the heartbeat
// timeout and the work of a live runner is handed out again.
func TestHeartbeatNotDelayedBySlowCheck(t *testing.T) {
	b := bustest.Start(t).Bus("runner")
	if err := b.EnsureWorkConsumer(t.Context(), "exp", bus.WorkConfig{AckWait: 30}); err != nil {
		t.Fatal(err)
	}
	publish(t, b, events.WriterController, &events.TrialScheduled{
		TrialID: "t1", TrialName: "t1", DirName: "t1", Config: map[string]any{},
		Trainable: events.Trainable{Name: "f"}, HeartbeatTimeoutS: 30,
	})
	msg := &countingDelivery{Delivery: nextWork(t, b)}
	release := make(chan struct{})
	var asked atomic.Int32
	stop := heartbeat(msg, 0.03, testLog(t), func() bool {
		asked.Add(1)
		<-release // a log read that does not answer
		return false
	}, func() { t.Error("overtaken, but no newer attempt started") })
	defer stop()
	defer close(release)
	bustest.Eventually(t, waitLimit, "a check whether overtaken", func() bool { return asked.Load() > 0 })
	from := msg.beats.Load()
	bustest.Eventually(t, waitLimit, "3 heartbeats while the check hangs", func() bool {
		return msg.beats.Load() >= from+3
	})
}
