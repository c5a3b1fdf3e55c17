// Package moo is the arithmetic of multi-objective search, every objective
// minimized (negate a maximized one first): Pareto dominance, the
// non-dominated front, non-domination ranks, crowding distances, exact
// hypervolumes, hypervolume contributions and greedy hypervolume subset
// selection, after Optuna's (commit 1d8ce7bb: optuna/study/_multi_objective.py,
// optuna/samplers/nsgaii/_elite_population_selection_strategy.py,
// optuna/_hypervolume/wfg.py and hssp.py). It is pure: no I/O, no clock, no
// randomness.
package moo
