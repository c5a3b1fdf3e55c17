// Package stopper holds Ray Tune's stoppers (ray.tune.stopper) as pure
// state machines: MaximumIterationStopper, TrialPlateauStopper,
// ExperimentPlateauStopper, TimeoutStopper and CombinedStopper, with Ray's
// argument names, defaults and rules. It does no I/O, reads no clock and
// draws no random number.
//
// # Overview
//
// A Stopper answers Ray's two questions. StopTrial(trialID, result) folds
// one reported result into the stopper's state and says whether that trial
// should stop; StopAll(now) says whether the whole experiment should stop,
// now seconds after it started (the caller takes the time from the event
// it folds, e.g. state.Experiment.Elapsed at the result's event time), and
// changes nothing. Every answer is a Decision with a short reason, e.g.
//
//	plateau: std 0.004 of the last 4 results of loss < 0.01
//
// The controller folds the experiment's results in log order through
// StopTrial. The state is plain data: Marshal encodes a stopper with its
// configuration and state as deterministic JSON, Unmarshal restores it,
// and a restored stopper answers the rest of the results exactly as the
// original would have.
//
// # Experiment file
//
// Parse builds a stopper from the value a YAML or JSON parser yields: a
// list is the CombinedStopper of its items, and each item is a mapping
// with a type and Ray's arguments (a null argument takes the default):
//
//	stoppers:
//	  - {type: maximum_iteration, max_iter: 100}
//	  - {type: trial_plateau, metric: loss, std: 0.01, num_results: 4,
//	     grace_period: 4, metric_threshold: 0.5, mode: min}
//	  - {type: experiment_plateau, metric: loss, std: 0.001, top: 10,
//	     mode: min, patience: 0}
//	  - {type: timeout, timeout: 3600}
//	  - {type: combined, stoppers: [...]}
//
// Each stopper type registers itself with its defaults, and
// settings.Decode reads its arguments by their json names. Problems are
// *settings.Error values naming the dotted key, e.g.
// "run_config.stoppers.1.std: must be > 0, got -1".
//
// # Metrics
//
// A stopper's metric is a key of the result; a name with slashes
// ("val/loss") that is not a key is looked up in nested mappings, as the
// stop criteria are (Ray looks at top-level keys only). Numbers of any Go
// type count, and bools as 0 and 1 as numpy counts them; a missing,
// non-numeric, NaN or infinite value is not a usable value.
//
// # Differences from Ray
//
// Decisions match Ray's for every configuration Ray accepts and every
// result it does not fail on, except:
//
//   - Arguments that Ray accepts but that never stop or are surely a
//     mistake are errors: std <= 0, num_results < 1, grace_period < 0,
//     max_iter < 1, timeout <= 0, a mode other than min or max, and a
//     metric_threshold without a mode (Ray checks the mode only when the
//     threshold is not 0). Ray's ExperimentPlateauStopper wants std as a
//     float; here 1 is 1.0.
//   - A result whose metric is missing or not numeric keeps a
//     TrialPlateauStopper from stopping the trial while it is among the
//     last num_results, as a NaN does in Ray (where None fails np.std, or,
//     with a metric_threshold, the comparison). ExperimentPlateauStopper
//     skips such a value and an infinite one where Ray fails on a missing
//     metric and keeps an infinite value among the top ones.
//   - TimeoutStopper measures the experiment's running time as the caller
//     gives it instead of Ray's wall clock from its first check; the
//     controller's clock counts the earlier runs of a restored experiment
//     as Ray's saved budget does.
//
// As in Ray, a CombinedStopper stops asking at the first stopper that
// stops a trial, so the later ones do not see that result; an
// ExperimentPlateauStopper answers StopTrial with its StopAll, so it stops
// the trial that made the experiment plateau; and its patience of 0 or 1
// both stop at the first result that finds the top values plateaued.
package stopper
