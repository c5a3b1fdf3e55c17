package sched

import (
	"testing"
)

func newMedian(t *testing.T, mutate func(*MedianConfig)) *Median {
	t.Helper()
	cfg := DefaultMedianConfig()
	cfg.Objective = Objective{Metric: "m", Mode: Max}
	cfg.TimeAttr, cfg.GracePeriod, cfg.MinSamplesRequired = "t", 1, 2
	if mutate != nil {
		mutate(&cfg)
	}
	m, err := NewMedianStoppingRule(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMedianRule replays a fixed history through Ray's rule with
// grace_period 1 and min_samples_required 2.
func TestMedianRule(t *testing.T) {
	m := newMedian(t, nil)
	// A: 1.0 2.0 3.0 at t 1 2 3; B: 0.5 1.5 2.5. A's and B's own results
	// find too few others (A at 1: none; B at 1: only A) and, with nobody
	// waiting, continue.
	for _, r := range []Result{result("A", 1, 1), result("A", 2, 2), result("A", 3, 3),
		result("B", 1, 0.5), result("B", 2, 1.5), result("B", 3, 2.5)} {
		if d := m.Result(r, Context{})[0]; d.Action != Continue {
			t.Fatalf("%s: %s (%s)", r.Trial, d.Action, d.Reason)
		}
	}
	tests := []struct {
		res    Result
		want   Action
		median float64 // 0: not judged
	}{
		// C at 1: A and B reached 1; means over [1, 1] are 1.0 and 0.5, median
		// 0.75; C's best 0.2 < 0.75.
		{result("C", 1, 0.2), Stop, 0.75},
		// D at 0.5 is inside the grace period.
		{result("D", 0.5, 9), Continue, 0},
		// D at 2: A and B reached 2 (C's last is 1); means over [1, 2] are
		// (1+2)/2 = 1.5 and (0.5+1.5)/2 = 1.0, median 1.25; D's best counts
		// its grace-period result: max(9, 1) = 9 >= 1.25.
		{result("D", 2, 1), Continue, 1.25},
		// E at 3: means over [1, 3] are A (1+2+3)/3 = 2 and B 1.5, median
		// 1.75; best 1.75 is not strictly worse.
		{result("E", 3, 1.75), Continue, 1.75},
		// E at 3.5: A and B last reported at 3 and E itself does not count:
		// no sample, and with nobody waiting E continues.
		{result("E", 3.5, 0), Continue, 0},
	}
	for _, tt := range tests {
		d := m.Result(tt.res, Context{})[0]
		if d.Action != tt.want {
			t.Fatalf("%s at %v: %s, want %s (%s)", tt.res.Trial, tt.res.Metrics["t"], d.Action, tt.want, d.Reason)
		}
		if judged := d.Median != nil && d.Median.Median != nil; judged != (tt.median != 0) ||
			(judged && !near(float64(*d.Median.Median), tt.median)) {
			t.Fatalf("%s at %v: median inputs %+v, want median %v", tt.res.Trial, tt.res.Metrics["t"], d.Median, tt.median)
		}
	}
	want := "stopped at t 1: best 0.2 is worse than the median 0.75 of 2 other trials' running means [0.5 1]"
	if d := newMedianStopped(t); d.Reason != want {
		t.Errorf("reason\n got %q\nwant %q", d.Reason, want)
	}
}

func newMedianStopped(t *testing.T) Decision {
	m := newMedian(t, nil)
	m.Result(result("A", 1, 1), Context{})
	m.Result(result("B", 1, 0.5), Context{})
	return m.Result(result("C", 1, 0.2), Context{})[0]
}

// TestMedianMinMode: with mode min a best loss above the median of the
// running means stops the trial.
func TestMedianMinMode(t *testing.T) {
	m := newMedian(t, func(c *MedianConfig) { c.Mode = Min })
	m.Result(result("A", 1, 1), Context{})
	m.Result(result("A", 2, 3), Context{})
	m.Result(result("B", 2, 2), Context{})
	// C at 2: means over [1, 2] are A (1+3)/2 = 2 and B 2, median 2. C's best
	// (lowest) loss 2.5 > 2: stopped; 2 would not be.
	if d := m.Result(result("C", 2, 2.5), Context{})[0]; d.Action != Stop || !near(float64(*d.Median.Median), 2) {
		t.Errorf("C: %+v", d)
	}
	if d := m.Result(result("D", 2, 2), Context{})[0]; d.Action != Continue {
		t.Errorf("D: %s", d.Action)
	}
}

// TestMedianYield: a trial that cannot be judged yields its slot when
// others wait and min_time_slice has passed since its last yield.
func TestMedianYield(t *testing.T) {
	m := newMedian(t, func(c *MedianConfig) { c.MinTimeSlice = 1 })
	wait := Context{Waiting: true}
	steps := []struct {
		res  Result
		ctx  Context
		want Action
	}{
		{result("A", 2, 1), Context{}, Continue}, // nobody waits
		{result("A", 3, 1), wait, Pause},         // 3 - (-inf) > 1
		{result("A", 3.5, 1), wait, Continue},    // 3.5 - 3 = 0.5 <= 1
		{result("A", 4.5, 1), wait, Pause},       // 4.5 - 3 = 1.5 > 1
	}
	for i, s := range steps {
		if d := m.Result(s.res, s.ctx)[0]; d.Action != s.want {
			t.Errorf("step %d: %s, want %s (%s)", i, d.Action, s.want, d.Reason)
		}
	}
}

// TestMedianSoftStop: without hard_stop a trial worse than the median is
// paused, and runs on unjudged when resumed.
func TestMedianSoftStop(t *testing.T) {
	m := newMedian(t, func(c *MedianConfig) { c.HardStop = false })
	m.Result(result("A", 1, 1), Context{})
	m.Result(result("B", 1, 1), Context{})
	if d := m.Result(result("C", 1, 0), Context{})[0]; d.Action != Pause {
		t.Fatalf("C: %s, want Pause", d.Action)
	}
	m.Resumed("C")
	if d := m.Result(result("C", 2, -5), Context{})[0]; d.Action != Continue || d.Median != nil {
		t.Errorf("C resumed: %+v, want an unjudged Continue", d)
	}
	if n := len(m.st.Results["C"]); n != 1 {
		t.Errorf("C has %d results recorded, want 1: a stopped trial's results are not kept", n)
	}
}

// TestMedianComplete: a completed trial's final result is recorded and
// keeps counting.
func TestMedianComplete(t *testing.T) {
	m := newMedian(t, func(c *MedianConfig) { c.MinSamplesRequired = 1 })
	m.Result(result("A", 1, 1), Context{})
	m.Complete(result("A", 5, 4))
	// B at 5: A's last result is at 5; its mean over [1, 5] is (1+4)/2 = 2.5.
	d := m.Result(result("B", 5, 2), Context{})[0]
	if d.Action != Stop || !near(float64(*d.Median.Median), 2.5) {
		t.Errorf("B: %+v", d)
	}
}
