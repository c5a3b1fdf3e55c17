package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tunejet/tunejet/internal/settings"
)

// ASHAConfig is Ray's AsyncHyperBandScheduler (ASHAScheduler), the stopping
// variant: tune_config.scheduler "asha" or "async_hyperband".
type ASHAConfig struct {
	Objective
	// TimeAttr is the result key that measures progress; it must grow
	// monotonically. Default "training_iteration".
	TimeAttr string `json:"time_attr"`
	// MaxT is the time at which a trial is stopped (with StopLastTrials).
	// Default 100.
	MaxT float64 `json:"max_t"`
	// GracePeriod is the first rung: no trial is stopped younger. Default 1.
	GracePeriod float64 `json:"grace_period"`
	// ReductionFactor is the ratio between rungs; a trial passes a rung when
	// it is in the top 1/ReductionFactor of the trials recorded there.
	// Default 4.
	ReductionFactor float64 `json:"reduction_factor"`
	// Brackets is the number of brackets; bracket s starts at the rung
	// GracePeriod * ReductionFactor^s. Default 1.
	Brackets int `json:"brackets"`
	// StopLastTrials stops a trial at MaxT; when false, trials that passed
	// the top rung run on until they end. Default true.
	StopLastTrials bool `json:"stop_last_trials"`
}

func init() {
	register(func() Config { c := DefaultASHAConfig(); return &c }, "asha", "async_hyperband")
}

// TimeKey returns time_attr, the result key that measures progress.
func (c *ASHAConfig) TimeKey() string { return c.TimeAttr }

// New builds the scheduler the config describes.
func (c *ASHAConfig) New() (Scheduler, error) { return built(NewASHA(*c)) }

// DefaultASHAConfig returns Ray's defaults; Metric and Mode are left empty.
func DefaultASHAConfig() ASHAConfig {
	return ASHAConfig{
		TimeAttr: "training_iteration", MaxT: 100, GracePeriod: 1, ReductionFactor: 4,
		Brackets: 1, StopLastTrials: true,
	}
}

// Validate reports every broken rule, e.g. "reduction_factor: must be
// > 1, got 1", joined with errors.Join; each is a *settings.Error.
func (c ASHAConfig) Validate() error {
	p := &settings.Problems{}
	checkObjective(p, c.Objective, c.TimeAttr)
	p.Check(c.MaxT > 0, "max_t", "must be > 0, got %v", c.MaxT)
	p.Check(c.GracePeriod > 0, "grace_period", "must be > 0, got %v", c.GracePeriod)
	p.Check(c.GracePeriod <= c.MaxT, "grace_period", "must be <= max_t (%v), got %v", c.MaxT, c.GracePeriod)
	p.Check(c.ReductionFactor > 1, "reduction_factor", "must be > 1, got %v", c.ReductionFactor)
	p.Check(c.Brackets >= 1, "brackets", "must be >= 1, got %d", c.Brackets)
	return p.Err()
}

// ASHA is the asynchronous successive halving rule, Ray's _Bracket: a trial
// that reaches a rung is stopped when its reward is below the
// (1 - 1/reduction_factor) percentile of the other trials' rewards
// recorded at that rung.
type ASHA struct {
	cfg ASHAConfig
	st  ashaState
}

type ashaState struct {
	Brackets []ashaBracket `json:"brackets"`
	// Trials maps each live trial to its bracket (Ray's _trial_info).
	Trials map[string]int `json:"trials"`
}

type ashaBracket struct {
	// Rungs are ordered from the highest milestone down, as Ray's.
	Rungs []ashaRung `json:"rungs"`
}

type ashaRung struct {
	Milestone float64 `json:"milestone"`
	// Recorded holds each trial's reward (sign * metric) at the rung.
	Recorded map[string]Float `json:"recorded"`
	// sorted caches Recorded's non-NaN rewards in ascending order, so that
	// a cutoff costs a lookup, not a sort; nil until first needed (after a
	// restore too).
	sorted []float64
}

// values returns the rung's non-NaN rewards, sorted.
func (r *ashaRung) values() []float64 {
	if r.sorted == nil {
		r.sorted = make([]float64, 0, len(r.Recorded))
		for _, v := range r.Recorded {
			if !math.IsNaN(float64(v)) {
				r.sorted = append(r.sorted, float64(v))
			}
		}
		slices.Sort(r.sorted)
	}
	return r.sorted
}

// record adds the trial's reward.
func (r *ashaRung) record(trial string, reward float64) {
	xs := r.values()
	if !math.IsNaN(reward) {
		i, _ := slices.BinarySearch(xs, reward)
		r.sorted = slices.Insert(xs, i, reward)
	}
	r.Recorded[trial] = Float(reward)
}

// NewASHA validates cfg and returns an ASHA scheduler with no trials.
func NewASHA(cfg ASHAConfig) (*ASHA, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &ASHA{cfg: cfg, st: ashaState{Trials: map[string]int{}}}
	for s := range cfg.Brackets {
		var b ashaBracket
		for _, m := range ashaMilestones(cfg.GracePeriod, cfg.MaxT, cfg.ReductionFactor, s) {
			b.Rungs = append(b.Rungs, ashaRung{Milestone: m, Recorded: map[string]Float{}})
		}
		a.st.Brackets = append(a.st.Brackets, b)
	}
	return a, nil
}

// ashaMilestones returns the rungs of bracket s, highest first:
// grace * rf^k for k = K, K-1, ..., s, where K is the largest k with
// grace * rf^k <= maxT.
//
// Ray counts the rungs as int(log(max_t/grace)/log(rf) - s + 1). That float
// formula is fragile: numpy's log gives exactly 3.0 for max_t 1000, grace 1,
// rf 10 (4 rungs: 1000, 100, 10, 1), while Go's math.Log gives
// 2.9999999999999996 (3 rungs). K is found here by comparing the milestones
// themselves, which are exact for integer grace, rf and max_t (math.Pow of
// integers is exact below 2^53), so tunejet gets numpy's 4 rungs there and
// never depends on a logarithm's last bit. Milestones are grace * rf^k, as
// Ray computes them.
func ashaMilestones(grace, maxT, rf float64, s int) []float64 {
	k := 0
	for grace*math.Pow(rf, float64(k+1)) <= maxT {
		k++
	}
	var ms []float64
	for ; k >= s; k-- {
		ms = append(ms, grace*math.Pow(rf, float64(k)))
	}
	return ms
}

// Add puts the trial in a bracket: Ray's softmax over the brackets' rung
// counts, p_i = e^(n_i - max n) / sum, drawn as numpy's choice does (the
// first bracket whose cumulative probability exceeds a uniform draw from
// r). With one bracket nothing is drawn and r may be nil.
func (a *ASHA) Add(trial string, r *rand.Rand) Decision {
	probs := a.bracketProbs()
	idx := 0
	if len(probs) > 1 {
		u, cum := r.Float64(), 0.0
		for idx = range probs {
			cum += probs[idx]
			if u < cum {
				break
			}
		}
	}
	a.st.Trials[trial] = idx
	return Decision{
		Trial: trial, Action: Continue,
		Bracket: &BracketInputs{Bracket: idx, Probabilities: probs},
	}
}

func (a *ASHA) bracketProbs() []float64 {
	largest := 0
	for _, b := range a.st.Brackets {
		largest = max(largest, len(b.Rungs))
	}
	probs := make([]float64, len(a.st.Brackets))
	sum := 0.0
	for i, b := range a.st.Brackets {
		probs[i] = math.Pow(math.E, float64(len(b.Rungs)-largest))
		sum += probs[i]
	}
	for i := range probs {
		probs[i] /= sum
	}
	return probs
}

// Result stops the trial at max_t (with stop_last_trials), or judges it at
// the highest rung it reached and is not recorded at yet.
func (a *ASHA) Result(res Result, _ Context) []Decision {
	t, reward, ok := a.cfg.reward(res, a.cfg.TimeAttr)
	b, live := a.st.Trials[res.Trial]
	switch {
	case !ok || !live:
		return []Decision{{Trial: res.Trial, Action: Continue}}
	case a.cfg.StopLastTrials && t >= a.cfg.MaxT:
		return []Decision{{Trial: res.Trial, Action: Stop,
			Reason: fmt.Sprintf(reachedMaxT+"%s %s >= %s", a.cfg.TimeAttr, num(t), num(a.cfg.MaxT))}}
	}
	return []Decision{a.onResult(b, res.Trial, t, reward, Continue)}
}

// onResult is Ray's _Bracket.on_result. pass is the action when the trial
// passes (Continue for a result, Record for a completed trial).
func (a *ASHA) onResult(bracket int, trial string, t, reward float64, pass Action) Decision {
	d := Decision{Trial: trial, Action: Continue}
	if pass == Record {
		d.Action = Record
	}
	rungs := a.st.Brackets[bracket].Rungs
	for i := range rungs {
		rung := &rungs[i]
		_, recorded := rung.Recorded[trial]
		if t >= rung.Milestone && recorded && !a.cfg.StopLastTrials {
			break
		}
		if t < rung.Milestone || recorded {
			continue
		}
		in := a.cutoff(rung, bracket, len(rungs)-1-i, t, reward)
		rung.record(trial, reward)
		d.Rung = in
		d.Reason = a.reason(in, pass)
		if pass == Continue && in.Cutoff != nil && reward < float64(*in.Cutoff) {
			d.Action = Stop
			d.Reason = a.reason(in, Stop)
		}
		break
	}
	return d
}

// maxValues bounds the rewards a RungInputs lists.
const maxValues = 64

// cutoff computes the rung's cutoff from the other trials' rewards, before
// the trial's own is recorded. Ray's cutoff is None for an empty rung;
// a rung holding only NaNs gives numpy's NaN, which stops nobody.
func (a *ASHA) cutoff(rung *ashaRung, bracket, index int, t, reward float64) *RungInputs {
	in := &RungInputs{
		Bracket: bracket, Rung: index, Milestone: rung.Milestone, Time: t, Reward: Float(reward),
		Percentile: (1 - 1/a.cfg.ReductionFactor) * 100,
	}
	if len(rung.Recorded) == 0 {
		return in
	}
	xs := rung.values()
	c, lo, hi := percentileSorted(xs, in.Percentile)
	cf := Float(c)
	in.Cutoff, in.Count = &cf, len(xs)
	if len(xs) > 0 {
		in.Between = []Float{Float(lo), Float(hi)}
	}
	if len(xs) <= maxValues {
		in.Values = floats(xs)
	}
	return in
}

func (a *ASHA) reason(in *RungInputs, act Action) string {
	at := fmt.Sprintf("rung %s (%s %s)", num(in.Milestone), a.cfg.TimeAttr, num(in.Time))
	if in.Cutoff == nil {
		return fmt.Sprintf("first at %s: %s recorded", at, num(float64(in.Reward)))
	}
	of := fmt.Sprintf("cutoff %s, the %s percentile of %s rewards",
		num(float64(*in.Cutoff)), ordinal(in.Percentile), othersOf(in.Count))
	if in.Values != nil {
		of += " " + list(in.Values)
	}
	r := num(float64(in.Reward))
	switch act {
	case Stop:
		return fmt.Sprintf("stopped at %s: %s < %s", at, r, of)
	case Record:
		return fmt.Sprintf("recorded at %s on completion: %s (%s)", at, r, of)
	}
	return fmt.Sprintf("passed %s: %s >= %s", at, r, of)
}

// Resumed does nothing: ASHA never pauses.
func (a *ASHA) Resumed(string) {}

// Complete records the trial's last result at the highest rung it reached
// and is not recorded at (Ray's on_trial_complete) and lets the trial go.
func (a *ASHA) Complete(res Result) []Decision {
	b, live := a.st.Trials[res.Trial]
	if !live {
		return nil
	}
	delete(a.st.Trials, res.Trial)
	t, reward, ok := a.cfg.reward(res, a.cfg.TimeAttr)
	if !ok {
		return nil
	}
	if d := a.onResult(b, res.Trial, t, reward, Record); d.Rung != nil {
		return []Decision{d}
	}
	return nil
}

// Remove lets the trial go; its rewards stay recorded.
func (a *ASHA) Remove(trial string) []Decision {
	delete(a.st.Trials, trial)
	return nil
}

// MarshalJSON returns the rung records and the live trials' brackets.
func (a *ASHA) MarshalJSON() ([]byte, error) { return marshalState(a.st) }

// UnmarshalJSON restores a state from MarshalJSON; its rungs must be the
// config's.
func (a *ASHA) UnmarshalJSON(data []byte) error {
	var st ashaState
	if err := unmarshalState("asha", data, &st); err != nil {
		return err
	}
	if len(st.Brackets) != len(a.st.Brackets) {
		return fmt.Errorf("asha: state has %d brackets, the config %d", len(st.Brackets), len(a.st.Brackets))
	}
	for i, b := range st.Brackets {
		if len(b.Rungs) != len(a.st.Brackets[i].Rungs) {
			return fmt.Errorf("asha: state's bracket %d has %d rungs, the config's %d", i, len(b.Rungs), len(a.st.Brackets[i].Rungs))
		}
		for j := range b.Rungs {
			if b.Rungs[j].Milestone != a.st.Brackets[i].Rungs[j].Milestone {
				return fmt.Errorf("asha: state's bracket %d has a rung at %v, the config's at %v", i, b.Rungs[j].Milestone, a.st.Brackets[i].Rungs[j].Milestone)
			}
			if b.Rungs[j].Recorded == nil {
				b.Rungs[j].Recorded = map[string]Float{}
			}
		}
	}
	if st.Trials == nil {
		st.Trials = map[string]int{}
	}
	a.st = st
	return nil
}

// Attrs are time_attr and the metric.
func (a *ASHA) Attrs() []string { return a.cfg.attrs(a.cfg.TimeAttr) }
