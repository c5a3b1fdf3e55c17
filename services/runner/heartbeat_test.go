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
	cons, err := b.EnsureWorkConsumer(t.Context(), "exp", bus.WorkConfig{AckWait: 30})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, b, events.WriterController, &events.TrialScheduled{
		TrialID: "t1", TrialName: "t1", DirName: "t1", Config: map[string]any{},
		Trainable: events.Trainable{Name: "f"}, HeartbeatTimeoutS: 30,
	})
	msg, err := cons.Next()
	if err != nil {
		t.Fatal(err)
	}
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
