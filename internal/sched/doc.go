// Package sched holds the trial schedulers' rules — fifo, asha
// (async_hyperband), hyperband, median_stopping_rule and pbt — with Ray
// Tune's names, defaults and rules. It is pure: no I/O, no clock, no
// global random generator, and it never iterates a map in map order.
//
// # Overview
//
// A controller folds the event log in order and calls a Scheduler: Add for
// each new trial, Result for each result, Resumed when a paused trial runs
// again, Complete or Remove when a trial ends. Each call returns Decisions
// (Continue, Stop, Pause, Resume, Exploit, Record) with a reason for a
// person and the typed inputs it came from (the rung, the cutoff and the
// values; the halving ranking; the running means; the donor and the new
// config), which `tunejet explain` can print from the log alone.
//
// # Restoring exactly
//
// A scheduler's state is plain data: MarshalJSON returns it (NaN and
// infinite metrics included, see Float) and UnmarshalJSON puts it back
// into a scheduler built from the same config, equal field for field. What
// a scheduler needs and does not remember — whether trials wait for a slot,
// the donor's config, and a random generator — is passed in on each call
// (Context). The package never owns generator state: the caller seeds a
// fresh *rand.Rand for each decision that draws (ASHA's bracket choice with
// brackets > 1, PBT's donor and explore), e.g. from (experiment seed,
// decision kind, ordinal). So a restored controller that replays the same
// calls from a snapshot's state gets the same decisions, byte for byte.
//
// # Deviations from Ray
//
// ASHA counts its rungs by comparing grace*rf^k with max_t, not with Ray's
// logarithm (see ashaMilestones). HyperBand's max_t must be >= 1. The
// median rule compares NaN metrics as "not worse". PBT offers a donor's
// latest reported checkpoint rather than forcing a save, draws the donor
// among upper trials that have a checkpoint, and visits
// hyperparam_mutations in sorted key order; synch=True and
// custom_explore_fn are not offered. Scheduler-driven trial choice (Ray's
// choose_trial_to_run) is left to the controller's FIFO order.
package sched
