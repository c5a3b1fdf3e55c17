// Package nsga2 is tunejet's NSGA-II: a genetic multi-objective searcher
// with the semantics and defaults of Optuna's NSGAIISampler (optuna/
// samplers/nsgaii, commit 1d8ce7bb). It is pure: no I/O, no clock, no
// generator state of its own. Suggest is a function of the history and of
// the *rand.Rand the caller passes, so a controller that seeds that
// generator from (experiment seed, "suggest", trial ordinal) suggests the
// same config again after a restore.
//
// # What is Optuna's
//
// The trials form generations of PopulationSize. The first generation is
// drawn at random, as Optuna's RandomSampler draws: a choice uniformly, a
// number uniformly in its internal space (the log of a log domain),
// widened by half a step each side for a stepped or integer domain, then
// rounded to the step. Each later generation has a parent population: the
// elite of the previous generation's COMPLETE trials and of the previous
// parent population. The elite takes whole non-domination ranks, best
// first, while they fit in PopulationSize, then the members of the next
// rank with the largest crowding distances (the sum over the objectives of
// the normalized gap between a member's neighbours; the extremes have an
// infinite distance). A child is bred, with CrossoverProb, by uniform
// crossover of two parents, each picked by binary tournament (two members
// drawn uniformly, the first kept only if it dominates the second; the
// second parent is drawn from the others): every parameter comes from the
// first parent with probability SwappingProb and from the second
// otherwise. Without crossover the child copies one parent picked
// uniformly. Then every parameter is drawn at random again with
// MutationProb, by default 1/max(1, number of parameters). A child's
// values are always its parents' or random ones, so they are values of
// their domains: choices, integers, multiples of the step, within bounds.
// Values are the Trial's Values, each minimized; the controller negates a
// maximized objective. Parameters with one value (uniform [1, 1], a choice
// of one) always get it and do not count among the parameters.
//
// # What differs
//
// Optuna assigns a trial to a generation when it starts, from the number
// of COMPLETE trials of the latest generation, and caches each parent
// population in the study. Here nothing is stored: the trial to suggest
// is numbered one past the largest number in the history and belongs to
// generation number / PopulationSize, and Suggest rebuilds every parent
// population from the history, generation by generation. A generation
// whose predecessor has no COMPLETE trial yet (all still running, or
// failed) has no parents of its own beyond the earlier ones, and a
// generation without any parent is drawn at random. Trials numbered below
// 0 (warm starts, evaluated points) join the first parent population, the
// one generation 1 is bred from, beside generation 0. Parent populations
// are in trial-number order, as Optuna reads its cached ones back.
// PRUNED, RUNNING and failed trials, and trials without Values (or with a
// NaN among them, or another number of objectives than the first such
// trial) take no part, as Optuna counts only COMPLETE trials. A parent
// whose config has no usable value of a parameter (missing, not one of
// the domain's) passes a random one instead. Optuna keeps a child whose
// values its crossover puts out of bounds from being returned by breeding
// again; uniform crossover never does, so that loop is not needed. Every
// random number comes from the one generator passed to Suggest, so the
// draws are not Optuna's stream. Constraints (Optuna's constraints_func)
// are not supported.
//
// The controller asks with SuggestFor, naming the trial: with
// tune_config.reproducible it passes only the trials numbered up to
// index − max_concurrent_trials, and the trial's generation is still its
// own number's.
package nsga2
