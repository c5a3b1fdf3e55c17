package events_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
)

func TestParseFailFast(t *testing.T) {
	tests := []struct {
		in   any
		want events.FailFast
	}{
		{nil, events.FailFastOff},
		{false, events.FailFastOff},
		{true, events.FailFastOn},
		{"raise", events.FailFastRaise},
		{"RAISE", events.FailFastRaise},
		{"Raise", events.FailFastRaise},
	}
	for _, tt := range tests {
		got, err := events.ParseFailFast(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseFailFast(%#v) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestParseFailFastRayError: anything else gets Ray's ValueError text.
func TestParseFailFastRayError(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{"true", "fail_fast must be one of {bool, 'raise'}. Got true."},
		{"fail", "fail_fast must be one of {bool, 'raise'}. Got fail."},
		{"", "fail_fast must be one of {bool, 'raise'}. Got ."},
		{1.0, "fail_fast must be one of {bool, 'raise'}. Got 1."},
		{[]any{"raise"}, "fail_fast must be one of {bool, 'raise'}. Got [raise]."},
	}
	for _, tt := range tests {
		_, err := events.ParseFailFast(tt.in)
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParseFailFast(%#v) error = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestFailFastJSON(t *testing.T) {
	type wrapper struct {
		FailFast events.FailFast `json:"fail_fast"`
	}
	tests := []struct {
		in       string
		want     events.FailFast
		marshals string
	}{
		{`{"fail_fast": false}`, events.FailFastOff, `{"fail_fast":false}`},
		{`{"fail_fast": true}`, events.FailFastOn, `{"fail_fast":true}`},
		{`{"fail_fast": "raise"}`, events.FailFastRaise, `{"fail_fast":"raise"}`},
		{`{"fail_fast": "RAISE"}`, events.FailFastRaise, `{"fail_fast":"raise"}`},
		{`{"fail_fast": null}`, events.FailFastOff, `{"fail_fast":false}`},
		{`{}`, events.FailFastOff, `{"fail_fast":false}`},
	}
	for _, tt := range tests {
		var w wrapper
		if err := json.Unmarshal([]byte(tt.in), &w); err != nil {
			t.Errorf("Unmarshal %s: %v", tt.in, err)
			continue
		}
		if w.FailFast != tt.want {
			t.Errorf("Unmarshal %s = %q, want %q", tt.in, w.FailFast, tt.want)
		}
		b, err := json.Marshal(w)
		if err != nil {
			t.Errorf("Marshal %q: %v", w.FailFast, err)
			continue
		}
		if string(b) != tt.marshals {
			t.Errorf("Marshal %q = %s, want %s", w.FailFast, b, tt.marshals)
		}
	}
	for _, in := range []string{`{"fail_fast": "yes"}`, `{"fail_fast": 0}`, `{"fail_fast": "true"}`} {
		var w wrapper
		err := json.Unmarshal([]byte(in), &w)
		if err == nil {
			t.Errorf("Unmarshal %s: no error", in)
			continue
		}
		if got := err.Error(); !strings.HasPrefix(got, "fail_fast must be one of {bool, 'raise'}. Got ") {
			t.Errorf("Unmarshal %s: error %q, want Ray's text", in, got)
		}
	}
}

// FailureConfig is the one place max_failures is read: how many attempts
// the work consumer delivers, and when a trial may not be tried again.
func TestFailureConfigRules(t *testing.T) {
	tests := []struct {
		maxFailures, attempts int
		exhaustedAt           int // the first failure count that is exhausted; 0: never
	}{
		{0, 1, 1},
		{2, 3, 3},
		{-1, -1, 0},
	}
	for _, tc := range tests {
		c := events.FailureConfig{MaxFailures: tc.maxFailures}
		if got := c.Attempts(); got != tc.attempts {
			t.Errorf("max_failures %d: %d attempts, want %d", tc.maxFailures, got, tc.attempts)
		}
		for failures := 0; failures <= 5; failures++ {
			want := tc.exhaustedAt > 0 && failures >= tc.exhaustedAt
			if got := c.Exhausted(failures); got != want {
				t.Errorf("max_failures %d, %d failures: exhausted %v, want %v", tc.maxFailures, failures, got, want)
			}
		}
	}
	if got := (events.FailureConfig{}).HeartbeatTimeout(); got != 3*time.Second {
		t.Errorf("default heartbeat timeout %v, want 3s", got)
	}
	if got := (events.FailureConfig{HeartbeatTimeoutS: 1.5}).HeartbeatTimeout(); got != 1500*time.Millisecond {
		t.Errorf("heartbeat timeout %v, want 1.5s", got)
	}
}

// TestObjectivesRules: several objectives on the wire are two or more
// distinct metrics with a mode each, and never beside metric and mode.
func TestObjectivesRules(t *testing.T) {
	spec := func(tc events.TuneConfig) *events.ExperimentSpec {
		tc.NumSamples = 1
		return &events.ExperimentSpec{Name: "exp", Trainable: events.Trainable{Name: "fn"}, TuneConfig: tc}
	}
	tests := []struct {
		name string
		tc   events.TuneConfig
		want string // in the error; "" for none
	}{
		{"two", events.TuneConfig{Metrics: []string{"loss", "ms"}, Modes: []string{"min", "max"}}, ""},
		{"one", events.TuneConfig{Metrics: []string{"loss"}, Modes: []string{"min"}}, "two or more metrics"},
		{"modes short", events.TuneConfig{Metrics: []string{"loss", "ms"}, Modes: []string{"min"}}, "a mode for each of the 2 metrics, got 1"},
		{"bad mode", events.TuneConfig{Metrics: []string{"loss", "ms"}, Modes: []string{"min", "avg"}}, `modes[1]`},
		{"twice", events.TuneConfig{Metrics: []string{"loss", "loss"}, Modes: []string{"min", "min"}}, "distinct"},
		{"beside metric", events.TuneConfig{Metric: "acc", Metrics: []string{"loss", "ms"}, Modes: []string{"min", "min"}}, "given with metric or mode"},
		{"modes alone", events.TuneConfig{Modes: []string{"min", "min"}}, "given without metrics"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := spec(tt.tc).Validate()
			if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestObjectiveHelpers: the first objective, a metric's mode, a value as
// a minimized objective compares it, and a result's finite values.
func TestObjectiveHelpers(t *testing.T) {
	one := events.TuneConfig{Metric: "loss", Mode: "min"}
	several := events.TuneConfig{Metrics: []string{"loss", "acc"}, Modes: []string{"min", "max"}}
	if p := several.Primary(); p != (events.Objective{Metric: "loss", Mode: "min"}) {
		t.Errorf("Primary of several = %+v, want loss min", p)
	}
	if p := (&events.TuneConfig{}).Primary(); p != (events.Objective{}) {
		t.Errorf("Primary of none = %+v, want zero", p)
	}
	if m := several.ModeOf("acc"); m != "max" {
		t.Errorf("ModeOf(acc) = %q, want max", m)
	}
	if m := one.ModeOf("acc"); m != "" {
		t.Errorf("ModeOf a metric not optimized = %q, want empty", m)
	}
	if v := (events.Objective{Metric: "acc", Mode: "max"}).Minimized(0.75); v != -0.75 {
		t.Errorf("Minimized of a max objective = %v, want -0.75", v)
	}
	objs := several.Objectives()
	got, ok := events.ObjectiveValues(map[string]any{"loss": 0.5, "eval": map[string]any{"x": 1.0}, "acc": 0.25}, objs)
	if !ok || len(got) != 2 || got[0] != 0.5 || got[1] != 0.25 {
		t.Errorf("ObjectiveValues = %v, %v; want [0.5 0.25] raw", got, ok)
	}
	for _, r := range []map[string]any{{"loss": 0.5}, {"loss": 0.5, "acc": math.NaN()}, {"loss": 0.5, "acc": "x"}} {
		if _, ok := events.ObjectiveValues(r, objs); ok {
			t.Errorf("ObjectiveValues(%v) ok; want a missing, NaN or non-number value refused", r)
		}
	}
}
