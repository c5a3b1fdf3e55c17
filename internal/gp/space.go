package gp

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/settings"
)

// maxGridChoices bounds the values a stepped domain may have for the
// search over its grid; a longer grid is searched as continuous.
const maxGridChoices = 1 << 16

// dim is one parameter as the GP models it, normalized to [0, 1].
type dim struct {
	index  int // position among the space's domains
	domain search.Domain
	cat    bool    // a choice: its value is the index, compared by equality
	fixed  bool    // one value: not modeled
	log    bool    // normalized in log space
	lo, hi float64 // the normalization's bounds: low − step/2, high + step/2 (their logs for log domains)
	// grid holds the normalized values of a stepped domain or the indices
	// of a choice, ascending; nil for a continuous domain.
	grid []float64
}

// newDim models domain d, refusing the domains the GP cannot model.
func newDim(index int, d search.Domain) (*dim, error) {
	if err := d.Unmodeled("bayesopt"); err != nil {
		return nil, err
	}
	m := &dim{index: index, domain: d}
	switch d.Kind {
	case "choice":
		m.cat, m.fixed = true, len(d.Choices) == 1
		for i := range d.Choices {
			m.grid = append(m.grid, float64(i))
		}
		return m, nil
	}
	m.fixed = d.Low == d.High
	m.log = d.Log
	m.lo, m.hi = d.Low-d.Q/2, d.High+d.Q/2
	if m.log {
		m.lo, m.hi = math.Log(m.lo), math.Log(m.hi)
	}
	if d.Q > 0 && !m.fixed && (d.High-d.Low)/d.Q < maxGridChoices {
		m.grid = m.values()
	}
	return m, nil
}

// values lists the normalized values a stepped domain takes: those
// Domain.Value gives, ascending and without repeats.
func (m *dim) values() []float64 {
	q := m.domain.Q
	var out []float64
	for k := math.Floor(m.domain.Low / q); k <= math.Ceil(m.domain.High/q); k++ {
		v, ok := number(m.domain.Value(k * q))
		if !ok {
			continue
		}
		out = append(out, m.normalize(v))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// normalize maps a domain value to [0, 1].
func (m *dim) normalize(v float64) float64 {
	if m.log {
		v = math.Log(v)
	}
	if m.hi == m.lo {
		return 0.5
	}
	return (v - m.lo) / (m.hi - m.lo)
}

// internal reads the trial's value of the dim from config, normalized;
// false when there is none or it is not a value of the domain.
func (m *dim) internal(config map[string]any) (float64, bool) {
	x, ok := m.domain.Number(config)
	if !ok || m.cat {
		return x, ok
	}
	return m.normalize(x), true
}

// external turns a normalized value into the config's value.
func (m *dim) external(u float64) any {
	if m.cat {
		return m.domain.Choices[min(max(int(u), 0), len(m.domain.Choices)-1)]
	}
	if m.fixed {
		return m.domain.Value(m.domain.Low)
	}
	x := m.lo + u*(m.hi-m.lo)
	if m.log {
		x = math.Exp(x)
	}
	return m.domain.Value(x)
}

// snap moves a normalized value onto the dim's grid: its nearest value.
func (m *dim) snap(u float64) float64 {
	if m.grid == nil {
		return u
	}
	return m.grid[m.nearest(u)]
}

// nearest is the index of the grid value nearest u.
func (m *dim) nearest(u float64) int {
	i, _ := slices.BinarySearch(m.grid, u)
	switch {
	case i == 0:
		return 0
	case i == len(m.grid):
		return i - 1
	case u-m.grid[i-1] <= m.grid[i]-u:
		return i - 1
	}
	return i
}

// random draws a normalized value uniformly: a choice's index, a stepped
// domain's grid value nearest a uniform draw (Optuna's RandomSampler).
func (m *dim) random(rng *rand.Rand) float64 {
	if m.cat {
		return float64(rng.IntN(len(m.grid)))
	}
	return m.snap(rng.Float64())
}

// number reads a config value as a float.
func number(v any) (float64, bool) {
	f, _, ok := settings.Number(v)
	return f, ok
}
