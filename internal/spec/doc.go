// Package spec reads experiment files: the YAML or JSON form of an
// events.ExperimentSpec.
//
// # Overview
//
// ParseFile and Parse decode an experiment file, check every field, apply
// the defaults, and return the spec that the client submits. YAML and JSON
// share one schema and one decoder, and both report errors with line
// numbers. A file that is valid JSON is read as encoding/json reads it
// (the YAML parser refuses surrogate pair escapes and keys over 1024
// characters); any other file is YAML. Validate applies the same checks to
// a spec built in Go, and ApplyDefaults fills in the defaults.
//
// The decoder turns the file into plain values first (mappings, lists,
// strings, booleans, ints, float64s and nulls), recording the line of
// every dotted key and refusing duplicate keys, self-referring aliases and
// numbers beyond float64. It then reads each section into its events
// struct with settings.Decode, by the struct's json names: the one reader
// of the scheduler's, stoppers' and search algorithm's settings, with its
// wording ("expected an integer, got string "ten""). The keys of other
// shapes have readers here: trainable (a name or a mapping), resources,
// param_space, scheduler and search_alg (a name or the mapping form), the
// wire forms scheduler_config, search_alg_config and points_to_evaluate,
// run_config.name, stop, stoppers and fail_fast. Each problem is recorded
// at its key's line; a value that could not be read is not checked again.
//
// # Schema
//
// Keys are Ray Tune's, in snake_case:
//
//	name: mnist-lr                     # optional; see Names
//	trainable:                         # a registered Go trainable's name, or:
//	  command: ["python3", "train.py"] # a list, run in the file's folder
//	  name: train                      # optional display name
//	  resources:                       # what each trial needs (Ray's tune.with_resources)
//	    cpu: 1                         # default 1
//	    gpu: 0.5                       # default 0; < 1 shares a GPU, > 1 whole GPUs
//	    memory: 2G                     # bytes, or K M G T Ki Mi Gi Ti
//	    custom_name: 2                 # any other key: a custom resource
//	    # an amount may be {config: "<dotted key>"}: the trial's config value
//	param_space:                       # see package internal/search
//	  lr: {loguniform: [1e-4, 1e-1]}
//	  momentum: {grid_search: [0.8, 0.9]}
//	  sched: {literal: {uniform: 1}}   # a constant mapping, not a domain
//	tune_config:
//	  num_samples: 4                   # >= 1, or -1 (until stopped); default 1
//	  metric: loss
//	  mode: min                        # min | max
//	  max_concurrent_trials: 2         # 0 or absent: no limit
//	  time_budget_s: 3600              # > 0
//	  seed: 42                         # absent: the controller picks one
//	  search_alg: random               # random (default) | grid | tpe | external, or:
//	  search_alg:                      # the mapping form, with its settings
//	    type: tpe
//	    n_startup_trials: 10           # Optuna's names; see Tuner settings
//	    points_to_evaluate:            # random and tpe: run first, in order
//	      - {lr: 0.01}
//	  scheduler: fifo                  # fifo (default) | asha | async_hyperband |
//	                                   # hyperband | median_stopping_rule | pbt, or:
//	  scheduler:                       # the mapping form, with its settings
//	    type: asha
//	    max_t: 100                     # Ray's names; see Tuner settings
//	run_config:
//	  storage_path: s3://bucket/results
//	  name: mnist-lr                   # must equal name if both are given
//	  stop: {training_iteration: 10}   # flat; nest with "a/b"
//	  stoppers:                        # Ray's tune.stopper; a list or one mapping
//	    - {type: maximum_iteration, max_iter: 100}
//	    - {type: timeout, timeout: 3600}
//	  failure_config:
//	    max_failures: 0                # >= -1; -1 retries forever
//	    fail_fast: false               # bool or "raise"
//	    heartbeat_timeout_s: 3         # > 0
//	  checkpoint_config:
//	    num_to_keep: 2                 # >= 1, absent or null keeps all
//	    checkpoint_score_attribute: loss
//	    checkpoint_score_order: min    # max (default) | min
//	    route: auto                    # auto (default) | storage | object_store
//	  sync_config:
//	    sync_period: 300               # > 0 seconds
//	    sync_timeout: 1800             # > 0 seconds
//	    sync_artifacts: false
//	    sync_artifacts_on_checkpoint: true
//	    upload_dir: remote:bucket/tune  # mirror of <storage_path>/<name>; needs a folder storage_path
//	    exclude: ["*/checkpoint_*"]     # fnmatch patterns the mirror leaves out
//	    syncer:                         # shell templates; without one upload_dir is a URL or folder gocloud opens
//	      sync_up: rclone copy {exclude} {source} {target}   # required: {source}, {target}
//	      sync_down: rclone copy {source} {target}           # for restores
//	      delete: rclone purge {target}                      # dropped checkpoints
//	      exclude_template: --exclude {pattern}              # the default
//
// A key whose value is null counts as absent. With search_alg "grid" the
// param_space may hold only grid_search domains and plain values.
// sync_period 0 (Ray: sync at every chance) is refused, because the spec
// stores 0 as "unset": use a small period instead.
//
// # Tuner settings
//
// The mapping forms of search_alg and scheduler hold the name under type
// and the settings beside it; the spec keeps them as SearchAlgConfig,
// PointsToEvaluate and SchedulerConfig, as the file gives them. The
// spec's JSON form is a valid file too: scheduler: asha with
// scheduler_config: {max_t: 100}, search_alg: tpe with search_alg_config
// and points_to_evaluate under tune_config; a file gives each in one form
// only. internal/tuning checks the settings, and every problem is reported
// at its key's line: a scheduler's settings take Ray's names and defaults
// (time_attr, max_t, grace_period, reduction_factor, brackets,
// stop_last_trials, min_samples_required, min_time_slice, hard_stop,
// perturbation_interval, burn_in_period, hyperparam_mutations with
// param_space's syntax, quantile_fraction, resample_probability,
// perturbation_factors); a scheduler takes tune_config's metric and mode
// unless it sets its own, and both setting one is an error with Ray's
// message. tpe takes Optuna's names (n_startup_trials, n_ei_candidates,
// gamma: default | hyperopt, prior_weight, consider_prior,
// consider_magic_clip, consider_endpoints, multivariate, constant_liar,
// seed) and needs tune_config's metric and mode; its seed is the
// experiment's, and is copied to tune_config.seed when that is unset.
// points_to_evaluate name keys of the param_space, nested keys as nested
// mappings, with values their domains can produce; grid refuses them.
// stoppers are parsed by internal/stopper. Unknown keys are refused with
// a "did you mean" for a close match.
//
// # Names
//
// The experiment's name is name (or run_config.name) and must be a valid
// experiment id (events.ValidateID). Without one, it is Ray's default
// "<trainable name>_<YYYY-MM-DD_HH-MM-SS>" in local time, with characters
// that an id cannot hold replaced by '_'. A command trainable's name
// defaults to the base name, without extension, of the last element of the
// command that does not start with "-": ["python3", "train.py"] is named
// "train"; set trainable.name when the command ends in an argument value.
//
// ParseFile sets Trainable.Dir to the absolute path of the file's folder for
// a command trainable, so that relative paths in the command resolve
// against it. Parse leaves Dir for the caller to set.
//
// # Errors
//
// Every problem is an *settings.Error (matching settings.ErrInvalid with errors.Is) that reads
//
//	<file>:<line>: <dotted.key>: <message>
//
// for example
//
//	exp.yaml:7: tune_config.mode: must be "min" or "max", got "avg"
//
// Parse reports all the problems it finds, sorted by line and joined with
// errors.Join: unknown keys (with a "did you mean" for a close match), wrong
// types, values out of range, and the param_space errors of
// search.ParseSpace at the line of their key, among them a misspelled
// distribution ("param_space.lr.log_uniform: unknown distribution, did you
// mean "loguniform"?"). Where Ray Tune has a message
// for a mistake (fail_fast, num_to_keep, checkpoint_score_order, nested stop
// criteria), the message is Ray's.
package spec
