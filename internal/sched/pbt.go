package sched

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tunejet/tunejet/internal/settings"
)

// PBTConfig is Ray's asynchronous PopulationBasedTraining:
// tune_config.scheduler "pbt".
type PBTConfig struct {
	Objective
	// TimeAttr is the result key that measures progress. Default
	// "time_total_s".
	TimeAttr string `json:"time_attr"`
	// PerturbationInterval is the time_attr between a trial's
	// perturbations. Default 60.
	PerturbationInterval float64 `json:"perturbation_interval"`
	// BurnInPeriod: no trial is perturbed younger. Default 0.
	BurnInPeriod float64 `json:"burn_in_period"`
	// HyperparamMutations say how explore changes each key. Required.
	HyperparamMutations map[string]Mutation `json:"-"`
	// QuantileFraction is the share of trials in each of the lower and
	// upper quantiles, in [0, 0.5]. Default 0.25.
	QuantileFraction float64 `json:"quantile_fraction"`
	// ResampleProbability is the chance that explore resamples a value
	// instead of perturbing it. Default 0.25.
	ResampleProbability float64 `json:"resample_probability"`
	// PerturbationFactors are the factors explore multiplies a
	// distribution's value by. Default [1.2, 0.8].
	PerturbationFactors []float64 `json:"perturbation_factors"`
	// CustomExploreFn names Ray's custom_explore_fn, a function of the
	// experiment's driver that takes each explored config last.
	CustomExploreFn string `json:"custom_explore_fn"`
}

func init() {
	register(func() Config { c := DefaultPBTConfig(); return &c }, "pbt")
}

// TimeKey returns time_attr, the result key that measures progress.
func (c *PBTConfig) TimeKey() string { return c.TimeAttr }

// New builds the scheduler the config describes.
func (c *PBTConfig) New() (Scheduler, error) { return built(NewPBT(*c)) }

// DefaultPBTConfig returns Ray's defaults; Metric, Mode and
// HyperparamMutations are left empty.
func DefaultPBTConfig() PBTConfig {
	return PBTConfig{
		TimeAttr: "time_total_s", PerturbationInterval: 60, QuantileFraction: 0.25,
		ResampleProbability: 0.25, PerturbationFactors: []float64{1.2, 0.8},
	}
}

// Validate reports every broken rule joined with errors.Join; each is a
// *settings.Error.
func (c PBTConfig) Validate() error {
	p := &settings.Problems{}
	checkObjective(p, c.Objective, c.TimeAttr)
	p.Check(c.PerturbationInterval > 0, "perturbation_interval", "must be > 0, got %v", c.PerturbationInterval)
	p.Check(c.BurnInPeriod >= 0, "burn_in_period", "must be >= 0, got %v", c.BurnInPeriod)
	p.Check(len(c.HyperparamMutations) > 0, "hyperparam_mutations", "must name at least one key")
	validateMutations(p, "", c.HyperparamMutations)
	p.Check(c.QuantileFraction >= 0 && c.QuantileFraction <= 0.5, "quantile_fraction", "must be in [0, 0.5], got %v", c.QuantileFraction)
	p.Check(c.ResampleProbability >= 0 && c.ResampleProbability <= 1, "resample_probability", "must be in [0, 1], got %v", c.ResampleProbability)
	p.Check(len(c.PerturbationFactors) > 0, "perturbation_factors", "must not be empty")
	return p.Err()
}

// PBT is asynchronous Population Based Training as Ray's
// PopulationBasedTraining (synch=False). Each perturbation_interval of a
// trial's time_attr, past the burn-in period, its score is saved and the
// trials with a score are ranked: a trial in the upper quantile offers its
// latest checkpoint to others; a trial in the lower quantile exploits a
// random upper-quantile trial that has one: it is paused and restarts from
// that checkpoint with the donor's config, explored (see Mutation).
//
// Two differences from Ray, both forced by the bus: Ray makes an upper
// trial save a checkpoint at its perturbation, while here the donor offers
// the latest checkpoint it reported (Result.Checkpoint), so a trainable
// should checkpoint at least every perturbation_interval; and the donor is
// drawn among the upper trials that have a checkpoint, where Ray draws
// among all and skips the exploit when the one drawn has none. A trial
// with a pending exploit (decided, not yet Resumed) is not perturbed
// again: its results until then are stale.
type PBT struct {
	cfg      PBTConfig
	explorer explorer
	st       pbtState
	index    map[string]int
}

type pbtState struct {
	// Trials are in the order they were added (Ray's _trial_state), which
	// breaks ties between equal scores.
	Trials []pbtTrial `json:"trials"`
}

// pbtTrial is Ray's _PBTTrialState.
type pbtTrial struct {
	Trial                string  `json:"trial"`
	LastScore            *Float  `json:"last_score,omitempty"`
	LastCheckpoint       string  `json:"last_checkpoint,omitempty"`
	LastPerturbationTime float64 `json:"last_perturbation_time"`
	LastTrainTime        float64 `json:"last_train_time"`
	Finished             bool    `json:"finished,omitempty"`
	// PendingExploit is the checkpoint of an exploit decided and not yet
	// Resumed.
	PendingExploit string `json:"pending_exploit,omitempty"`
}

// NewPBT validates cfg and returns PBT with no trials.
func NewPBT(cfg PBTConfig) (*PBT, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &PBT{
		cfg:      cfg,
		explorer: explorer{resample: cfg.ResampleProbability, factors: cfg.PerturbationFactors},
		index:    map[string]int{},
	}, nil
}

func (p *PBT) trial(id string) *pbtTrial {
	i, ok := p.index[id]
	if !ok {
		return nil
	}
	return &p.st.Trials[i]
}

// FillConfig returns a copy of a new trial's config in which every mutated
// key the param_space left out is drawn from hyperparam_mutations, as Ray's
// on_trial_add does. The controller calls it before it records the trial's
// config, with r seeded for that trial.
func (p *PBT) FillConfig(config map[string]any, r *rand.Rand) map[string]any {
	out, _ := deepCopy(config).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	fill(out, p.cfg.HyperparamMutations, r)
	return out
}

// Add enters the trial in the population.
func (p *PBT) Add(trial string, _ *rand.Rand) Decision {
	if p.trial(trial) == nil {
		p.index[trial] = len(p.st.Trials)
		p.st.Trials = append(p.st.Trials, pbtTrial{Trial: trial})
	}
	return Decision{Trial: trial, Action: Continue}
}

// Result perturbs the trial when an interval has passed since its last
// perturbation, as Ray's on_trial_result. ctx.Rand draws the donor and
// explores; ctx.Config gives the donor's config. At a perturbation the
// trial is paused when others wait (time-multiplexing), unless it exploits.
func (p *PBT) Result(res Result, ctx Context) []Decision {
	cont := []Decision{{Trial: res.Trial, Action: Continue}}
	st := p.trial(res.Trial)
	t, score, ok := p.cfg.reward(res, p.cfg.TimeAttr)
	if st == nil || st.Finished || st.PendingExploit != "" || !ok ||
		t < p.cfg.BurnInPeriod || t-st.LastPerturbationTime < p.cfg.PerturbationInterval {
		return cont
	}
	sc := Float(score)
	st.LastScore, st.LastTrainTime, st.LastPerturbationTime = &sc, t, t
	lower, upper := p.quantiles()
	in := &ExploitInputs{Time: t, Score: sc, Lower: p.ranked(lower), Upper: p.ranked(upper)}
	d := Decision{Trial: res.Trial, Action: Continue, Exploit: in}
	if ctx.Waiting {
		d.Action = Pause
	}
	at := fmt.Sprintf("perturbation at %s %s", p.cfg.TimeAttr, num(t))
	st.LastCheckpoint = ""
	switch {
	case slices.Contains(upper, res.Trial):
		in.Quantile = "upper"
		st.LastCheckpoint = res.Checkpoint
		d.Reason = fmt.Sprintf("%s: score %s in the upper quantile; offers checkpoint %q", at, num(score), res.Checkpoint)
		if res.Checkpoint == "" {
			d.Reason = fmt.Sprintf("%s: score %s in the upper quantile, but no checkpoint to offer", at, num(score))
		}
	case slices.Contains(lower, res.Trial):
		in.Quantile = "lower"
		d.Reason = fmt.Sprintf("%s: score %s in the lower quantile, but no upper trial has a checkpoint", at, num(score))
		if donor := p.donor(upper, ctx.Rand); donor != nil {
			p.exploit(st, donor, &d, ctx)
			d.Reason = fmt.Sprintf("%s: score %s in the lower quantile; exploits %s (score %s) from %q: %s",
				at, num(score), donor.Trial, num(float64(*donor.LastScore)), donor.LastCheckpoint, opsText(in))
		}
	default:
		d.Reason = fmt.Sprintf("%s: score %s in neither quantile", at, num(score))
	}
	if d.Action == Pause {
		d.Reason += "; paused to let waiting trials run"
	}
	return []Decision{d}
}

// quantiles are Ray's _quantiles: the unfinished trials with a score,
// sorted by score (stable), and k = ceil(n * quantile_fraction), at most
// floor(n/2), from each end; none when n <= 1.
func (p *PBT) quantiles() (lower, upper []string) {
	var scored []pbtTrial
	for _, t := range p.st.Trials {
		if t.LastScore != nil && !t.Finished {
			scored = append(scored, t)
		}
	}
	slices.SortStableFunc(scored, func(a, b pbtTrial) int {
		return cmp.Compare(*a.LastScore, *b.LastScore)
	})
	n := len(scored)
	if n <= 1 {
		return nil, nil
	}
	k := int(math.Ceil(float64(n) * p.cfg.QuantileFraction))
	if float64(k) > float64(n)/2 {
		k = n / 2
	}
	for i := range k {
		lower = append(lower, scored[i].Trial)
		upper = append(upper, scored[n-k+i].Trial)
	}
	return lower, upper
}

func (p *PBT) ranked(trials []string) []Ranked {
	out := make([]Ranked, len(trials))
	for i, id := range trials {
		out[i] = Ranked{Trial: id, Reward: *p.trial(id).LastScore}
	}
	return out
}

// donor draws uniformly among the upper trials with a checkpoint; nil when
// none has one.
func (p *PBT) donor(upper []string, r *rand.Rand) *pbtTrial {
	var with []*pbtTrial
	for _, id := range upper {
		if t := p.trial(id); t.LastCheckpoint != "" {
			with = append(with, t)
		}
	}
	if len(with) == 0 {
		return nil
	}
	return with[r.IntN(len(with))]
}

// exploit is Ray's _exploit: the trial takes the donor's checkpoint, an
// explored copy of its config, and its perturbation and train times.
func (p *PBT) exploit(st, donor *pbtTrial, d *Decision, ctx Context) {
	ops := map[string]string{}
	d.Action = Exploit
	d.Exploit.Source, d.Exploit.SourceCheckpoint = donor.Trial, donor.LastCheckpoint
	var config map[string]any
	if ctx.Config != nil {
		config = ctx.Config(donor.Trial)
	}
	d.Exploit.NewConfig = p.explorer.explore(config, p.cfg.HyperparamMutations, ctx.Rand, "", ops)
	d.Exploit.Operations = ops
	d.Exploit.Driver = p.cfg.CustomExploreFn != "" || slices.Contains(slices.Collect(maps.Values(ops)), OpDriverResample)
	st.LastPerturbationTime, st.LastTrainTime = donor.LastPerturbationTime, donor.LastTrainTime
	st.PendingExploit = donor.LastCheckpoint
}

// opsText is "lr * 1.2, momentum resample" for a reason.
func opsText(in *ExploitInputs) string {
	parts := make([]string, 0, len(in.Operations))
	for _, k := range slices.Sorted(maps.Keys(in.Operations)) {
		parts = append(parts, k+" "+in.Operations[k])
	}
	return strings.Join(parts, ", ")
}

// Resumed clears the trial's pending exploit: its next results are from the
// run that restarted from the donor's checkpoint.
func (p *PBT) Resumed(trial string) {
	if st := p.trial(trial); st != nil {
		st.PendingExploit = ""
	}
}

// Complete takes the trial out of the quantiles.
func (p *PBT) Complete(res Result) []Decision { return p.Remove(res.Trial) }

// Remove takes the trial out of the quantiles.
func (p *PBT) Remove(trial string) []Decision {
	if st := p.trial(trial); st != nil {
		st.Finished = true
	}
	return nil
}

// PendingExploits maps each trial with a pending exploit to the donor's
// checkpoint it will restart from: retention must keep those checkpoints.
func (p *PBT) PendingExploits() map[string]string {
	out := map[string]string{}
	for _, t := range p.st.Trials {
		if t.PendingExploit != "" {
			out[t.Trial] = t.PendingExploit
		}
	}
	return out
}

// MarshalJSON returns the population's per-trial state.
func (p *PBT) MarshalJSON() ([]byte, error) { return marshalState(p.st) }

// UnmarshalJSON restores a state from MarshalJSON.
func (p *PBT) UnmarshalJSON(data []byte) error {
	var st pbtState
	if err := unmarshalState("pbt", data, &st); err != nil {
		return err
	}
	index := make(map[string]int, len(st.Trials))
	for i, t := range st.Trials {
		if _, dup := index[t.Trial]; dup {
			return fmt.Errorf("pbt: state holds trial %q twice", t.Trial)
		}
		index[t.Trial] = i
	}
	p.st, p.index = st, index
	return nil
}

// Attrs are time_attr and the metric.
func (p *PBT) Attrs() []string { return p.cfg.attrs(p.cfg.TimeAttr) }
