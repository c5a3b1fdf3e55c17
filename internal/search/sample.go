package search

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// sampler draws one value of a random domain.
type sampler interface {
	sample(r *rand.Rand) any
}

// trialRand is the RNG of one trial: it depends only on the seed and the
// trial index, so any trial can be regenerated on its own.
func trialRand(seed int64, index int) *rand.Rand {
	return rand.New(rand.NewPCG(splitmix(uint64(seed)), splitmix(uint64(index)^0x9e3779b97f4a7c15)))
}

// splitmix is the SplitMix64 finalizer, a bijection that spreads nearby
// inputs over the whole 64-bit range.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// choiceDist picks one of its values uniformly.
type choiceDist struct{ values []any }

func (d choiceDist) sample(r *rand.Rand) any {
	return CopyValue(d.values[r.IntN(len(d.values))])
}

// uniformDist is uniform over [low, high), rounded to a multiple of q when
// q > 0 (quniform).
type uniformDist struct{ low, high, q float64 }

func (d uniformDist) sample(r *rand.Rand) any {
	return quantize(d.low+r.Float64()*(d.high-d.low), d.q, d.low, d.high)
}

// logUniformDist is uniform in log space between low and high, rounded to a
// multiple of q when q > 0 (qloguniform).
type logUniformDist struct{ low, high, q, base float64 }

func (d logUniformDist) sample(r *rand.Rand) any {
	v := clamp(logUniform(r, d.low, d.high, d.base), d.low, d.high)
	return quantize(v, d.q, d.low, d.high)
}

// logUniform draws a float uniformly in log space between low and high,
// both > 0.
func logUniform(r *rand.Rand, low, high, base float64) float64 {
	lb := math.Log(base)
	lo, hi := math.Log(low)/lb, math.Log(high)/lb
	return math.Pow(base, lo+r.Float64()*(hi-lo))
}

// intDist is uniform over the n integers from low, rounded to a multiple of
// q.
type intDist struct{ low, n, q int }

func (d intDist) sample(r *rand.Rand) any {
	return roundMultiple(d.low+r.IntN(d.n), d.q)
}

// logIntDist is Ray's log-uniform integer sampler: a log-uniform float in
// [low, high), floored, then rounded to a multiple of q. low and high are
// multiples of q, so with q > 1 the result may be high.
type logIntDist struct {
	low, high, q int
	base         float64
}

func (d logIntDist) sample(r *rand.Rand) any {
	x := math.Floor(logUniform(r, float64(d.low), float64(d.high), d.base))
	v := d.low
	if x > float64(d.low) {
		v = max(d.low, d.high-1) // float rounding reached the top of the range
		if x < float64(d.high) {
			v = int(x)
		}
	}
	return roundMultiple(v, d.q)
}

// roundMultiple rounds v to a multiple of q, half to even, as numpy's
// round(v / q) * q does.
func roundMultiple(v, q int) int {
	if q <= 1 {
		return v
	}
	return int(math.RoundToEven(float64(v)/float64(q))) * q
}

// normalDist is normal with the given mean and standard deviation, rounded
// to a multiple of q when q > 0 (qrandn).
type normalDist struct{ mean, sd, q float64 }

func (d normalDist) sample(r *rand.Rand) any {
	return quantize(d.mean+d.sd*r.NormFloat64(), d.q, math.Inf(-1), math.Inf(1))
}

// quantize rounds v to a multiple of q (half to even, as numpy rounds),
// trims the float noise of the multiplication to q's decimal places, and
// keeps the result within [low, high]. q == 0 returns v unchanged.
func quantize(v, q, low, high float64) float64 {
	if q == 0 {
		return v
	}
	x := math.RoundToEven(v/q) * q
	if d := decimals(q); d >= 0 {
		x, _ = strconv.ParseFloat(strconv.FormatFloat(x, 'f', d, 64), 64)
	}
	return clamp(x, low, high)
}

// decimals is the number of decimal places of q's shortest representation,
// or -1 when it has too many to help.
func decimals(q float64) int {
	s := strconv.FormatFloat(q, 'f', -1, 64)
	i := strings.IndexByte(s, '.')
	switch {
	case i < 0:
		return 0
	case len(s)-i-1 > 15:
		return -1
	}
	return len(s) - i - 1
}

func clamp(v, low, high float64) float64 {
	return math.Min(math.Max(v, low), high)
}
