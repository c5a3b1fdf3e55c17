package tune

// ParamSpace is a search space: nested maps of plain values and domains.
// The domains below build the same plain maps an experiment file holds
// ({"loguniform": [lower, upper]}); see the list in the README.
type ParamSpace = map[string]any

// GridSearch tries every value (Ray's tune.grid_search).
func GridSearch(values ...any) map[string]any { return map[string]any{"grid_search": values} }

// Choice samples one of the values uniformly (tune.choice).
func Choice(values ...any) map[string]any { return map[string]any{"choice": values} }

// Uniform samples a float in [lower, upper) (tune.uniform).
func Uniform(lower, upper float64) map[string]any { return dom("uniform", lower, upper) }

// QUniform samples a float in [lower, upper] rounded to a multiple of q
// (tune.quniform); lower and upper must be multiples of q.
func QUniform(lower, upper, q float64) map[string]any { return dom("quniform", lower, upper, q) }

// LogUniform samples a float in [lower, upper) uniformly in log space
// (tune.loguniform); lower > 0.
func LogUniform(lower, upper float64) map[string]any { return dom("loguniform", lower, upper) }

// QLogUniform is LogUniform rounded to a multiple of q (tune.qloguniform).
func QLogUniform(lower, upper, q float64) map[string]any {
	return dom("qloguniform", lower, upper, q)
}

// RandInt samples an integer in [lower, upper) (upper exclusive, as Ray).
func RandInt(lower, upper int) map[string]any { return dom("randint", lower, upper) }

// QRandInt samples an integer in [lower, upper] that is a multiple of q
// (upper inclusive, as Ray).
func QRandInt(lower, upper, q int) map[string]any { return dom("qrandint", lower, upper, q) }

// LogRandInt samples an integer in [lower, upper) uniformly in log space
// (tune.lograndint): a log-uniform float floored; 0 < lower < upper.
func LogRandInt(lower, upper int) map[string]any { return dom("lograndint", lower, upper) }

// QLogRandInt is LogRandInt with both bounds moved inwards to multiples of
// q and the integer rounded to a multiple of q (tune.qlograndint), so that
// upper is inclusive when it is a multiple of q and q > 1.
func QLogRandInt(lower, upper, q int) map[string]any {
	return dom("qlograndint", lower, upper, q)
}

// RandN samples a normal distribution (tune.randn).
func RandN(mean, sd float64) map[string]any { return dom("randn", mean, sd) }

// QRandN is RandN rounded to a multiple of q (tune.qrandn).
func QRandN(mean, sd, q float64) map[string]any { return dom("qrandn", mean, sd, q) }

// Literal passes v to the trials as it is, even a map that reads like a
// domain: Literal(map[string]any{"uniform": 1}) gives every trial
// {"uniform": 1}. A single-key map whose key is close to a domain's name
// ({"log_uniform": ...}) is refused as a likely misspelling unless it is
// wrapped in Literal.
func Literal(v any) map[string]any { return map[string]any{"literal": v} }

func dom[T any](name string, args ...T) map[string]any {
	vals := make([]any, len(args))
	for i, a := range args {
		vals[i] = a
	}
	return map[string]any{name: vals}
}
