// Package moo is the arithmetic of multi-objective search, every objective
// minimized (negate a maximized one first): Pareto dominance, the
// non-dominated front. It is pure: no I/O, no clock, no randomness.
package moo
