package tpe

import "math"

// The truncated normal distribution's numerics, ported from Optuna's
// samplers/_tpe/_truncnorm.py (itself from SciPy): log masses and the
// inverse CDF are computed in the left tail, where they are accurate, and
// mirrored for the right one.

var (
	normLogC = math.Log(math.Sqrt(2 * math.Pi))
	sqrt2    = math.Sqrt2
)

// ndtr is the standard normal CDF.
func ndtr(a float64) float64 {
	x := a / sqrt2
	switch {
	case x < -1/sqrt2:
		return 0.5 * math.Erfc(-x)
	case x < 1/sqrt2:
		return 0.5 + 0.5*math.Erf(x)
	}
	return 1 - 0.5*math.Erfc(x)
}

// logNdtr is log ndtr(a), with an asymptotic series far in the left tail.
func logNdtr(a float64) float64 {
	switch {
	case a > 6:
		return -ndtr(-a)
	case a > -20:
		return math.Log(ndtr(a))
	}
	logLHS := -0.5*a*a - math.Log(-a) - 0.5*math.Log(2*math.Pi)
	last, rhs, numerator, denomFactor, sign := 0.0, 1.0, 1.0, 1.0, 1.0
	denomCons := 1 / (a * a)
	for i := 1; math.Abs(last-rhs) > 0x1p-52; i++ {
		last = rhs
		sign = -sign
		denomFactor *= denomCons
		numerator *= float64(2*i - 1)
		rhs += sign * numerator * denomFactor
	}
	return logLHS + math.Log(rhs)
}

// normLogPdf is the log density of the standard normal.
func normLogPdf(x float64) float64 { return -x*x/2 - normLogC }

// logDiff is log(exp(p) - exp(q)) for p >= q.
func logDiff(p, q float64) float64 { return p + math.Log1p(-math.Exp(q-p)) }

// logAddExp is log(exp(p) + exp(q)).
func logAddExp(p, q float64) float64 {
	if p < q {
		p, q = q, p
	}
	if math.IsInf(q, -1) {
		return p
	}
	return p + math.Log1p(math.Exp(q-p))
}

// logGaussMass is the log of the standard normal's mass within [a, b].
func logGaussMass(a, b float64) float64 {
	switch {
	case b <= 0:
		return logDiff(logNdtr(b), logNdtr(a))
	case a > 0:
		return logDiff(logNdtr(-a), logNdtr(-b))
	}
	return math.Log1p(-ndtr(a) - ndtr(-b))
}

// ndtriExp returns x such that logNdtr(x) = y, by Newton's method from
// Optuna's initial guesses.
func ndtriExp(y float64) float64 {
	flipped := y > -1e-2
	z := y
	if flipped {
		z = math.Log(-math.Expm1(y))
	}
	var x float64
	if z < -5 {
		x = -math.Sqrt(-2 * (z + normLogC))
	} else {
		x = -math.Sqrt(3) / math.Pi * math.Log(math.Expm1(-z))
	}
	for range 100 {
		l := logNdtr(x)
		dx := (l - z) * math.Exp(l-normLogPdf(x))
		x -= dx
		if math.Abs(dx) < 1e-8*math.Abs(x) {
			break
		}
	}
	if flipped {
		return -x
	}
	return x
}

// ppf is the inverse CDF at q of the standard normal truncated to [a, b].
// The result is kept within [a, b] against rounding.
func ppf(q, a, b float64) float64 {
	switch {
	case a == b:
		return math.NaN()
	case q == 0:
		return a
	case q == 1:
		return b
	}
	logMass := logGaussMass(a, b)
	var x float64
	if a < 0 {
		x = ndtriExp(logAddExp(logNdtr(a), math.Log(q)+logMass))
	} else {
		x = -ndtriExp(logAddExp(logNdtr(-b), math.Log1p(-q)+logMass))
	}
	return min(max(x, a), b)
}
