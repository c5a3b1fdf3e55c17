package settings

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// The range rules configs share, worded once.

// Required records "required" at k when v is empty.
func (p *Problems) Required(k, v string) { p.Check(v != "", k, "required") }

// Positive records a problem at k unless v is a finite number > 0.
func (p *Problems) Positive(k string, v float64) {
	p.Check(v > 0 && !math.IsInf(v, 0), k, "must be > 0, got %v", v)
}

// Finite records a problem at k when v is NaN or infinite.
func (p *Problems) Finite(k string, v float64) {
	p.Check(!math.IsNaN(v) && !math.IsInf(v, 0), k, "must be a finite number, got %v", v)
}

// AtLeast records a problem at k when v < least.
func (p *Problems) AtLeast(k string, v, least int) {
	p.Check(v >= least, k, "must be >= %d, got %d", least, v)
}

// OneOf records a problem at k unless v is one of allowed.
func (p *Problems) OneOf(k, v string, allowed ...string) {
	if slices.Contains(allowed, v) {
		return
	}
	q := make([]string, len(allowed))
	for i, a := range allowed {
		q[i] = strconv.Quote(a)
	}
	p.Add(k, "must be %s, got %q", strings.Join(q, " or "), v)
}
