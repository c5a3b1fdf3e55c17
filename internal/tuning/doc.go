// Package tuning reads an experiment's scheduler, search algorithm and
// stoppers from its spec once, into typed configs (Settings), and checks
// them: the step between the experiment file (internal/spec) and the pure
// rules of internal/sched, internal/tpe and internal/stopper. Each
// scheduler and stopper registers itself in its package, each search
// algorithm here (search_tpe.go, search_external.go); internal/settings
// reads their settings.
//
// # Settings
//
// tune_config.scheduler names the scheduler (fifo when unset; asha,
// async_hyperband, hyperband, median_stopping_rule, pbt); in the file's
// mapping form, {type: asha, max_t: 100, ...}, the other keys are its
// settings (the spec's SchedulerConfig), by Ray's names, with Ray's
// defaults for the ones left out (see the config structs of
// internal/sched). PBT's hyperparam_mutations has param_space's syntax: a
// list is explored by shifting among its values, a distribution (uniform,
// choice, randint, ...) by perturbing or resampling, a mapping holds the
// mutations of a nested key; ints stay ints. A scheduler takes
// tune_config's metric and mode unless its settings set them; setting one
// in both places is an error with Ray's message.
//
// tune_config.search_alg is random (default), grid, tpe or external. TPE's settings
// (the mapping form's keys, the spec's SearchAlgConfig) carry Optuna's
// names on top of tpe.Defaults: n_startup_trials,
// n_ei_candidates, gamma ("default" or "hyperopt"), prior_weight,
// consider_prior (true only), consider_magic_clip, consider_endpoints,
// multivariate, constant_liar and seed (which must be the experiment's
// seed). TPE needs tune_config's metric and mode. points_to_evaluate go
// with random and tpe, not grid: each point names keys of the param_space,
// nested keys as nested mappings, and gives each domain a value the domain
// can produce.
//
// run_config.stoppers is parsed by stopper.Parse.
//
// # Errors
//
// Every problem is a *settings.Error at the dotted key the experiment file
// spells, e.g. "tune_config.scheduler.grace_peroid: unknown key, did you
// mean "grace_period"?"; Parse returns them joined, and Check returns all
// of them at once, so that the spec parser can put each at the line of its
// key.
package tuning
