package tpe

import (
	"math"
	"math/rand/v2"

	"github.com/tunejet/tunejet/internal/search"
)

// dim is one parameter as TPE models it. Its values live in a model space:
// a choice's index, the log of a log domain's value, or the value itself.
type dim struct {
	index  int // position among the space's domains
	domain search.Domain
	cat    bool    // categorical: choice
	fixed  bool    // a single value: not modeled
	log    bool    // the model space is the log of the values
	low    float64 // model-space bounds of the kernels
	high   float64
	step   float64 // step of a linear stepped or integer domain; 0 otherwise
	logQ   float64 // step of a log domain's values (log integers, qloguniform)
	// logMass: the kernels of a log domain with a step give the mass of
	// [log(v − logQ/2), log(v + logQ/2)] (Optuna 5), not the density at
	// log v (Optuna 4.5).
	logMass bool
}

// newDim models domain d, refusing the domains TPE cannot model.
func newDim(index int, d search.Domain, est Estimator) (*dim, error) {
	if err := d.Unmodeled("tpe"); err != nil {
		return nil, err
	}
	m := &dim{index: index, domain: d}
	switch d.Kind {
	case "choice":
		m.cat, m.fixed = true, len(d.Choices) == 1
		return m, nil
	}
	m.fixed = d.Low == d.High
	switch {
	case !d.Log:
		m.low, m.high, m.step = d.Low, d.High, d.Q
	case d.Q == 0:
		m.log, m.low, m.high = true, math.Log(d.Low), math.Log(d.High)
	default: // log(v ± step/2) bound the values, as for stepped domains
		m.log, m.logQ, m.logMass = true, d.Q, est == Optuna5
		m.low, m.high = math.Log(d.Low-d.Q/2), math.Log(d.High+d.Q/2)
	}
	return m, nil
}

// span is the width of the kernels' range: high − low + step.
func (m *dim) span() float64 { return m.high - m.low + m.step }

// internal reads the trial's value of the dim from config, in model space;
// false when there is none or it is not a value of the domain's kind.
func (m *dim) internal(config map[string]any) (float64, bool) {
	x, ok := m.domain.Number(config)
	if ok && m.log {
		return math.Log(x), true
	}
	return x, ok
}

// fixedValue is the model-space value of a fixed dim.
func (m *dim) fixedValue() float64 {
	if m.log {
		return math.Log(m.domain.Low)
	}
	return m.domain.Low // 0, the first choice, for categorical dims
}

// random draws a value as Optuna's RandomSampler does: uniform in model
// space, widened by half a step each side, then snapped.
func (m *dim) random(rng *rand.Rand) float64 {
	if m.cat {
		return float64(rng.IntN(len(m.domain.Choices)))
	}
	lo, hi := m.low-m.step/2, m.high+m.step/2
	return m.snap(lo + rng.Float64()*(hi-lo))
}

// snap rounds a model-space number to a value of the domain: to the step
// grid from low, within [low, high]; for a log domain with a step, in the
// domain's own space.
func (m *dim) snap(x float64) float64 {
	switch {
	case m.step > 0:
		return onGrid(x, m.low, m.high, m.step)
	case m.logQ > 0:
		return math.Log(onGrid(math.Exp(x), m.domain.Low, m.domain.High, m.logQ))
	}
	return x
}

// onGrid is Optuna's clip(low + round((x − low)/step)·step, low, high),
// rounding half to even as numpy does.
func onGrid(x, low, high, step float64) float64 {
	return min(max(low+math.RoundToEven((x-low)/step)*step, low), high)
}

// external turns a model-space value into the config's value.
func (m *dim) external(x float64) any {
	switch {
	case m.cat:
		return m.domain.Choices[int(x)]
	case m.log:
		x = math.Exp(x)
	}
	return m.domain.Value(x)
}
