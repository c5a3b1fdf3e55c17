package sched

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tunejet/tunejet/internal/settings"
)

// MedianConfig is Ray's MedianStoppingRule:
// tune_config.scheduler "median_stopping_rule".
type MedianConfig struct {
	Objective
	// TimeAttr is the result key that measures progress. Default
	// "time_total_s".
	TimeAttr string `json:"time_attr"`
	// GracePeriod: no trial is judged younger, and running means start
	// here. Default 60.
	GracePeriod float64 `json:"grace_period"`
	// MinSamplesRequired is how many other trials must have reached a
	// trial's time before it is judged. Default 3.
	MinSamplesRequired int `json:"min_samples_required"`
	// MinTimeSlice is how long a trial runs before it yields its slot again
	// when it cannot be judged yet and others wait. Default 0.
	MinTimeSlice float64 `json:"min_time_slice"`
	// HardStop stops a trial worse than the median; false pauses it
	// instead, and it runs on, never judged again, when resumed. Default
	// true.
	HardStop bool `json:"hard_stop"`
}

func init() {
	register(func() Config { c := DefaultMedianConfig(); return &c }, "median_stopping_rule")
}

// TimeKey returns time_attr, the result key that measures progress.
func (c *MedianConfig) TimeKey() string { return c.TimeAttr }

// New builds the scheduler the config describes.
func (c *MedianConfig) New() (Scheduler, error) { return built(NewMedianStoppingRule(*c)) }

// DefaultMedianConfig returns Ray's defaults; Metric and Mode are left
// empty.
func DefaultMedianConfig() MedianConfig {
	return MedianConfig{TimeAttr: "time_total_s", GracePeriod: 60, MinSamplesRequired: 3, HardStop: true}
}

// Validate reports every broken rule joined with errors.Join; each is a
// *settings.Error.
func (c MedianConfig) Validate() error {
	p := &settings.Problems{}
	checkObjective(p, c.Objective, c.TimeAttr)
	p.Check(c.GracePeriod >= 0, "grace_period", "must be >= 0, got %v", c.GracePeriod)
	p.Check(c.MinSamplesRequired >= 0, "min_samples_required", "must be >= 0, got %d", c.MinSamplesRequired)
	p.Check(c.MinTimeSlice >= 0, "min_time_slice", "must be >= 0, got %v", c.MinTimeSlice)
	return p.Err()
}

// Median is the median stopping rule (Vizier's, as Ray implements it): a
// trial past the grace period whose best metric so far is strictly worse
// than the median of the other trials' running means up to its time is
// stopped. Only trials whose last result reached that time count, finished
// or not; when fewer than min_samples_required did, the trial yields its
// slot if others wait.
type Median struct {
	cfg MedianConfig
	st  medianState
}

type medianState struct {
	// Results are each trial's results, in order (Ray's _results).
	Results map[string]series `json:"results"`
	// Stopped are the trials the rule stopped or paused; a paused one runs
	// on unjudged (Ray's _stopped_trials).
	Stopped map[string]bool `json:"stopped"`
	// LastPause is the time of each trial's last yield; -inf when absent.
	LastPause map[string]float64 `json:"last_pause"`
}

// point is one result: time_attr and metric.
type point struct {
	T float64
	V Float
}

// series is a trial's results. It marshals as [[t, v], ...], a third of
// the bytes of objects, and with one marshaller call per trial rather than
// one per value: the rule keeps every result, so its state is the largest.
type series []point

// MarshalJSON writes [[t, v], ...].
func (s series) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(s)*24)
	b = append(b, '[')
	for i, p := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendFloat(b, p.T)
		b = append(b, ',')
		b = appendFloat(b, float64(p.V))
		b = append(b, ']')
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *series) UnmarshalJSON(data []byte) error {
	var pairs [][2]Float
	if err := json.Unmarshal(data, &pairs); err != nil {
		return err
	}
	*s = make(series, len(pairs))
	for i, p := range pairs {
		(*s)[i] = point{T: float64(p[0]), V: p[1]}
	}
	return nil
}

// NewMedianStoppingRule validates cfg and returns the rule with no trials.
func NewMedianStoppingRule(cfg MedianConfig) (*Median, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Median{cfg: cfg, st: medianState{
		Results: map[string]series{}, Stopped: map[string]bool{}, LastPause: map[string]float64{},
	}}, nil
}

// Add does nothing: a trial counts from its first result.
func (m *Median) Add(trial string, _ *rand.Rand) Decision {
	return Decision{Trial: trial, Action: Continue}
}

// Result records the result and judges the trial, as Ray's on_trial_result.
func (m *Median) Result(res Result, ctx Context) []Decision {
	cont := []Decision{{Trial: res.Trial, Action: Continue}}
	t, _, ok := m.cfg.reward(res, m.cfg.TimeAttr)
	if !ok || m.st.Stopped[res.Trial] {
		return cont
	}
	m.st.Results[res.Trial] = append(m.st.Results[res.Trial], point{T: t, V: Float(res.Metrics[m.cfg.Metric])})
	if t < m.cfg.GracePeriod {
		return cont
	}
	var means []float64
	for _, trial := range m.trialsBeyond(t) {
		if trial != res.Trial {
			means = append(means, m.runningMean(trial, t))
		}
	}
	in := &MedianInputs{Time: t, Samples: len(means), Required: m.cfg.MinSamplesRequired, Best: Float(m.best(res.Trial))}
	at := fmt.Sprintf("%s %s", m.cfg.TimeAttr, num(t))
	if len(means) < m.cfg.MinSamplesRequired {
		d := Decision{Trial: res.Trial, Action: Continue, Median: in}
		last, paused := m.st.LastPause[res.Trial]
		if !paused {
			last = math.Inf(-1)
		}
		if t-last > m.cfg.MinTimeSlice && ctx.Waiting {
			m.st.LastPause[res.Trial] = t
			d.Action = Pause
			d.Reason = fmt.Sprintf("paused at %s to let waiting trials run: %s reached it, %d needed to judge",
				at, plural(len(means), "other trial"), m.cfg.MinSamplesRequired)
		}
		return []Decision{d}
	}
	med, sorted := median(means)
	mf := Float(med)
	in.Median, in.Means = &mf, floats(sorted)
	d := Decision{Trial: res.Trial, Action: Continue, Median: in}
	if m.worse(float64(in.Best), med) {
		m.st.Stopped[res.Trial] = true
		d.Action = Stop
		if !m.cfg.HardStop {
			d.Action = Pause
		}
		d.Reason = fmt.Sprintf("%s at %s: best %s is worse than the median %s of %s running means %s",
			map[Action]string{Stop: "stopped", Pause: "paused"}[d.Action], at, num(float64(in.Best)), num(med),
			othersOf(len(means)), list(sorted))
	}
	return []Decision{d}
}

// trialsBeyond returns the trials whose last result reached t, sorted.
func (m *Median) trialsBeyond(t float64) []string {
	var out []string
	for trial, ps := range m.st.Results {
		if ps[len(ps)-1].T >= t {
			out = append(out, trial)
		}
	}
	slices.Sort(out)
	return out
}

// runningMean is the mean metric of the trial's results with
// grace_period <= time <= t.
func (m *Median) runningMean(trial string, t float64) float64 {
	sum, n := 0.0, 0
	for _, p := range m.st.Results[trial] {
		if m.cfg.GracePeriod <= p.T && p.T <= t {
			sum += float64(p.V)
			n++
		}
	}
	return sum / float64(n)
}

// best is the trial's best metric over all its results.
func (m *Median) best(trial string) float64 {
	ps := m.st.Results[trial]
	b := float64(ps[0].V)
	for _, p := range ps[1:] {
		if m.worse(b, float64(p.V)) {
			b = float64(p.V)
		}
	}
	return b
}

// worse reports whether a is strictly worse than b in the config's mode.
func (m *Median) worse(a, b float64) bool {
	if m.cfg.Mode == Min {
		return a > b
	}
	return a < b
}

// Resumed does nothing: a trial the rule paused runs on unjudged.
func (m *Median) Resumed(string) {}

// Complete records the trial's last result, as Ray's on_trial_complete:
// the trial keeps counting for the others.
func (m *Median) Complete(res Result) []Decision {
	if t, _, ok := m.cfg.reward(res, m.cfg.TimeAttr); ok {
		m.st.Results[res.Trial] = append(m.st.Results[res.Trial], point{T: t, V: Float(res.Metrics[m.cfg.Metric])})
	}
	return nil
}

// Remove does nothing: an errored trial's results still count, as in Ray.
func (m *Median) Remove(string) []Decision { return nil }

// MarshalJSON returns every trial's results and the trials stopped or
// paused.
func (m *Median) MarshalJSON() ([]byte, error) { return marshalState(m.st) }

// UnmarshalJSON restores a state from MarshalJSON.
func (m *Median) UnmarshalJSON(data []byte) error {
	st := medianState{}
	if err := unmarshalState("median_stopping_rule", data, &st); err != nil {
		return err
	}
	for trial, ps := range st.Results {
		if len(ps) == 0 {
			return fmt.Errorf("median_stopping_rule: state holds no results for trial %q", trial)
		}
	}
	if st.Results == nil {
		st.Results = map[string]series{}
	}
	if st.Stopped == nil {
		st.Stopped = map[string]bool{}
	}
	if st.LastPause == nil {
		st.LastPause = map[string]float64{}
	}
	m.st = st
	return nil
}

// Attrs are time_attr and the metric.
func (m *Median) Attrs() []string { return m.cfg.attrs(m.cfg.TimeAttr) }
