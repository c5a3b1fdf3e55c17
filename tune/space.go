package tune

// ParamSpace is a search space: nested maps of plain values and domains.
type ParamSpace = map[string]any

// GridSearch tries every value (Ray's tune.grid_search).
func GridSearch(values ...any) map[string]any { return map[string]any{"grid_search": values} }

// Choice samples one of the values uniformly (tune.choice).
func Choice(values ...any) map[string]any { return map[string]any{"choice": values} }

// Uniform samples a float in [lower, upper] (tune.uniform).
func Uniform(lower, upper float64) map[string]any { return dom("uniform", lower, upper) }

// QUniform samples a float in [lower, upper] rounded to a multiple of q.
func QUniform(lower, upper, q float64) map[string]any { return dom("quniform", lower, upper, q) }

// LogUniform samples a float in [lower, upper] uniformly in log space.
func LogUniform(lower, upper float64) map[string]any { return dom("loguniform", lower, upper) }

// QLogUniform is LogUniform rounded to a multiple of q.
func QLogUniform(lower, upper, q float64) map[string]any {
	return dom("qloguniform", lower, upper, q)
}

// RandInt samples an integer in [lower, upper) (upper exclusive, as Ray).
func RandInt(lower, upper int) map[string]any { return dom("randint", lower, upper) }

// QRandInt samples an integer in [lower, upper] that is a multiple of q
// (upper inclusive, as Ray).
func QRandInt(lower, upper, q int) map[string]any { return dom("qrandint", lower, upper, q) }

// RandN samples a normal distribution.
func RandN(mean, sd float64) map[string]any { return dom("randn", mean, sd) }

func dom[T any](name string, args ...T) map[string]any {
	vals := make([]any, len(args))
	for i, a := range args {
		vals[i] = a
	}
	return map[string]any{name: vals}
}
