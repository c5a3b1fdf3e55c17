package sched

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/tunejet/tunejet/internal/settings"
)

// Mode says whether the metric is maximised or minimised (Ray's mode).
type Mode string

// The two modes.
const (
	Max Mode = "max"
	Min Mode = "min"
)

// sign is Ray's metric_op: +1 for max, -1 for min. A reward is
// sign * metric, so that larger rewards are always better.
func (m Mode) sign() float64 {
	if m == Min {
		return -1
	}
	return 1
}

// Action is what a decision asks the controller to do with a trial.
type Action string

// The actions. Continue, Stop and Pause are Ray's; Resume and Exploit
// make explicit what Ray does by changing a trial's status behind the
// controller's back.
const (
	// Continue lets the trial run on.
	Continue Action = "continue"
	// Stop ends the trial: it becomes TERMINATED with the decision's reason.
	Stop Action = "stop"
	// Pause frees the trial's slot; the trial resumes from its latest
	// checkpoint when the controller (or a Resume decision) runs it again.
	Pause Action = "pause"
	// Resume makes a paused trial runnable again (HyperBand, after halving).
	Resume Action = "resume"
	// Exploit pauses the trial and restarts it from the source trial's
	// checkpoint with a new config (PBT). See ExploitInputs.
	Exploit Action = "exploit"
	// Record reports a state change that asks nothing of the controller: a
	// completed trial's final result recorded at an ASHA rung.
	Record Action = "record"
)

// Result is one result a trial reported, as the schedulers need it.
type Result struct {
	// Trial is the trial's id.
	Trial string
	// Metrics are the result's numeric values, flattened as Ray flattens
	// them ("a/b"), the scheduler's time_attr and metric among them. A
	// result that lacks either, or holds a NaN or infinite time, is let
	// through (Continue) without touching the scheduler's state, as Ray
	// does for a missing attribute.
	Metrics map[string]float64
	// Checkpoint names the trial's latest checkpoint when it reported this
	// result, or is empty when it has none. PBT hands it to the trials that
	// exploit this one; the other schedulers ignore it.
	Checkpoint string
}

// Context is what the controller knows at a call and the scheduler does not
// remember. It is passed in on every call, never kept.
type Context struct {
	// Waiting is true when some trial is PENDING or PAUSED, waiting for a
	// slot. The median stopping rule pauses a trial it cannot judge yet,
	// and PBT pauses a trial at each perturbation, only when someone waits.
	Waiting bool
	// Config returns a trial's current config. PBT reads the donor's config
	// through it to build an exploiting trial's new one. Explore keeps an
	// int an int (Ray's isinstance(v, int)) when it is a Go int, a
	// json.Number that parses as one, or a whole number whose mutation
	// draws ints (Mutation.Int): the fold's configs come from JSON, as
	// float64s, and a restored controller must pass the same types as an
	// uninterrupted one.
	Config func(trial string) map[string]any
	// Rand is this call's generator, which the caller seeds afresh for each
	// decision, e.g. from (experiment seed, "result", ordinal). PBT draws
	// its donor and explores with it; the other schedulers draw nothing
	// from it, and it may be nil for them.
	Rand *rand.Rand
}

// Scheduler is a trial scheduler's rules. A controller folds the event log
// in order and makes the calls below as the events say; it publishes the
// decisions as events before acting on them. Given the same state (a fresh
// scheduler, or one restored with UnmarshalJSON from MarshalJSON's bytes)
// and the same calls, a scheduler returns the same decisions, byte for
// byte once marshalled.
//
// The controller's duties, which keep a scheduler's view true:
//   - Add every trial once, before any of its results, in trial order.
//   - Feed every result of a running trial to Result, in the order of the
//     log; after a Stop, Pause or Exploit decision about a trial, feed no
//     more results of that run (they are stale), and call Resumed when the
//     trial runs again.
//   - When a trial ends, call Complete with its last result if it was
//     running (finished, or stopped by a decision, a stopper or the user),
//     or Remove if it was not running or it errored. A call about a trial
//     the scheduler already let go of (a paused trial its own decision
//     stopped) changes nothing and returns no decisions.
type Scheduler interface {
	// Add enters a new trial; for ASHA and HyperBand, into a bracket. r is
	// drawn from only when ASHA has more than one bracket; it may be nil
	// otherwise. The decision is a Continue that records the bracket.
	Add(trial string, r *rand.Rand) Decision
	// Result judges one result of a running trial. The first decision is
	// always about res.Trial; HyperBand may follow it with decisions about
	// other trials of the same bracket.
	Result(res Result, ctx Context) []Decision
	// Resumed tells the scheduler that a trial it paused (or exploited)
	// runs again, so that its next results are from the new run.
	Resumed(trial string)
	// Complete tells the scheduler that a running trial ended; res is its
	// last result. ASHA records it at a rung (Ray's on_trial_complete);
	// HyperBand may halve the trial's bracket and decide about others.
	Complete(res Result) []Decision
	// Remove tells the scheduler that a trial that was not running ended,
	// or that a trial errored (Ray's on_trial_remove / on_trial_error).
	Remove(trial string) []Decision
	// Attrs are the result keys the scheduler reads (its time_attr and
	// metric): Result.Metrics needs no other.
	Attrs() []string
	// MarshalJSON returns the scheduler's state (not its config).
	json.Marshaler
	// UnmarshalJSON replaces the state of a scheduler built from the same
	// config with one that MarshalJSON returned.
	json.Unmarshaler
}

// Decision is one decision about one trial, with the inputs it came from.
// It marshals to JSON deterministically (map keys sorted), so that a
// restored controller can compare its decisions with the logged ones byte
// for byte. Exactly one of the *Inputs fields is set when the decision
// compared anything.
type Decision struct {
	// Trial is the id of the trial the decision is about.
	Trial string `json:"trial"`
	// Action is what to do with it.
	Action Action `json:"action"`
	// Reason explains the decision to a person, e.g. "stopped at rung 16
	// (training_iteration 16): 0.41 < cutoff 0.53, the 75th percentile of
	// 12 other trials' values". Empty for a plain Continue.
	Reason string `json:"reason,omitempty"`
	// Bracket is set by Add for ASHA and HyperBand.
	Bracket *BracketInputs `json:"bracket,omitempty"`
	// Rung is set by ASHA when a result reached a rung.
	Rung *RungInputs `json:"rung,omitempty"`
	// Halving is set by HyperBand when a bracket reached its milestone.
	Halving *HalvingInputs `json:"halving,omitempty"`
	// Median is set by the median stopping rule once a trial is past its
	// grace period.
	Median *MedianInputs `json:"median,omitempty"`
	// Exploit is set by PBT at a perturbation.
	Exploit *ExploitInputs `json:"exploit,omitempty"`
}

// Quiet reports whether the decision is a plain Continue that changed
// nothing worth an event: no reason and no inputs.
func (d Decision) Quiet() bool {
	return d.Action == Continue && d.Reason == "" && d.Bracket == nil && d.Rung == nil &&
		d.Halving == nil && d.Median == nil && d.Exploit == nil
}

// checkObjective records what is wrong with a scheduler's objective and
// time attribute.
func checkObjective(p *settings.Problems, o Objective, timeAttr string) {
	p.Check(o.Metric != "", "metric", "must be set")
	p.Check(o.Mode == Max || o.Mode == Min, "mode", "must be \"max\" or \"min\", got %q", o.Mode)
	p.Check(timeAttr != "", "time_attr", "must be set")
}

// Objective is the metric a scheduler compares and its direction, Ray's
// metric and mode (taken from tune_config when the scheduler has none).
type Objective struct {
	// Metric is the result key compared. Required.
	Metric string `json:"metric"`
	// Mode is "max" or "min". Required.
	Mode Mode `json:"mode"`
}

// Target returns the objective, so that a config that embeds one can have
// it set from tune_config's metric and mode (Ray's rule).
func (o *Objective) Target() *Objective { return o }

// attrs are the keys a scheduler with objective o and timeAttr reads.
func (o Objective) attrs(timeAttr string) []string { return []string{timeAttr, o.Metric} }

// reward returns sign * metric and the time of res, and whether res holds
// both attributes with a finite time.
func (o Objective) reward(res Result, timeAttr string) (t, reward float64, ok bool) {
	t, okT := res.Metrics[timeAttr]
	v, okV := res.Metrics[o.Metric]
	if !okT || !okV || !finite(t) {
		return 0, 0, false
	}
	return t, o.Mode.sign() * v, true
}

// unmarshalState decodes a scheduler's state, naming the scheduler in the
// error.
func unmarshalState(name string, data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: decode state: %w", name, err)
	}
	return nil
}

// marshalState encodes a scheduler's state.
func marshalState(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("sched: encode state: %w", err)
	}
	return b, nil
}

// The schedulers.
var (
	_ Scheduler = (*FIFO)(nil)
	_ Scheduler = (*ASHA)(nil)
	_ Scheduler = (*HyperBand)(nil)
	_ Scheduler = (*Median)(nil)
	_ Scheduler = (*PBT)(nil)
)
