package stopper

import (
	"math"
	"testing"
)

// step is one result of a trial and whether the stopper should stop the
// trial after it.
type step struct {
	trial  string
	result map[string]any
	stop   bool
}

// loss is a result with the metric loss, or without it for nil.
func loss(v any) map[string]any {
	if v == nil {
		return map[string]any{}
	}
	return map[string]any{"loss": v}
}

// steps makes the steps of trial "a" reporting losses, stopping after the
// results numbered in stopAt (from 1).
func steps(losses []any, stopAt ...int) []step {
	out := make([]step, len(losses))
	for i, v := range losses {
		out[i] = step{trial: "a", result: loss(v)}
	}
	for _, n := range stopAt {
		out[n-1].stop = true
	}
	return out
}

// repeat is n times v.
func repeat(v any, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// cat concatenates lists of values.
func cat(lists ...[]any) []any {
	var out []any
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// run feeds the steps to s and checks each decision.
func run(t *testing.T, s Stopper, ss []step) {
	t.Helper()
	for i, st := range ss {
		d := s.StopTrial(st.trial, st.result)
		if d.Stop != st.stop {
			t.Fatalf("result %d (%s %v): stop = %v (%q), want %v", i+1, st.trial, st.result, d.Stop, d.Reason, st.stop)
		}
		if d.Stop == (d.Reason == "") {
			t.Fatalf("result %d: decision %+v: a stop needs a reason, and only a stop has one", i+1, d)
		}
	}
}

func TestMaximumIteration(t *testing.T) {
	tests := []struct {
		name  string
		max   int
		steps []step
	}{
		{"stops at max_iter", 3, steps(repeat(1.0, 4), 3, 4)},
		{"max_iter 1 stops at the first result", 1, steps(repeat(1.0, 1), 1)},
		{"counts results, with or without the metric", 2, steps([]any{nil, "x"}, 2)},
		{"counts each trial on its own", 2, []step{
			{"a", loss(1), false}, {"b", loss(1), false}, {"a", loss(1), true}, {"c", loss(1), false}, {"b", loss(1), true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := MaximumIteration(tt.max)
			run(t, s, tt.steps)
			if d := s.StopAll(1e9); d.Stop {
				t.Errorf("StopAll = %+v, want no stop", d)
			}
		})
	}
}

func TestMaximumIterationReason(t *testing.T) {
	s := MaximumIteration(1)
	if got, want := s.StopTrial("a", nil).Reason, "maximum iteration: 1 results reached max_iter 1"; got != want {
		t.Errorf("reason = %q, want %q", got, want)
	}
}

func TestTrialPlateau(t *testing.T) {
	thr := func(v float64) *float64 { return &v }
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name  string
		set   func(s *TrialPlateauStopper)
		steps []step
	}{
		{"constant values stop after grace_period and num_results", nil, steps(repeat(1.0, 4), 4)},
		{"grace_period longer than num_results", func(s *TrialPlateauStopper) { s.GracePeriod = 6 },
			steps(repeat(1.0, 6), 6)},
		{"num_results longer than grace_period", func(s *TrialPlateauStopper) { s.GracePeriod = 1 },
			steps(repeat(1.0, 4), 4)},
		{"grace_period 0 and num_results 1 stop at once", func(s *TrialPlateauStopper) { s.GracePeriod, s.NumResults = 0, 1 },
			steps([]any{3.0}, 1)},
		{"the window slides", nil, steps([]any{1.0, 2.0, 3.0, 4.0, 4.0, 4.0, 4.0}, 7)},
		{"std equal to the threshold does not stop", func(s *TrialPlateauStopper) { s.Std = 0.5 },
			steps([]any{0.0, 1.0, 0.0, 1.0})},
		{"std just below the threshold stops", func(s *TrialPlateauStopper) { s.Std = 0.5000001 },
			steps([]any{0.0, 1.0, 0.0, 1.0}, 4)},
		{"ints count as numbers", nil, steps([]any{2, 2, 2, int64(2)}, 4)},
		{"a NaN keeps the trial going while in the window", nil,
			steps(cat([]any{1.0, 1.0, nan}, repeat(1.0, 4)), 7)},
		{"a missing metric keeps the trial going while in the window", nil,
			steps(cat([]any{1.0, 1.0, nil}, repeat(1.0, 4)), 7)},
		{"a non-numeric metric keeps the trial going while in the window", nil,
			steps(cat([]any{1.0, 1.0, "n/a"}, repeat(1.0, 4)), 7)},
		{"an infinite metric keeps the trial going while in the window", nil,
			steps(cat([]any{inf}, repeat(1.0, 4)), 5)},
		{"metric_threshold min: not until the latest value is <= it", func(s *TrialPlateauStopper) {
			s.MetricThreshold, s.Mode = thr(0.5), ModeMin
		}, steps(cat(repeat(1.0, 4), repeat(0.4, 4)), 8)},
		{"metric_threshold min: equal is enough", func(s *TrialPlateauStopper) {
			s.MetricThreshold, s.Mode = thr(0.5), ModeMin
		}, steps(repeat(0.5, 4), 4)},
		{"metric_threshold max: not until the latest value is >= it", func(s *TrialPlateauStopper) {
			s.MetricThreshold, s.Mode = thr(0.9), ModeMax
		}, steps(cat(repeat(0.8, 4), repeat(0.95, 4)), 8)},
		{"metric_threshold 0 is a threshold", func(s *TrialPlateauStopper) {
			s.MetricThreshold, s.Mode = thr(0), ModeMax
		}, steps(cat(repeat(-1.0, 4), repeat(0.0, 4)), 8)},
		{"metric_threshold with the latest value missing", func(s *TrialPlateauStopper) {
			s.MetricThreshold, s.Mode = thr(0.5), ModeMin
		}, steps(cat(repeat(0.1, 3), []any{nil}))},
		{"mode without metric_threshold changes nothing", func(s *TrialPlateauStopper) { s.Mode = ModeMax },
			steps(repeat(-5.0, 4), 4)},
		{"trials are counted on their own", nil, []step{
			{"a", loss(1), false}, {"b", loss(1), false}, {"a", loss(1), false}, {"b", loss(1), false},
			{"a", loss(1), false}, {"a", loss(1), true}, {"b", loss(2), false}, {"b", loss(2), false},
		}},
		{"a nested metric is found by its slashed name", func(s *TrialPlateauStopper) { s.Metric = "val/loss" },
			[]step{
				{"a", map[string]any{"val": map[string]any{"loss": 1.0}}, false},
				{"a", map[string]any{"val": map[string]any{"loss": 1.0}}, false},
				{"a", map[string]any{"val/loss": 1.0}, false},
				{"a", map[string]any{"val": map[string]any{"loss": 1.0}}, true},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := TrialPlateau("loss")
			if tt.set != nil {
				tt.set(s)
			}
			if err := Validate(s); err != nil {
				t.Fatal(err)
			}
			run(t, s, tt.steps)
			if d := s.StopAll(1e9); d.Stop {
				t.Errorf("StopAll = %+v, want no stop", d)
			}
		})
	}
}

func TestTrialPlateauReason(t *testing.T) {
	s := TrialPlateau("loss")
	var d Decision
	for _, v := range []float64{0.5, 0.51, 0.5, 0.51} {
		d = s.StopTrial("a", loss(v))
	}
	if want := "plateau: std 0.005 of the last 4 results of loss < 0.01"; d.Reason != want {
		t.Errorf("reason = %q, want %q", d.Reason, want)
	}
	th := 0.6
	s = TrialPlateau("loss")
	s.MetricThreshold, s.Mode = &th, ModeMin
	for range 4 {
		d = s.StopTrial("a", loss(0.5))
	}
	if want := "plateau: std 0 of the last 4 results of loss < 0.01, and loss 0.5 <= metric_threshold 0.6"; d.Reason != want {
		t.Errorf("reason = %q, want %q", d.Reason, want)
	}
}

func TestExperimentPlateau(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name  string
		set   func(s *ExperimentPlateauStopper)
		steps []step
	}{
		{"fewer than top results never stop", nil, steps(repeat(1.0, 9))},
		{"top results that agree stop", nil, steps(repeat(1.0, 10), 10)},
		{"mode min keeps the smallest", func(s *ExperimentPlateauStopper) { s.Top = 3 },
			steps([]any{5.0, 1.0, 1.0, 1.0}, 4)},
		{"mode min is not fooled by the largest", func(s *ExperimentPlateauStopper) { s.Top = 3 },
			steps([]any{1.0, 5.0, 5.0, 5.0})},
		{"mode max keeps the largest", func(s *ExperimentPlateauStopper) { s.Top, s.Mode = 3, ModeMax },
			steps([]any{1.0, 5.0, 5.0, 5.0}, 4)},
		{"std equal to the threshold stops", func(s *ExperimentPlateauStopper) { s.Top, s.Std = 2, 0.5 },
			steps([]any{0.0, 1.0}, 2)},
		{"patience 2 waits for a second plateaued result", func(s *ExperimentPlateauStopper) { s.Top, s.Patience = 3, 2 },
			steps(repeat(1.0, 4), 4)},
		{"patience 1 stops as 0 does", func(s *ExperimentPlateauStopper) { s.Top, s.Patience = 3, 1 },
			steps(repeat(1.0, 3), 3)},
		{"a better value resets the patience; a worse one counts", func(s *ExperimentPlateauStopper) { s.Top, s.Patience = 3, 2 },
			steps([]any{1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 5.0}, 7)},
		{"a missing metric counts for the patience", func(s *ExperimentPlateauStopper) { s.Top, s.Patience = 3, 2 },
			steps([]any{1.0, 1.0, 1.0, nil}, 4)},
		{"a NaN is not a top value", func(s *ExperimentPlateauStopper) { s.Top = 3 },
			steps([]any{1.0, nan, 1.0, math.Inf(-1), 1.0}, 5)},
		{"results of every trial count", func(s *ExperimentPlateauStopper) { s.Top = 3 }, []step{
			{"a", loss(1), false}, {"b", loss(1), false}, {"c", loss(1), true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ExperimentPlateau("loss")
			if tt.set != nil {
				tt.set(s)
			}
			if err := Validate(s); err != nil {
				t.Fatal(err)
			}
			if d := s.StopAll(0); d.Stop {
				t.Fatalf("StopAll before any result = %+v", d)
			}
			run(t, s, tt.steps)
			last := tt.steps[len(tt.steps)-1].stop
			if d := s.StopAll(0); d.Stop != last {
				t.Errorf("StopAll after the last result = %+v, want stop %v as the trial's answer", d, last)
			}
		})
	}
}

func TestExperimentPlateauReason(t *testing.T) {
	s := ExperimentPlateau("loss")
	s.Top, s.Patience = 2, 2
	var d Decision
	for range 3 {
		d = s.StopTrial("a", loss(0.25))
	}
	want := "experiment plateau: std 0 of the top 2 values of loss <= 0.001 for 2 results (patience 2)"
	if d.Reason != want {
		t.Errorf("reason = %q, want %q", d.Reason, want)
	}
	if all := s.StopAll(0); all != d {
		t.Errorf("StopAll = %+v, want the trial's decision %+v", all, d)
	}
}

func TestTimeout(t *testing.T) {
	tests := []struct {
		now  float64
		stop bool
	}{{0, false}, {3599.5, false}, {3600, true}, {7200, true}}
	s := Timeout(3600)
	for _, tt := range tests {
		if d := s.StopAll(tt.now); d.Stop != tt.stop {
			t.Errorf("StopAll(%v) = %+v, want stop %v", tt.now, d, tt.stop)
		}
	}
	run(t, s, steps(repeat(1.0, 3)))
	if got, want := s.StopAll(3600).Reason, "timeout: 3600 s elapsed, timeout 3600 s"; got != want {
		t.Errorf("reason = %q, want %q", got, want)
	}
}

func TestCombined(t *testing.T) {
	t.Run("stops when any stops", func(t *testing.T) {
		plateau := TrialPlateau("loss")
		plateau.GracePeriod, plateau.NumResults = 1, 2
		s := Combined(MaximumIteration(3), plateau)
		run(t, s, []step{
			{"a", loss(1), false}, {"a", loss(1), true},
			{"b", loss(1), false}, {"b", loss(2), false}, {"b", loss(3), true},
		})
	})
	t.Run("the first that stops answers and the later ones miss the result", func(t *testing.T) {
		second, exp := MaximumIteration(3), ExperimentPlateau("loss")
		exp.Top = 3
		s := Combined(MaximumIteration(2), second, exp)
		run(t, s, []step{{"a", loss(1), false}, {"a", loss(1), true}, {"b", loss(1), false}})
		if n := second.Iterations["a"]; n != 1 {
			t.Errorf("the second stopper counted %d results of a, want 1", n)
		}
		if got := exp.TopValues; len(got) != 2 {
			t.Errorf("the experiment plateau saw top values %v, want the 2 results not stopped before it", got)
		}
	})
	t.Run("StopAll asks each", func(t *testing.T) {
		s := Combined(TrialPlateau("loss"), MaximumIteration(1), Timeout(10))
		if d := s.StopAll(9); d.Stop {
			t.Errorf("StopAll(9) = %+v", d)
		}
		if d := s.StopAll(10); d.Reason != "timeout: 10 s elapsed, timeout 10 s" {
			t.Errorf("StopAll(10) = %+v", d)
		}
	})
	t.Run("empty never stops", func(t *testing.T) {
		s := Combined()
		run(t, s, steps(repeat(1.0, 3)))
		if d := s.StopAll(1e9); d.Stop {
			t.Errorf("StopAll = %+v", d)
		}
	})
}

func TestStd(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{[]float64{1}, 0},
		{[]float64{0, 1, 0, 1}, 0.5},
		{[]float64{2, 4, 4, 4, 5, 5, 7, 9}, 2},
		{[]float64{1e9 + 1, 1e9 + 2, 1e9 + 3}, math.Sqrt(2.0 / 3)},
	}
	for _, tt := range tests {
		if got := std(tt.xs); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("std(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}
