package sched

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Float is a float64 that survives JSON even when it is NaN or infinite:
// those marshal as the strings "NaN", "+Inf" and "-Inf". A reported metric
// may be any of them, and a scheduler's state must round-trip exactly.
type Float float64

// MarshalJSON writes a finite value as a JSON number, others as a string.
func (f Float) MarshalJSON() ([]byte, error) { return appendFloat(nil, float64(f)), nil }

// appendFloat appends v as MarshalJSON writes it: the shortest decimal
// that parses back to v, or "NaN", "+Inf", "-Inf".
func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(v, -1):
		return append(b, `"-Inf"`...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *Float) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || finite(v) {
			return fmt.Errorf("sched: %q is not NaN, +Inf or -Inf", s)
		}
		*f = Float(v)
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = Float(v)
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// nanPercentile is numpy's nanpercentile(values, q) with the default linear
// method: NaNs are dropped, the rest sorted, and the value at virtual index
// (n-1)*q/100 interpolated as numpy's _lerp does (from the upper neighbour
// when the fraction is >= 0.5). It returns NaN when no value is left. The
// sorted non-NaN values are returned too, for a decision's inputs.
func nanPercentile(values []float64, q float64) (float64, []float64) {
	xs := make([]float64, 0, len(values))
	for _, v := range values {
		if !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	slices.Sort(xs)
	p, _, _ := percentileSorted(xs, q)
	return p, xs
}

// percentileSorted is numpy's linear percentile of sorted values without
// NaNs, and the two values it interpolated between; NaN when xs is empty.
func percentileSorted(xs []float64, q float64) (p, lo, hi float64) {
	n := len(xs)
	if n == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	vi := float64(n-1) * (q / 100)
	if vi >= float64(n-1) {
		return xs[n-1], xs[n-1], xs[n-1]
	}
	i := math.Floor(vi)
	t := vi - i
	a, b := xs[int(i)], xs[int(i)+1]
	d := b - a
	if t >= 0.5 {
		return b - d*(1-t), a, b
	}
	return a + d*t, a, b
}

// median is numpy's median: the middle value, or the mean of the two middle
// values; NaN if any value is NaN or there is none. It returns the sorted
// values too.
func median(values []float64) (float64, []float64) {
	xs := slices.Clone(values)
	slices.Sort(xs)
	n := len(xs)
	if n == 0 || slices.ContainsFunc(xs, math.IsNaN) {
		return math.NaN(), xs
	}
	if n%2 == 1 {
		return xs[n/2], xs
	}
	return (xs[n/2-1] + xs[n/2]) / 2, xs
}

// floats converts to the JSON-safe type of a decision's inputs.
func floats(xs []float64) []Float {
	out := make([]Float, len(xs))
	for i, x := range xs {
		out[i] = Float(x)
	}
	return out
}
