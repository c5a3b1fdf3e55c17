package sched

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tunejet/tunejet/internal/settings"
)

// HyperBandConfig is Ray's synchronous HyperBandScheduler:
// tune_config.scheduler "hyperband".
type HyperBandConfig struct {
	Objective
	// TimeAttr is the result key that measures progress. Default
	// "training_iteration".
	TimeAttr string `json:"time_attr"`
	// MaxT is the most time_attr a trial gets. Default 81.
	MaxT float64 `json:"max_t"`
	// ReductionFactor is HyperBand's eta. Default 3.
	ReductionFactor float64 `json:"reduction_factor"`
	// StopLastTrials stops the trials left when a bracket finishes. Default
	// true.
	StopLastTrials bool `json:"stop_last_trials"`
}

func init() {
	register(func() Config { c := DefaultHyperBandConfig(); return &c }, "hyperband")
}

// TimeKey returns time_attr, the result key that measures progress.
func (c *HyperBandConfig) TimeKey() string { return c.TimeAttr }

// New builds the scheduler the config describes.
func (c *HyperBandConfig) New() (Scheduler, error) { return built(NewHyperBand(*c)) }

// DefaultHyperBandConfig returns Ray's defaults; Metric and Mode are left
// empty.
func DefaultHyperBandConfig() HyperBandConfig {
	return HyperBandConfig{TimeAttr: "training_iteration", MaxT: 81, ReductionFactor: 3, StopLastTrials: true}
}

// Validate reports every broken rule joined with errors.Join; each is a
// *settings.Error. max_t must be >= 1 (Ray asks > 0, but with max_t < 1 no
// bracket has a first milestone and Ray's on_trial_add never returns).
func (c HyperBandConfig) Validate() error {
	p := &settings.Problems{}
	checkObjective(p, c.Objective, c.TimeAttr)
	p.Check(c.MaxT >= 1, "max_t", "must be >= 1, got %v", c.MaxT)
	p.Check(c.ReductionFactor > 1, "reduction_factor", "must be > 1, got %v", c.ReductionFactor)
	return p.Err()
}

// HyperBand is Ray's HyperBandScheduler. Trials fill brackets in turn: a
// band holds s_max+1 brackets, bracket s takes n0(s) trials and first
// judges them at r0(s). A trial that reaches its bracket's milestone is
// paused until every live trial of the bracket has; then the best
// ceil(n/eta) go on (paused ones are resumed) to the next milestone,
// min(r*eta, max_t - milestone), and the others are stopped.
//
// As in Ray, the next milestone is computed from the previous one, not
// added to it: with max_t 81 and eta 3, bracket 4 judges at 1, 3, 9, 27 and
// ends its last trial at 54, not 81. Trials whose reward ties keep the
// order they were added in; a NaN reward ranks worst.
type HyperBand struct {
	cfg   HyperBandConfig
	sMax1 int
	st    hbState
}

type hbState struct {
	// Bands are Ray's _hyperbands; a nil bracket is one Ray skipped
	// because its r0 was 0.
	Bands [][]*hbBracket `json:"bands"`
	// Band is the band being filled.
	Band int `json:"band"`
	// Trials locate each trial's bracket; Ended marks a trial the
	// scheduler let go of itself.
	Trials map[string]hbRef `json:"trials"`
}

type hbRef struct {
	Band    int  `json:"band"`
	Bracket int  `json:"bracket"`
	Ended   bool `json:"ended,omitempty"`
}

type hbBracket struct {
	// N is the most live trials (Ray's _n); R the last step and Milestone
	// the time_attr every live trial must reach (_r and _cumul_r); Halves
	// the halvings left.
	N         int       `json:"n"`
	R         float64   `json:"r"`
	Milestone float64   `json:"milestone"`
	Halves    int       `json:"halves"`
	Live      []hbTrial `json:"live"`
}

type hbTrial struct {
	Trial  string  `json:"trial"`
	Time   float64 `json:"time"`
	Reward *Float  `json:"reward,omitempty"`
	Paused bool    `json:"paused,omitempty"`
}

// NewHyperBand validates cfg and returns a HyperBand scheduler with no
// trials.
func NewHyperBand(cfg HyperBandConfig) (*HyperBand, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Ray's int(round(log(max_t)/log(eta))) + 1; round is half to even.
	sMax1 := int(math.RoundToEven(math.Log(cfg.MaxT)/math.Log(cfg.ReductionFactor))) + 1
	return &HyperBand{cfg: cfg, sMax1: sMax1, st: hbState{Bands: [][]*hbBracket{nil}, Trials: map[string]hbRef{}}}, nil
}

// n0 is the size of bracket s: ceil(s_max_1/(s+1) * eta^s).
func (h *HyperBand) n0(s int) int {
	return int(math.Ceil(float64(h.sMax1) / float64(s+1) * math.Pow(h.cfg.ReductionFactor, float64(s))))
}

// r0 is the first milestone of bracket s: int(max_t * eta^-s). Ray
// multiplies by eta**-s; dividing by the exact power eta^s gives the same
// integers without risking an ulp below one (3 * (1/27) * 27).
func (h *HyperBand) r0(s int) float64 {
	return math.Trunc(h.cfg.MaxT / math.Pow(h.cfg.ReductionFactor, float64(s)))
}

// Add puts the trial in the current bracket, or in a new bracket (or band)
// when the current one is full, as Ray's on_trial_add.
func (h *HyperBand) Add(trial string, _ *rand.Rand) Decision {
	band := h.st.Bands[h.st.Band]
	var cur *hbBracket
	if len(band) > 0 {
		cur = band[len(band)-1]
	}
	if cur == nil || len(cur.Live) == cur.N {
		for {
			if len(h.st.Bands[h.st.Band]) == h.sMax1 {
				h.st.Bands = append(h.st.Bands, nil)
				h.st.Band++
			}
			s := len(h.st.Bands[h.st.Band])
			cur = nil
			if r := h.r0(s); r > 0 {
				cur = &hbBracket{N: h.n0(s), R: r, Milestone: r, Halves: s}
			}
			h.st.Bands[h.st.Band] = append(h.st.Bands[h.st.Band], cur)
			if cur != nil {
				break
			}
		}
	}
	cur.Live = append(cur.Live, hbTrial{Trial: trial})
	ref := hbRef{Band: h.st.Band, Bracket: len(h.st.Bands[h.st.Band]) - 1}
	h.st.Trials[trial] = ref
	return Decision{Trial: trial, Action: Continue, Bracket: &BracketInputs{Band: ref.Band, Bracket: ref.Bracket}}
}

func (h *HyperBand) bracket(ref hbRef) *hbBracket { return h.st.Bands[ref.Band][ref.Bracket] }

func (b *hbBracket) live(trial string) *hbTrial {
	for i := range b.Live {
		if b.Live[i].Trial == trial {
			return &b.Live[i]
		}
	}
	return nil
}

func (b *hbBracket) cleanup(trial string) {
	b.Live = slices.DeleteFunc(b.Live, func(t hbTrial) bool { return t.Trial == trial })
}

func (h *HyperBand) continueTrial(b *hbBracket, t *hbTrial) bool {
	return (!h.cfg.StopLastTrials && b.Halves == 0) || t.Time < b.Milestone
}

func (b *hbBracket) curIterDone() bool {
	return !slices.ContainsFunc(b.Live, func(t hbTrial) bool { return t.Time < b.Milestone })
}

func (h *HyperBand) finished(b *hbBracket) bool {
	return h.cfg.StopLastTrials && b.Halves == 0 && b.curIterDone()
}

// Result records the trial's progress; before the milestone it continues,
// at it the bracket is processed (Ray's _process_bracket).
func (h *HyperBand) Result(res Result, _ Context) []Decision {
	ref, known := h.st.Trials[res.Trial]
	t, reward, ok := h.cfg.reward(res, h.cfg.TimeAttr)
	if !known || ref.Ended || !ok {
		return []Decision{{Trial: res.Trial, Action: Continue}}
	}
	b := h.bracket(ref)
	lt := b.live(res.Trial)
	if lt == nil {
		return []Decision{{Trial: res.Trial, Action: Continue}}
	}
	r := Float(reward)
	lt.Time, lt.Reward, lt.Paused = t, &r, false
	if h.continueTrial(b, lt) {
		return []Decision{{Trial: res.Trial, Action: Continue}}
	}
	act, reason, halving, others := h.process(ref, res.Trial)
	if act == Pause {
		lt.Paused = true
	}
	own := Decision{Trial: res.Trial, Action: act, Reason: reason, Halving: halving}
	return append([]Decision{own}, others...)
}

// process is Ray's _process_bracket. reporting is the trial whose result
// triggered it ("" after a removal); the returned action, reason and
// halving are about it, the decisions about the bracket's other trials.
func (h *HyperBand) process(ref hbRef, reporting string) (Action, string, *HalvingInputs, []Decision) {
	b := h.bracket(ref)
	if !b.curIterDone() {
		waiting := 0
		for _, t := range b.Live {
			if t.Time < b.Milestone {
				waiting++
			}
		}
		return Pause, fmt.Sprintf("paused at milestone %s (%s): waiting for %s of band %d bracket %d to reach it",
			num(b.Milestone), h.cfg.TimeAttr, plural(waiting, "trial"), ref.Band, ref.Bracket), nil, nil
	}
	if h.finished(b) {
		reason := fmt.Sprintf(bracketFinished+"every live trial of band %d bracket %d reached its last milestone %s",
			ref.Band, ref.Bracket, num(b.Milestone))
		var ds []Decision
		for _, t := range slices.Clone(b.Live) {
			if t.Paused && t.Trial != reporting {
				ds = append(ds, Decision{Trial: t.Trial, Action: Stop, Reason: reason})
				ds = append(ds, h.drop(ref, t.Trial)...)
			}
		}
		return Stop, reason, nil, ds
	}
	in, good, bad := h.halve(ref)
	act := Pause
	var ds []Decision
	for _, t := range bad {
		reason := h.halvingReason(in, t, "stopped")
		if t == reporting {
			b.cleanup(t)
			act = Stop
			continue
		}
		if b.live(t) != nil {
			ds = append(ds, Decision{Trial: t, Action: Stop, Reason: reason, Halving: in})
			ds = append(ds, h.drop(ref, t)...)
		}
	}
	for _, t := range good {
		lt := b.live(t)
		if lt == nil || !h.continueTrial(b, lt) {
			continue
		}
		switch {
		case t == reporting:
			act = Continue
		case lt.Paused:
			lt.Paused = false
			ds = append(ds, Decision{Trial: t, Action: Resume, Reason: h.halvingReason(in, t, "resumed"), Halving: in})
		}
	}
	verb := map[Action]string{Stop: "stopped", Continue: "goes on", Pause: "stays paused"}[act]
	if reporting == "" {
		return act, "", in, ds
	}
	return act, h.halvingReason(in, reporting, verb), in, ds
}

// halve is Ray's successive_halving: it returns the inputs, the trials that
// go on and the ones stopped.
func (h *HyperBand) halve(ref hbRef) (*HalvingInputs, []string, []string) {
	b := h.bracket(ref)
	in := &HalvingInputs{Band: ref.Band, Bracket: ref.Bracket, Milestone: b.Milestone}
	for _, t := range b.Live {
		r := Float(math.Inf(-1))
		if t.Reward != nil {
			r = *t.Reward
		}
		in.Ranked = append(in.Ranked, Ranked{Trial: t.Trial, Reward: r})
	}
	slices.SortStableFunc(in.Ranked, func(x, y Ranked) int { return cmp.Compare(x.Reward, y.Reward) })
	trials := make([]string, len(in.Ranked))
	for i, r := range in.Ranked {
		trials[i] = r.Trial
	}
	if b.Halves == 0 && !h.cfg.StopLastTrials {
		in.Keep = len(trials)
		return in, trials, nil
	}
	b.Halves--
	b.N = int(math.Ceil(float64(b.N) / h.cfg.ReductionFactor))
	b.R = math.Trunc(min(b.R*h.cfg.ReductionFactor, h.cfg.MaxT-b.Milestone))
	b.Milestone = b.R
	in.Keep, in.Next = b.N, b.Milestone
	cut := max(len(trials)-b.N, 0)
	return in, trials[cut:], trials[:cut]
}

func (h *HyperBand) halvingReason(in *HalvingInputs, trial, verb string) string {
	rank := 0
	var reward Float
	for i, r := range in.Ranked {
		if r.Trial == trial {
			rank, reward = len(in.Ranked)-i, r.Reward
		}
	}
	return fmt.Sprintf("%s by successive halving at milestone %s (%s): reward %s ranks %d of %d in band %d bracket %d; the best %d go on to %s",
		verb, num(in.Milestone), h.cfg.TimeAttr, num(float64(reward)), rank, len(in.Ranked), in.Band, in.Bracket, in.Keep, num(in.Next))
}

// drop is Ray's stop_trial of a paused trial, which calls on_trial_remove:
// the trial leaves the bracket, and an unfinished bracket is processed
// again. It returns the decisions that processing made.
func (h *HyperBand) drop(ref hbRef, trial string) []Decision {
	r := h.st.Trials[trial]
	r.Ended = true
	h.st.Trials[trial] = r
	return h.remove(ref, trial)
}

func (h *HyperBand) remove(ref hbRef, trial string) []Decision {
	b := h.bracket(ref)
	b.cleanup(trial)
	if h.finished(b) {
		return nil
	}
	_, _, _, ds := h.process(ref, "")
	return ds
}

// HoldsPaused is true: a trial HyperBand pauses waits until its bracket is
// halved and a Resume decision frees it (Ray's choose_trial_to_run skips a
// paused trial until then); the other schedulers' paused trials resume
// whenever a slot is free.
func (h *HyperBand) HoldsPaused() bool { return true }

// Resumed does nothing: HyperBand knows a trial runs again from its Resume
// decision or its next result.
func (h *HyperBand) Resumed(string) {}

// Complete is Remove: Ray's on_trial_complete is its on_trial_remove.
func (h *HyperBand) Complete(res Result) []Decision { return h.Remove(res.Trial) }

// Remove takes the trial out of its bracket and, unless the bracket is
// finished, processes it: the trial may have been the last one the others
// waited for.
func (h *HyperBand) Remove(trial string) []Decision {
	ref, ok := h.st.Trials[trial]
	if !ok || ref.Ended {
		return nil
	}
	ref.Ended = true
	h.st.Trials[trial] = ref
	return h.remove(ref, trial)
}

// MarshalJSON returns the bands, brackets and trials.
func (h *HyperBand) MarshalJSON() ([]byte, error) { return marshalState(h.st) }

// UnmarshalJSON restores a state from MarshalJSON.
func (h *HyperBand) UnmarshalJSON(data []byte) error {
	var st hbState
	if err := unmarshalState("hyperband", data, &st); err != nil {
		return err
	}
	if len(st.Bands) == 0 || st.Band != len(st.Bands)-1 {
		return fmt.Errorf("hyperband: state's band %d is not the last of %d", st.Band, len(st.Bands))
	}
	for _, ref := range st.Trials {
		if ref.Band >= len(st.Bands) || ref.Bracket >= len(st.Bands[ref.Band]) || st.Bands[ref.Band][ref.Bracket] == nil {
			return fmt.Errorf("hyperband: state places a trial in band %d bracket %d, which does not exist", ref.Band, ref.Bracket)
		}
	}
	if st.Trials == nil {
		st.Trials = map[string]hbRef{}
	}
	h.st = st
	return nil
}

// Attrs are time_attr and the metric.
func (h *HyperBand) Attrs() []string { return h.cfg.attrs(h.cfg.TimeAttr) }
