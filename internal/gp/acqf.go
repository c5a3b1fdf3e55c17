package gp

import "math"

// stabilizingNoise is added to the posterior variance before the
// acquisition takes its root (Optuna's stabilizing_noise).
const stabilizingNoise = 1e-12

var (
	logSqrt2Pi = math.Log(math.Sqrt(2 * math.Pi))
	sqrtHalfPi = math.Sqrt(math.Pi / 2)
)

// logEI is log E[max(0, f(u) − f0)] for f(u) ~ N(mean, variance), and its
// derivatives with respect to the mean and the variance.
func logEI(mean, variance, f0 float64) (v, dMean, dVar float64) {
	sigma := math.Sqrt(variance + stabilizingNoise)
	z := (mean - f0) / sigma
	lh, cdfOverH, pdfOverH := logH(z)
	// d/dμ log h(z) = Φ(z)/h(z) / σ; d/dσ [log h(z) + log σ] = φ(z)/h(z) / σ.
	return lh + math.Log(sigma), cdfOverH / sigma, pdfOverH / sigma / (2 * sigma)
}

// logH is log h(z) for h(z) = z Φ(z) + φ(z) = E[max(0, x + z)] with
// x ~ N(0, 1), and Φ(z)/h(z) and φ(z)/h(z), computed without underflow
// far below zero (Ament et al. 2023, eq. 9, as Optuna's standard_logei).
func logH(z float64) (lh, cdfOverH, pdfOverH float64) {
	if z > -1 {
		cdf := 0.5 * math.Erfc(-z/math.Sqrt2)
		pdf := math.Exp(-z*z/2) / math.Sqrt(2*math.Pi)
		h := z*cdf + pdf
		return math.Log(h), cdf / h, pdf / h
	}
	// h(z) = φ(z)·g, g = 1 + z Φ(z)/φ(z) = 1 − √π x erfcx(x), x = −z/√2.
	x := -z / math.Sqrt2
	ratio := sqrtHalfPi * erfcx(x) // Φ(z)/φ(z)
	g := oneMinusMills(x)
	return -z*z/2 - logSqrt2Pi + math.Log(g), ratio / g, 1 / g
}

// erfcx is the scaled complementary error function exp(x²)·erfc(x), for
// x ≥ 0.
func erfcx(x float64) float64 {
	if x < 25 {
		return math.Exp(x*x) * math.Erfc(x)
	}
	// The asymptotic series: 1/(x√π) · (1 − 1/(2x²) + 3/(4x⁴) − …).
	x2 := x * x
	return (1 - 1/(2*x2) + 3/(4*x2*x2) - 15/(8*x2*x2*x2)) / (x * math.SqrtPi)
}

// oneMinusMills is 1 − √π x erfcx(x) for x > 0: directly below x = 20,
// and beyond by its asymptotic series, which avoids the cancellation of
// the two terms (the direct form loses ~2 log10(x) digits; the series'
// error at 20 is ~10⁻¹¹ of the value).
func oneMinusMills(x float64) float64 {
	if x < 20 {
		return 1 - math.SqrtPi*x*erfcx(x)
	}
	return millsSeries(x)
}

// millsSeries is 1 − √π x erfcx(x) by its asymptotic series:
// 1/(2x²) − 3/(4x⁴) + 15/(8x⁶) − 105/(16x⁸) + 945/(32x¹⁰).
func millsSeries(x float64) float64 {
	t := 1 / (x * x)
	return t * (0.5 + t*(-0.75+t*(15.0/8+t*(-105.0/16+t*945.0/32))))
}
