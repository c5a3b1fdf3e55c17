package sched_test

import (
	"testing"

	"github.com/tunejet/tunejet/internal/sched"
	"github.com/tunejet/tunejet/internal/show"
)

// TestDescribeExploit: a PBT exploit is described with its quantiles and
// the donor's new config as every other config reads (show.JSON).
func TestDescribeExploit(t *testing.T) {
	d := sched.Decision{Action: sched.Exploit, Reason: "perturbation at t 4: exploits b", Exploit: &sched.ExploitInputs{
		Lower: []sched.Ranked{{Trial: "a", Reward: 0.1}}, Upper: []sched.Ranked{{Trial: "b", Reward: 0.9}, {Trial: "c", Reward: 1}},
		Source: "b", NewConfig: map[string]any{"lr": 0.5, "tag": "<x>"}, Operations: map[string]string{"lr": "* 1.2"},
	}}
	want := `perturbation at t 4: exploits b; lower quantile [a:0.1], upper [b:0.9 c:1]; new config {"lr":0.5,"tag":"<x>"} {"lr":"* 1.2"}`
	if got := d.Describe("t", show.JSON); got != want {
		t.Errorf("description\n got %q\nwant %q", got, want)
	}
}
