package blobsync

import (
	"testing"
	"time"
)

// TestThrottle is Ray's test_sync_up_if_needed: sync_period 60, a sync at
// t=0, none at t=30, one at t=60.
func TestThrottle(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	th := NewThrottle(60 * time.Second)
	steps := []struct {
		at  time.Duration
		due bool
	}{{0, true}, {30 * time.Second, false}, {60 * time.Second, true}, {90 * time.Second, false}, {121 * time.Second, true}}
	for _, s := range steps {
		now := t0.Add(s.at)
		if got := th.Due(now); got != s.due {
			t.Fatalf("Due(t+%v) = %v, want %v", s.at, got, s.due)
		}
		if s.due {
			th.Mark(now)
		}
	}
	th.Reset()
	if !th.Due(t0.Add(122 * time.Second)) {
		t.Fatal("not due right after Reset")
	}
}

func TestThrottleMarksOnlyWhenRun(t *testing.T) {
	t0 := time.Unix(0, 0)
	th := NewThrottle(time.Minute)
	if !th.Due(t0) {
		t.Fatal("first call not due")
	}
	// The sync did not run (no Mark): it stays due.
	if !th.Due(t0.Add(time.Second)) {
		t.Fatal("not due although no sync ran")
	}
}
