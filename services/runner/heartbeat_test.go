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
	if _, err := b.EnsureWorkConsumer(t.Context(), "exp", bus.WorkConfig{AckWait: 30}); err != nil {
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
