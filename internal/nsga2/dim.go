package nsga2

import (
	"math"
	"math/rand/v2"

	"github.com/tunejet/tunejet/internal/search"
)

// dim is one parameter of the space as NSGA-II handles it: a value is
// inherited whole from a parent, or drawn at random.
type dim struct {
	index  int // position among the space's domains
	domain search.Domain
	cat    bool // a choice
	fixed  bool // a single value: neither inherited nor mutated
}

// newDim checks domain d, refusing the domains NSGA-II cannot draw.
func newDim(index int, d search.Domain) (*dim, error) {
	if err := d.Unmodeled("nsga2"); err != nil {
		return nil, err
	}
	m := &dim{index: index, domain: d, cat: d.Kind == "choice"}
	if m.cat {
		m.fixed = len(d.Choices) == 1
	} else {
		m.fixed = d.Low == d.High
	}
	return m, nil
}

// value reads a parent's value of the dim from its config, as a value of
// the domain: the choice it names, or the number rounded onto the
// domain's steps and kept within its bounds. false when the config has no
// usable value.
func (m *dim) value(config map[string]any) (any, bool) {
	x, ok := m.domain.Number(config)
	switch {
	case !ok:
		return nil, false
	case m.cat:
		return search.CopyValue(m.domain.Choices[int(x)]), true
	}
	return m.domain.Value(x), true
}

// random draws a value as Optuna's RandomSampler does: a choice uniformly;
// a number uniformly in its internal space (the log of a log domain),
// widened by half a step each side for a stepped domain, then rounded to
// the step from the lower bound and kept within the bounds.
func (m *dim) random(rng *rand.Rand) any {
	d := m.domain
	switch {
	case m.fixed && m.cat:
		return search.CopyValue(d.Choices[0])
	case m.fixed:
		return d.Value(d.Low)
	case m.cat:
		return search.CopyValue(d.Choices[rng.IntN(len(d.Choices))])
	}
	lo, hi := d.Low-d.Q/2, d.High+d.Q/2
	u := rng.Float64()
	var x float64
	if d.Log {
		x = math.Exp(math.Log(lo) + u*(math.Log(hi)-math.Log(lo)))
	} else {
		x = lo + u*(hi-lo)
	}
	if d.Q > 0 {
		x = min(max(d.Low+math.RoundToEven((x-d.Low)/d.Q)*d.Q, d.Low), d.High)
	}
	return d.Value(x)
}
