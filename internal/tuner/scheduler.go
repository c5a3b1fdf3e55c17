package tuner

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/sched"
	"github.com/tunejet/tunejet/internal/search"
)

// The scheduler names of tune_config.scheduler.
const (
	SchedulerFIFO           = "fifo"
	SchedulerASHA           = "asha"
	SchedulerAsyncHyperBand = "async_hyperband"
	SchedulerHyperBand      = "hyperband"
	SchedulerMedian         = "median_stopping_rule"
	SchedulerPBT            = "pbt"
)

// SchedulerNames lists the names tune_config.scheduler takes.
var SchedulerNames = []string{SchedulerFIFO, SchedulerASHA, SchedulerAsyncHyperBand, SchedulerHyperBand, SchedulerMedian, SchedulerPBT}

// rayMetricModeMsg is Ray's message for a metric or mode given both to the
// scheduler and to the Tuner.
const rayMetricModeMsg = "You passed a `metric` or `mode` argument to `Tuner()`, but the scheduler you are using " +
	"was already instantiated with their own `metric` and `mode` parameters. Either remove the arguments " +
	"from your scheduler or from `Tuner()`."

// Scheduler builds the scheduler spec names, from tune_config.scheduler and
// its settings (SchedulerConfig, by Ray's names): FIFO when unset. The
// scheduler takes tune_config's metric and mode unless its settings set
// them, as in Ray. Every problem is a *KeyError (joined).
func Scheduler(spec *events.ExperimentSpec) (sched.Scheduler, error) {
	p := &problems{}
	cfg := schedulerConfig(spec, p)
	if err := p.err(); err != nil {
		return nil, err
	}
	s, err := newScheduler(cfg)
	if err != nil {
		p.addErr(keyScheduler, err)
		return nil, p.err()
	}
	return s, nil
}

// newScheduler builds the scheduler of a config schedulerConfig returned.
func newScheduler(cfg any) (sched.Scheduler, error) {
	switch c := cfg.(type) {
	case sched.ASHAConfig:
		return sched.NewASHA(c)
	case sched.HyperBandConfig:
		return sched.NewHyperBand(c)
	case sched.MedianConfig:
		return sched.NewMedianStoppingRule(c)
	case sched.PBTConfig:
		return sched.NewPBT(c)
	}
	return sched.NewFIFO(), nil
}

// schedulerConfig reads the scheduler's config — nil for FIFO, else a
// sched.ASHAConfig, HyperBandConfig, MedianConfig or PBTConfig — and adds
// every problem, the config's Validate included, to p.
func schedulerConfig(spec *events.ExperimentSpec, p *problems) any {
	tc := spec.TuneConfig
	set := settings{prefix: keyScheduler, name: tc.Scheduler, p: p}
	var obj objective
	readers := map[string]reader{}
	withObjective := func() {
		readers["metric"] = set.str(&obj.metric)
		readers["mode"] = set.str(&obj.mode)
	}
	var cfg any
	switch tc.Scheduler {
	case "", SchedulerFIFO:
		set.name = SchedulerFIFO
		set.read(tc.SchedulerConfig, readers)
		return nil
	case SchedulerASHA, SchedulerAsyncHyperBand:
		c := sched.DefaultASHAConfig()
		withObjective()
		readers["time_attr"] = set.str(&c.TimeAttr)
		readers["max_t"] = set.number(&c.MaxT)
		readers["grace_period"] = set.number(&c.GracePeriod)
		readers["reduction_factor"] = set.number(&c.ReductionFactor)
		readers["brackets"] = set.integer(&c.Brackets)
		readers["stop_last_trials"] = set.boolean(&c.StopLastTrials)
		set.read(tc.SchedulerConfig, readers)
		c.Objective = obj.resolve(tc, p)
		p.addErr(keyScheduler, c.Validate())
		cfg = c
	case SchedulerHyperBand:
		c := sched.DefaultHyperBandConfig()
		withObjective()
		readers["time_attr"] = set.str(&c.TimeAttr)
		readers["max_t"] = set.number(&c.MaxT)
		readers["reduction_factor"] = set.number(&c.ReductionFactor)
		readers["stop_last_trials"] = set.boolean(&c.StopLastTrials)
		set.read(tc.SchedulerConfig, readers)
		c.Objective = obj.resolve(tc, p)
		p.addErr(keyScheduler, c.Validate())
		cfg = c
	case SchedulerMedian:
		c := sched.DefaultMedianConfig()
		withObjective()
		readers["time_attr"] = set.str(&c.TimeAttr)
		readers["grace_period"] = set.number(&c.GracePeriod)
		readers["min_samples_required"] = set.integer(&c.MinSamplesRequired)
		readers["min_time_slice"] = set.number(&c.MinTimeSlice)
		readers["hard_stop"] = set.boolean(&c.HardStop)
		set.read(tc.SchedulerConfig, readers)
		c.Objective = obj.resolve(tc, p)
		p.addErr(keyScheduler, c.Validate())
		cfg = c
	case SchedulerPBT:
		c := sched.DefaultPBTConfig()
		withObjective()
		readers["time_attr"] = set.str(&c.TimeAttr)
		readers["perturbation_interval"] = set.number(&c.PerturbationInterval)
		readers["burn_in_period"] = set.number(&c.BurnInPeriod)
		readers["hyperparam_mutations"] = func(key string, v any) { c.HyperparamMutations = mutations(key, v, p) }
		readers["quantile_fraction"] = set.number(&c.QuantileFraction)
		readers["resample_probability"] = set.number(&c.ResampleProbability)
		readers["perturbation_factors"] = set.numbers(&c.PerturbationFactors)
		set.read(tc.SchedulerConfig, readers)
		c.Objective = obj.resolve(tc, p)
		p.addErr(keyScheduler, c.Validate())
		cfg = c
	default:
		p.add(keyScheduler, "unknown scheduler %q%s; valid: %s", tc.Scheduler, didYouMean(tc.Scheduler, SchedulerNames), strings.Join(SchedulerNames, ", "))
	}
	return cfg
}

// didYouMean is ` (did you mean "x"?)` for a close known name, or "".
func didYouMean(name string, known []string) string {
	if s := search.Suggest(name, known); s != "" {
		return ` (did you mean "` + s + `"?)`
	}
	return ""
}

// objective is the metric and mode a scheduler's own settings give.
type objective struct{ metric, mode string }

// resolve applies Ray's rule: the scheduler takes tune_config's metric and
// mode unless its own settings set them, and both setting one is an error
// (Ray's message). A missing or invalid metric or mode is reported here, at
// the key to set, and replaced by a stand-in so that the scheduler's own
// Validate does not report it again.
func (o objective) resolve(tc events.TuneConfig, p *problems) sched.Objective {
	name := tc.Scheduler
	switch {
	case o.metric != "" && tc.Metric != "":
		p.add(keyScheduler+".metric", "%s", rayMetricModeMsg)
	case o.mode != "" && tc.Mode != "":
		p.add(keyScheduler+".mode", "%s", rayMetricModeMsg)
	}
	metric, mode, modeKey := o.metric, o.mode, keyScheduler+".mode"
	if metric == "" {
		metric = tc.Metric
	}
	if mode == "" {
		mode, modeKey = tc.Mode, keyMode
	}
	if metric == "" {
		p.add(keyMetric, "required by scheduler %q: set tune_config.metric (or metric in tune_config.scheduler)", name)
		metric = "-"
	}
	switch mode {
	case "":
		p.add(keyMode, "required by scheduler %q: set tune_config.mode (or mode in tune_config.scheduler) to \"min\" or \"max\"", name)
		mode = string(sched.Max)
	case string(sched.Min), string(sched.Max):
	default:
		p.add(modeKey, "must be \"min\" or \"max\", got %q", mode)
		mode = string(sched.Max)
	}
	return sched.Objective{Metric: metric, Mode: sched.Mode(mode)}
}

// mutations parses PBT's hyperparam_mutations at key: a mapping whose
// values are lists (explore shifts among their values), distributions with
// param_space's syntax (explore perturbs or resamples) or mappings of
// further mutations. It is parsed with internal/search, so values are
// normalized as in param_space: ints stay ints.
func mutations(key string, v any, p *problems) map[string]sched.Mutation {
	m, ok := v.(map[string]any)
	if !ok {
		p.add(key, "expected a mapping of config keys to lists, distributions or mappings, got %s", describe(v))
		return nil
	}
	space, err := search.ParseSpace(m)
	if err != nil {
		p.addErr(key, err)
		p.hide(key)
		return nil
	}
	plain, _ := space.Trial(0, 0)
	domains := map[string]search.Domain{}
	for _, d := range space.Domains() {
		domains[strings.Join(d.Path, ".")] = d
	}
	n := len(p.errs)
	out := mutationsOf(key, nil, plain, space, domains, p)
	if len(p.errs) > n {
		p.hide(key)
		return nil
	}
	return out
}

// mutationsOf builds the mutations of the mapping config at path, a
// mapping of the space's plain form, in which each domain holds a sample.
func mutationsOf(key string, path []string, config map[string]any, space *search.Space,
	domains map[string]search.Domain, p *problems) map[string]sched.Mutation {
	out := map[string]sched.Mutation{}
	for _, k := range slices.Sorted(maps.Keys(config)) {
		v := config[k]
		at := append(slices.Clone(path), k)
		dotted := strings.Join(at, ".")
		if d, ok := domains[dotted]; ok {
			if d.Kind == "grid_search" {
				p.add(key+"."+dotted, "grid_search cannot be explored; use a list of values instead")
				continue
			}
			out[k] = sched.Mutation{Sample: sampler(space, d), Int: d.Int}
			continue
		}
		switch x := v.(type) {
		case []any:
			if len(x) == 0 {
				p.add(key+"."+dotted, "must not be an empty list")
				continue
			}
			if hasDomainUnder(domains, dotted) {
				p.add(key+"."+dotted, "a list of mutations holds plain values; use a distribution for sampled values")
				continue
			}
			out[k] = sched.Mutation{Choices: x}
		case map[string]any:
			out[k] = sched.Mutation{Nested: mutationsOf(key, at, x, space, domains, p)}
		default:
			p.add(key+"."+dotted, "must be a list, a distribution or a mapping, got %s", describe(v))
		}
	}
	return out
}

func hasDomainUnder(domains map[string]search.Domain, dotted string) bool {
	for k := range domains {
		if strings.HasPrefix(k, dotted+".") {
			return true
		}
	}
	return false
}

// sampler draws d's value from r: the space's trial for a seed drawn from
// r, so that it draws from r alone.
func sampler(space *search.Space, d search.Domain) func(r *rand.Rand) any {
	return func(r *rand.Rand) any {
		config, _ := space.Trial(0, r.Int64())
		v, _ := d.Lookup(config)
		return v
	}
}
