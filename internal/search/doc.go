// Package search is the param space and the basic variant generator: it
// turns an experiment's param_space into trial configs the way Ray Tune's
// BasicVariantGenerator does. It is pure: no I/O, no clocks, no global
// state.
//
// # Overview
//
// ParseSpace validates a param_space (nested mappings, lists and plain
// values, as decoded from JSON or YAML) and returns a *Space. Space.Trial
// computes the config and experiment tag of any trial from its index and the
// experiment's seed alone, so a restarted controller regenerates exactly the
// trials it had, and the same seed reproduces the same configs.
//
// # Domains
//
// A mapping with exactly one key that is a domain keyword is a domain; every
// other mapping is a nested object. Domains may also appear inside lists.
// The keywords are Ray Tune's:
//
//	grid_search: [v, ...]                every value, once per sample
//	choice:      [v, ...]                one value, uniformly
//	uniform:     [low, high]             float in [low, high)
//	quniform:    [low, high, q]          uniform, rounded to a multiple of q
//	loguniform:  [low, high(, base)]     log-uniform float; low > 0, base 10
//	qloguniform: [low, high, q(, base)]  loguniform, rounded to a multiple of q
//	randint:     [low, high]             int in [low, high): high is exclusive
//	qrandint:    [low, high(, q)]        int in [low, high], a multiple of q (1)
//	lograndint:  [low, high(, base)]     log-uniform int in [low, high); low > 0
//	qlograndint: [low, high, q(, base)]  lograndint, rounded to a multiple of q
//	randn:       [(mean(, sd))]          normal float; mean 0, sd 1
//	qrandn:      [mean, sd, q]           randn, rounded to a multiple of q
//	sample_from: "name"                  the driver's function (Ray's tune.sample_from)
//
// Numeric domains also take a mapping with Ray's argument names, e.g.
// {lower: 0, upper: 1}, {lower, upper, q}, {lower, upper, base} or
// {mean, sd}; arguments in parentheses above are optional. Values inside
// grid_search and choice lists are plain values: a domain nested in them is
// an error. Following Ray, the bounds of quniform and qloguniform must be
// divisible by q; qrandint requires the same of its bounds, so that every
// sample lies within them. randint, qrandint, lograndint and qlograndint
// give int; the float domains give float64. A sample_from domain names a
// function of the experiment's driver (the Python Tuner.fit()): Trial
// leaves it null, and the driver, asked with the rest of the config
// (docs/driver.md), gives its value (TakeSampled).
//
// lograndint and qlograndint sample as Ray does: a log-uniform float in
// [low, high) is floored to an int, and qlograndint first moves both bounds
// inwards to multiples of q and rounds the int to a multiple of q (half to
// even, as numpy), which can reach the upper bound: qlograndint [1, 20, 5]
// gives 5, 10, 15 or 20, and with q 1 high stays exclusive, as in Ray. The
// base of the log domains changes nothing in the distribution (recent Ray
// versions deprecate it) but must be > 0 and != 1. One deviation: quniform,
// qloguniform and qrandn round with q 1 too, where Ray's Quantized sampler
// skips rounding and returns the raw float.
//
// # Constants and misspellings
//
// A single-key mapping whose key is not a keyword but close to one — the
// same letters in another case or with '_' or '-' (log_uniform, LogUniform,
// grid-search), at most two edits away (unifrom, choices) — is refused
// with a "did you mean" error at its key, rather than passed to the trials
// as a constant mapping. To pass such a mapping, or any value, as it is,
// wrap it in literal:
//
//	wd: {literal: {sample_from: "x"}}   # the trial gets {"sample_from": "x"}
//	c:  {literal: {uniform: [0, 1]}}    # a constant mapping, not a domain
//
// {literal: v} is v everywhere a plain value may be, grid_search and choice
// values included; nothing inside v is looked at, so {literal: {literal: 1}}
// is {literal: 1}. A literal is not a domain: it has no place in the tag.
//
// # Trials
//
// Trial index gets grid point index % GridSize() and sample
// index / GridSize(): Ray's order, for each sample, for each grid point.
// Grid keys are ordered by key path and the first one varies fastest. The
// random domains of a trial are drawn, in key path order, from a PCG
// generator seeded from (seed, index) only.
//
// # Tags
//
// A trial's tag is Ray's experiment_tag, "<index>_<k=v,...>", or "<index>"
// when the space has no domains. It lists every domain's key path (mapping
// keys and list indices joined by "/") with its resolved value, sorted by
// key path. Floats are written compactly: integral values without decimals
// ("3"), values from 0.001 up with four decimals like Ray's "%.4f"
// ("lr=0.0010,momentum=0.9000"), smaller or huge ones with four significant
// digits ("1.235e-05"). Other values are written as JSON (strings without
// quotes) and cleaned like Ray's _clean_value: runs of characters other than
// letters, digits, '_' and '-' become '_', trimmed at both ends.
// TrialDirName turns the trial name and tag into a safe directory name.
//
// # Errors
//
// ParseSpace and OnlyGrid return *settings.Error, whose Key names the key
// below the space (list indices in decimal) and whose message reads, rooted
// with settings.Prefix("param_space", err), for example
//
//	param_space.lr: uniform: low (0.5) must be <= high (0.1)
//
// so that the spec parser can point at the key's line in the experiment
// file.
package search
