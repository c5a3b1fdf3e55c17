package stopper

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/settings"
)

// Stopper is one of Ray Tune's stoppers with its state. It asks Ray's two
// questions: StopTrial (Ray's __call__) folds a trial's result into the state
// and reports whether that trial should stop; StopAll (Ray's stop_all)
// reports whether the whole experiment should stop, and changes nothing.
//
// The set is closed: Marshal and Unmarshal must know every type to restore
// it.
type Stopper interface {
	// StopTrial folds result, a trial's reported metrics, into the state
	// and reports whether the trial should stop after it.
	StopTrial(trialID string, result map[string]any) Decision
	// StopAll reports whether the experiment should stop, now seconds
	// after it started (the caller takes now from the event it folds).
	StopAll(now float64) Decision

	// kind is the stopper's type name in the experiment file and in JSON.
	kind() string
	// validate adds the stopper's configuration problems to c.
	validate(p *settings.Problems)
}

// Decision is a stopper's answer: stop or not, and why.
type Decision struct {
	Stop bool `json:"stop"`
	// Reason says in a few words why, e.g. "plateau: std 0.004 of the last
	// 4 results of loss < 0.01"; empty when Stop is false.
	Reason string `json:"reason,omitempty"`
}

// stop is a Decision to stop, with its reason.
func stop(format string, args ...any) Decision {
	return Decision{Stop: true, Reason: fmt.Sprintf(format, args...)}
}

// CombinedStopper is Ray's CombinedStopper: it stops when any of its
// stoppers does. As Ray's any(), it asks them in order and stops asking at
// the first that stops, so the stoppers after it do not see that result.
type CombinedStopper struct {
	Stoppers []Stopper
}

// Combined returns a CombinedStopper of stoppers.
func Combined(stoppers ...Stopper) *CombinedStopper {
	return &CombinedStopper{Stoppers: stoppers}
}

// StopTrial returns the decision of the first stopper that stops the trial.
func (s *CombinedStopper) StopTrial(trialID string, result map[string]any) Decision {
	for _, st := range s.Stoppers {
		if d := st.StopTrial(trialID, result); d.Stop {
			return d
		}
	}
	return Decision{}
}

// StopAll returns the decision of the first stopper that stops the
// experiment.
func (s *CombinedStopper) StopAll(now float64) Decision {
	for _, st := range s.Stoppers {
		if d := st.StopAll(now); d.Stop {
			return d
		}
	}
	return Decision{}
}

func (*CombinedStopper) kind() string { return typeCombined }

func (s *CombinedStopper) validate(p *settings.Problems) {
	for i, st := range s.Stoppers {
		if st == nil {
			p.Add(strconv.Itoa(i), "must not be nil")
			continue
		}
		st.validate(p.Under(strconv.Itoa(i)))
	}
}

// MarshalJSON encodes the stoppers with their types.
func (s *CombinedStopper) MarshalJSON() ([]byte, error) {
	list := make([]json.RawMessage, len(s.Stoppers))
	for i, st := range s.Stoppers {
		b, err := Marshal(st)
		if err != nil {
			return nil, err
		}
		list[i] = b
	}
	return json.Marshal(struct {
		Stoppers []json.RawMessage `json:"stoppers"`
	}{list})
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (s *CombinedStopper) UnmarshalJSON(b []byte) error {
	var v struct {
		Stoppers []json.RawMessage `json:"stoppers"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	s.Stoppers = nil
	for i, raw := range v.Stoppers {
		st, err := Unmarshal(raw)
		if err != nil {
			return fmt.Errorf("stopper %d: %w", i, err)
		}
		s.Stoppers = append(s.Stoppers, st)
	}
	return nil
}

// envelope is a stopper in JSON: its type and its configuration and state.
type envelope struct {
	Type    string          `json:"type"`
	Stopper json.RawMessage `json:"stopper"`
}

// Marshal encodes s, its configuration and its state, as JSON that
// Unmarshal restores. The encoding is deterministic: the same state gives
// the same bytes.
func Marshal(s Stopper) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("stopper: marshal %s: %w", s.kind(), err)
	}
	return json.Marshal(envelope{Type: s.kind(), Stopper: b})
}

// Unmarshal decodes a stopper that Marshal encoded.
func Unmarshal(b []byte) (Stopper, error) {
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("stopper: unmarshal: %w", err)
	}
	s := newOfType(e.Type)
	if s == nil {
		return nil, fmt.Errorf("stopper: unmarshal: unknown type %q", e.Type)
	}
	if err := json.Unmarshal(e.Stopper, s); err != nil {
		return nil, fmt.Errorf("stopper: unmarshal %s: %w", e.Type, err)
	}
	return s, nil
}

// metricValue is result's metric as a finite number. A metric with a
// slash ("val/loss") that is not a key of result is looked up in nested
// mappings, as the stop criteria are. Missing, non-numeric, NaN and
// infinite values are not usable: ok is false.
func metricValue(result map[string]any, metric string) (v float64, ok bool) {
	x, found := events.ResultValue(result, metric)
	if !found {
		return 0, false
	}
	v, ok = toFloat(x)
	return v, ok && !math.IsNaN(v) && !math.IsInf(v, 0)
}

// toFloat reads a reported number (settings.Number) or a bool, as 1 or 0:
// numpy compares a bool metric as a number. The config's numbers take no
// bools (args.number).
func toFloat(v any) (float64, bool) {
	if b, isBool := v.(bool); isBool {
		if b {
			return 1, true
		}
		return 0, true
	}
	f, _, ok := settings.Number(v)
	return f, ok
}

// std is the population standard deviation of xs (numpy's np.std, ddof
// 0), in two passes as numpy computes it. numpy adds more than 8 values
// pairwise, so its last bits can differ from these sequential sums.
func std(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var sq float64
	for _, x := range xs {
		sq += (x - mean) * (x - mean)
	}
	return math.Sqrt(sq / float64(len(xs)))
}
