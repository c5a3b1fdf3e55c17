package runner

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt"
)

// describe writes an outcome as "type[details] ... -> settle".
func describe(o outcome) string {
	var parts []string
	for _, p := range o.Publish {
		switch p := p.(type) {
		case *events.TrialStarted:
			parts = append(parts, fmt.Sprintf("started(%d)", p.Attempt))
		case *events.TrialCompleted:
			parts = append(parts, fmt.Sprintf("completed(%d,%s,%s)", p.Attempt, p.Status, p.Reason))
		case *events.TrialFailed:
			parts = append(parts, fmt.Sprintf("failed(%d,%s,%s,final=%t,counted=%t)", p.Attempt, p.Cause, p.ErrorType, p.Final, p.Counted))
		case *events.TrialPaused:
			parts = append(parts, fmt.Sprintf("paused(%d,%s)", p.Attempt, p.Reason))
		}
	}
	s := strings.Join(parts, " ") + " -> " + o.Settle.String()
	if o.Settle == nak {
		s += fmt.Sprintf(" after %v", o.Delay)
	}
	return strings.TrimSpace(s)
}

func TestDecideOutcome(t *testing.T) {
	crash := errors.New("exit status 1")
	base := situation{Trial: "t", Runner: "r", Attempt: 3, Tries: 1, MaxFailures: 0, Started: true}
	with := func(f func(*situation)) situation { s := base; f(&s); return s }
	tests := []struct {
		name string
		s    situation
		want string
	}{
		{"finished", base, "completed(3,TERMINATED,finished) -> ack"},
		{"stopped by the controller", with(func(s *situation) { s.StopReason = "time_budget" }),
			"completed(3,TERMINATED,time_budget) -> ack"},
		{"stopped by a criterion while the runner stops too", with(func(s *situation) { s.StopReason = "stop_criteria"; s.ShuttingDown = true }),
			"completed(3,TERMINATED,stop_criteria) -> ack"},
		{"stopped before it ran: started, then ended", with(func(s *situation) { s.Started = false; s.StopReason = "stop" }),
			"started(3) completed(3,TERMINATED,stop) -> ack"},
		{"paused by the scheduler", with(func(s *situation) { s.StopReason = "hyperband"; s.Paused = true }),
			"paused(3,hyperband) -> ack"},
		{"paused while the trainable failed: paused all the same", with(func(s *situation) { s.StopReason = "pbt"; s.Paused = true; s.Err = crash }),
			"paused(3,pbt) -> ack"},
		{"paused before it ran (its runner died pausing it): started, then paused", with(func(s *situation) { s.Started = false; s.StopReason = "median"; s.Paused = true }),
			"started(3) paused(3,median) -> ack"},
		{"paused while the runner stops: paused, not handed back", with(func(s *situation) { s.StopReason = "pbt"; s.Paused = true; s.ShuttingDown = true }),
			"paused(3,pbt) -> ack"},
		{"the controller had ended it: stale work", with(func(s *situation) { s.Started = false; s.Ended = true }), "-> ack"},
		{"superseded: says nothing, settles nothing", with(func(s *situation) { s.Superseded = true; s.Err = crash }), "-> leave"},
		{"the last allowed failure ends it", with(func(s *situation) { s.Err = crash }),
			"failed(3,error,Error,final=true,counted=true) -> term"},
		{"a failure with attempts left is retried with backoff", with(func(s *situation) { s.Err = crash; s.MaxFailures = 2; s.Tries = 2 }),
			"failed(3,error,Error,final=false,counted=true) -> nak after 400ms"},
		{"unlimited retries", with(func(s *situation) { s.Err = crash; s.MaxFailures = -1; s.Tries = 50; s.Attempt = 50 }),
			"failed(50,error,Error,final=false,counted=true) -> nak after 5s"},
		{"a checkpoint gone everywhere ends it whatever the budget", with(func(s *situation) { s.Err = fmt.Errorf("resume: %w", ckpt.ErrGone); s.MaxFailures = -1 }),
			"failed(3,error,CheckpointGone,final=true,counted=true) -> term"},
		{"preempted while running: handed back, not counted", with(func(s *situation) { s.ShuttingDown = true; s.Err = crash }),
			"failed(3,preempted,,final=false,counted=false) -> ack"},
		{"preempted, counted when configured", with(func(s *situation) { s.ShuttingDown = true; s.CountPreemption = true }),
			"failed(3,preempted,,final=false,counted=true) -> ack"},
		{"preempted before it started: no delivery spent", with(func(s *situation) { s.ShuttingDown = true; s.Started = false; s.Err = errors.New("context canceled") }),
			"started(3) failed(3,preempted,,final=false,counted=false) -> ack"},
		{"could not start: another delivery tries", with(func(s *situation) { s.Started = false; s.Err = errors.New("no responders") }),
			"-> nak after 400ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := describe(decide(tc.s)); got != tc.want {
				t.Errorf("decide(%+v)\n got %s\nwant %s", tc.s, got, tc.want)
			}
		})
	}
}

func TestBackoffGrowsToItsCap(t *testing.T) {
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		if got := backoff(i + 1); got != w {
			t.Errorf("backoff(%d) = %v, want %v", i+1, got, w)
		}
	}
}
