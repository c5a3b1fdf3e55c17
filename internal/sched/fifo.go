package sched

import "math/rand/v2"

// FIFO is Ray's FIFOScheduler: every trial runs until it ends on its own or
// a stopper ends it. It has no state.
type FIFO struct{}

// NewFIFO returns the FIFO scheduler.
func NewFIFO() *FIFO { return &FIFO{} }

// Add lets the trial run.
func (*FIFO) Add(trial string, _ *rand.Rand) Decision {
	return Decision{Trial: trial, Action: Continue}
}

// Result lets the trial run on.
func (*FIFO) Result(res Result, _ Context) []Decision {
	return []Decision{{Trial: res.Trial, Action: Continue}}
}

// Resumed does nothing.
func (*FIFO) Resumed(string) {}

// Complete does nothing.
func (*FIFO) Complete(Result) []Decision { return nil }

// Remove does nothing.
func (*FIFO) Remove(string) []Decision { return nil }

// MarshalJSON returns the empty state, {}.
func (*FIFO) MarshalJSON() ([]byte, error) { return []byte("{}"), nil }

// UnmarshalJSON accepts any JSON object: FIFO has no state.
func (*FIFO) UnmarshalJSON(data []byte) error {
	var v struct{}
	return unmarshalState("fifo", data, &v)
}

// Attrs is empty: FIFO reads no result.
func (*FIFO) Attrs() []string { return nil }
