package tuning

import (
	"strings"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/sched"
	"github.com/tunejet/tunejet/internal/settings"
)

// rayMetricModeMsg is Ray's message for a metric or mode given both to the
// scheduler and to the Tuner.
const rayMetricModeMsg = "You passed a `metric` or `mode` argument to `Tuner()`, but the scheduler you are using " +
	"was already instantiated with their own `metric` and `mode` parameters. Either remove the arguments " +
	"from your scheduler or from `Tuner()`."

// readScheduler reads the config of the scheduler tune_config.scheduler
// names (FIFO when unset) from its settings, by Ray's names, with
// settings.Decode, and records every problem, the config's Validate
// included, in p. The scheduler takes tune_config's metric and mode unless
// its settings set them, as in Ray.
func readScheduler(spec *events.ExperimentSpec, p *settings.Problems) sched.Config {
	tc := spec.TuneConfig
	name := tc.Scheduler
	if name == "" {
		name = sched.FIFOName
	}
	cfg, ok := sched.NewConfig(name)
	if !ok {
		p.Add(keyScheduler, "unknown scheduler %q%s; valid: %s", name, didYouMean(name, sched.Names()), strings.Join(sched.Names(), ", "))
		return nil
	}
	settings.Decode(p.Under(keyScheduler), name, tc.SchedulerConfig, cfg)
	if o, ok := cfg.(interface{ Target() *sched.Objective }); ok {
		resolveObjective(o.Target(), name, tc, p)
	}
	p.AddErr(keyScheduler, cfg.Validate())
	return cfg
}

// resolveObjective applies Ray's rule to the objective o the scheduler's
// settings gave: the scheduler takes tune_config's metric and mode unless
// its own settings set them, and both setting one is an error (Ray's
// message). A missing or invalid metric or mode is reported here, at the
// key to set, and replaced by a stand-in so that the scheduler's own
// Validate does not report it again.
func resolveObjective(o *sched.Objective, name string, tc events.TuneConfig, p *settings.Problems) {
	if tc.MultiObjective() {
		p.Add(keyMetric, "scheduler %q judges trials by one metric, and tune_config.metric lists %d (%s): "+
			"use scheduler fifo (the default) with several metrics", name, len(tc.Metrics), strings.Join(tc.Metrics, ", "))
		o.Metric, o.Mode = "-", sched.Max
		return
	}
	switch {
	case o.Metric != "" && tc.Metric != "":
		p.Add(keyScheduler+".metric", "%s", rayMetricModeMsg)
	case o.Mode != "" && tc.Mode != "":
		p.Add(keyScheduler+".mode", "%s", rayMetricModeMsg)
	}
	modeKey := keyScheduler + ".mode"
	if o.Metric == "" {
		o.Metric = tc.Metric
	}
	if o.Mode == "" {
		o.Mode, modeKey = sched.Mode(tc.Mode), keyMode
	}
	if o.Metric == "" {
		p.Add(keyMetric, "required by scheduler %q: set tune_config.metric (or metric in tune_config.scheduler)", name)
		o.Metric = "-"
	}
	switch o.Mode {
	case "":
		p.Add(keyMode, "required by scheduler %q: set tune_config.mode (or mode in tune_config.scheduler) to \"min\" or \"max\"", name)
		o.Mode = sched.Max
	case sched.Min, sched.Max:
	default:
		p.OneOf(modeKey, string(o.Mode), string(sched.Min), string(sched.Max))
		o.Mode = sched.Max
	}
}
