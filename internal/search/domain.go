package search

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tunejet/tunejet/internal/settings"
)

// Domain keywords. A mapping with exactly one of these keys is a domain.
const (
	kwGrid        = "grid_search"
	kwSampleFrom  = "sample_from"
	kwChoice      = "choice"
	kwUniform     = "uniform"
	kwQUniform    = "quniform"
	kwLogUniform  = "loguniform"
	kwQLogUniform = "qloguniform"
	kwRandInt     = "randint"
	kwQRandInt    = "qrandint"
	kwLogRandInt  = "lograndint"
	kwQLogRandInt = "qlograndint"
	kwRandn       = "randn"
	kwQRandn      = "qrandn"
)

// arg is one argument of a numeric domain: its label in messages and in the
// list form, its key in the mapping form, and its default (nil: required).
type arg struct {
	label, key string
	def        any
}

var (
	argLow  = arg{label: "low", key: "lower"}
	argHigh = arg{label: "high", key: "upper"}
	argQ    = arg{label: "q", key: "q"}
	argQInt = arg{label: "q", key: "q", def: 1}
	argBase = arg{label: "base", key: "base", def: 10.0}
	argMean = arg{label: "mean", key: "mean", def: 0.0}
	argSD   = arg{label: "sd", key: "sd", def: 1.0}
	// qrandn has no defaults, as in Ray.
	argMeanReq = arg{label: "mean", key: "mean"}
	argSDReq   = arg{label: "sd", key: "sd"}
)

// numericDomain is a random domain with numeric arguments.
type numericDomain struct {
	args  []arg
	build func(kw string, v []any, args []arg) (sampler, error)
}

var numericDomains = map[string]numericDomain{
	kwUniform:     {[]arg{argLow, argHigh}, buildUniform},
	kwQUniform:    {[]arg{argLow, argHigh, argQ}, buildUniform},
	kwLogUniform:  {[]arg{argLow, argHigh, argBase}, buildLogUniform},
	kwQLogUniform: {[]arg{argLow, argHigh, argQ, argBase}, buildQLogUniform},
	kwRandInt:     {[]arg{argLow, argHigh}, buildRandInt},
	kwQRandInt:    {[]arg{argLow, argHigh, argQInt}, buildQRandInt},
	kwLogRandInt:  {[]arg{argLow, argHigh, argBase}, buildLogRandInt},
	kwQLogRandInt: {[]arg{argLow, argHigh, argQ, argBase}, buildLogRandInt},
	kwRandn:       {[]arg{argMean, argSD}, buildRandn},
	kwQRandn:      {[]arg{argMeanReq, argSDReq, argQ}, buildRandn},
}

// isKeyword reports whether k is a domain keyword.
func isKeyword(k string) bool {
	_, ok := numericDomains[k]
	return ok || k == kwGrid || k == kwChoice || k == kwSampleFrom
}

// single returns the only entry of m.
func single(m map[string]any) (string, any, bool) {
	if len(m) == 1 {
		for k, v := range m {
			return k, v, true
		}
	}
	return "", nil, false
}

// domainOf returns the keyword and argument of m if m is a domain.
func domainOf(m map[string]any) (kw string, raw any, ok bool) {
	kw, raw, ok = single(m)
	return kw, raw, ok && isKeyword(kw)
}

// valueList checks the argument of grid_search or choice at path: a
// non-empty list of plain values. It returns the values with every
// {literal: v} in them replaced by v.
func valueList(path []string, kw string, raw any) ([]any, error) {
	l, ok := raw.([]any)
	if !ok || len(l) == 0 {
		return nil, fmt.Errorf("%s: expects a non-empty list of values, got %s", kw, describeArg(raw))
	}
	out := make([]any, len(l))
	for i, v := range l {
		var err error
		out[i], err = plainValue(child(path, kw, strconv.Itoa(i)), v)
		var nested nestedDomainError
		if errors.As(err, &nested) {
			return nil, fmt.Errorf("%s: value %d contains a domain (%s); domains inside %s values are not supported", kw, i, nested.kw, kw)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func describeArg(raw any) string {
	if l, ok := raw.([]any); ok && len(l) == 0 {
		return "an empty list"
	}
	return settings.Describe(raw)
}

// parseArgs reads the arguments of a numeric domain from its list form
// ([low, high]) or mapping form ({lower: .., upper: ..}), filling defaults.
func parseArgs(kw string, raw any, args []arg) ([]any, error) {
	switch x := raw.(type) {
	case nil:
		return listArgs(kw, nil, args)
	case []any:
		return listArgs(kw, x, args)
	case map[string]any:
		return mapArgs(kw, x, args)
	}
	return nil, fmt.Errorf("%s: expects %s or %s, got %s", kw, listUsage(args), mapUsage(args), settings.Describe(raw))
}

func listArgs(kw string, l []any, args []arg) ([]any, error) {
	if len(l) < required(args) || len(l) > len(args) {
		return nil, fmt.Errorf("%s: expects %s, got %d values", kw, listUsage(args), len(l))
	}
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a.def
		if i < len(l) {
			out[i] = l[i]
		}
	}
	return out, nil
}

func mapArgs(kw string, m map[string]any, args []arg) ([]any, error) {
	for k := range m {
		if !hasKey(args, k) {
			return nil, fmt.Errorf("%s: unknown argument %q, expects %s", kw, k, mapUsage(args))
		}
	}
	out := make([]any, len(args))
	for i, a := range args {
		v, ok := m[a.key]
		switch {
		case ok:
			out[i] = v
		case a.def == nil:
			return nil, fmt.Errorf("%s: missing argument %q, expects %s", kw, a.key, mapUsage(args))
		default:
			out[i] = a.def
		}
	}
	return out, nil
}

func required(args []arg) int {
	n := 0
	for _, a := range args {
		if a.def == nil {
			n++
		}
	}
	return n
}

func hasKey(args []arg, k string) bool {
	for _, a := range args {
		if a.key == k {
			return true
		}
	}
	return false
}

// listUsage describes the list form, e.g. "[low, high, base (default 10)]".
func listUsage(args []arg) string {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = a.label
		if a.def != nil {
			parts[i] += fmt.Sprintf(" (default %v)", a.def)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// mapUsage describes the mapping form, e.g. "{lower, upper, base}".
func mapUsage(args []arg) string {
	keys := make([]string, len(args))
	for i, a := range args {
		keys[i] = a.key
	}
	return "{" + strings.Join(keys, ", ") + "}"
}

// number reads argument label of domain kw as a float (finite, as
// normalize left it).
func number(kw, label string, v any) (float64, error) {
	f, ok := toFloat(v)
	if !ok {
		return 0, fmt.Errorf("%s: %s must be a number, got %s", kw, label, settings.Describe(v))
	}
	return f, nil
}

// integer reads argument label of domain kw as an integer.
func integer(kw, label string, v any) (int, error) {
	i, ok := toInt(v)
	if !ok {
		return 0, fmt.Errorf("%s: %s must be an integer, got %s", kw, label, settings.Describe(v))
	}
	return i, nil
}

// numbers reads the first len(args) arguments as floats.
func numbers(kw string, v []any, args []arg) ([]float64, error) {
	out := make([]float64, len(v))
	var err error
	for i := range v {
		if out[i], err = number(kw, args[i].label, v[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// integers reads the arguments as ints.
func integers(kw string, v []any, args []arg) ([]int, error) {
	out := make([]int, len(v))
	var err error
	for i := range v {
		if out[i], err = integer(kw, args[i].label, v[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func buildUniform(kw string, v []any, args []arg) (sampler, error) {
	f, err := numbers(kw, v, args)
	if err != nil {
		return nil, err
	}
	d := uniformDist{low: f[0], high: f[1]}
	if len(f) > 2 {
		d.q = f[2]
	}
	if err := checkOrder(kw, d.low, d.high); err != nil {
		return nil, err
	}
	return d, checkQuantum(kw, d.q, len(f) > 2, d.low, d.high)
}

func buildLogUniform(kw string, v []any, args []arg) (sampler, error) {
	f, err := numbers(kw, v, args)
	if err != nil {
		return nil, err
	}
	return newLogUniform(kw, f[0], f[1], 0, f[2], false)
}

func buildQLogUniform(kw string, v []any, args []arg) (sampler, error) {
	f, err := numbers(kw, v, args)
	if err != nil {
		return nil, err
	}
	return newLogUniform(kw, f[0], f[1], f[2], f[3], true)
}

func newLogUniform(kw string, low, high, q, base float64, quantized bool) (sampler, error) {
	if low <= 0 {
		return nil, fmt.Errorf("%s: low (%v) must be > 0", kw, low)
	}
	if err := checkOrder(kw, low, high); err != nil {
		return nil, err
	}
	if err := checkBase(kw, base); err != nil {
		return nil, err
	}
	d := logUniformDist{low: low, high: high, q: q, base: base}
	return d, checkQuantum(kw, q, quantized, low, high)
}

func checkBase(kw string, base float64) error {
	if base <= 0 || base == 1 {
		return fmt.Errorf("%s: base (%v) must be > 0 and != 1", kw, base)
	}
	return nil
}

func checkOrder(kw string, low, high float64) error {
	if low > high {
		return fmt.Errorf("%s: low (%v) must be <= high (%v)", kw, low, high)
	}
	return nil
}

// checkQuantum applies Ray's rule for quantized float domains: q > 0, and
// both bounds divisible by q, so that every sample stays within them.
func checkQuantum(kw string, q float64, quantized bool, low, high float64) error {
	if !quantized {
		return nil
	}
	if err := checkQ(kw, q); err != nil {
		return err
	}
	for _, b := range []struct {
		label string
		v     float64
	}{{"low", low}, {"high", high}} {
		if r := b.v / q; !isClose(r, math.Round(r)) {
			return fmt.Errorf("%s: %s (%v) is not divisible by q (%v)", kw, b.label, b.v, q)
		}
	}
	return nil
}

func checkQ(kw string, q float64) error {
	if q <= 0 {
		return fmt.Errorf("%s: q (%v) must be > 0", kw, q)
	}
	return nil
}

// isClose is Python's math.isclose with its default relative tolerance.
func isClose(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func buildRandInt(kw string, v []any, args []arg) (sampler, error) {
	n, err := integers(kw, v, args)
	if err != nil {
		return nil, err
	}
	low, high := n[0], n[1]
	if low >= high {
		return nil, fmt.Errorf("%s: low (%d) must be < high (%d); high is exclusive", kw, low, high)
	}
	return newIntDist(kw, low, high-1, 1)
}

func buildQRandInt(kw string, v []any, args []arg) (sampler, error) {
	n, err := integers(kw, v, args)
	if err != nil {
		return nil, err
	}
	low, high, q := n[0], n[1], n[2]
	if q <= 0 {
		return nil, fmt.Errorf("%s: q (%d) must be > 0", kw, q)
	}
	if low > high {
		return nil, fmt.Errorf("%s: low (%d) must be <= high (%d)", kw, low, high)
	}
	if low%q != 0 || high%q != 0 {
		return nil, fmt.Errorf("%s: low (%d) and high (%d) must be multiples of q (%d)", kw, low, high, q)
	}
	return newIntDist(kw, low, high, q)
}

// newIntDist samples from [low, last], rounded to a multiple of q.
func newIntDist(kw string, low, last, q int) (sampler, error) {
	span := last - low // wraps to a negative number when the range is too wide
	if span < 0 || span == math.MaxInt {
		return nil, errors.New(kw + ": range is too large")
	}
	return intDist{low: low, n: span + 1, q: q}, nil
}

// buildLogRandInt builds lograndint from [low, high, base] and
// qlograndint from [low, high, q, base].
func buildLogRandInt(kw string, v []any, args []arg) (sampler, error) {
	last := len(v) - 1
	n, err := integers(kw, v[:last], args)
	if err != nil {
		return nil, err
	}
	base, err := number(kw, args[last].label, v[last])
	if err != nil {
		return nil, err
	}
	q := 1
	if len(n) > 2 {
		q = n[2]
	}
	return newLogIntDist(kw, n[0], n[1], q, base)
}

// newLogIntDist checks Ray's rules for lograndint (q 1) and qlograndint:
// 0 < low < high, q > 0, and a multiple of q within [low, high]. As Ray's
// Quantized sampler does, it draws from [low, high) with both bounds moved
// inwards to multiples of q.
func newLogIntDist(kw string, low, high, q int, base float64) (sampler, error) {
	switch {
	case low <= 0:
		return nil, fmt.Errorf("%s: low (%d) must be > 0", kw, low)
	case low >= high && kw == kwLogRandInt:
		return nil, fmt.Errorf("%s: low (%d) must be < high (%d); high is exclusive", kw, low, high)
	case low >= high:
		return nil, fmt.Errorf("%s: low (%d) must be < high (%d)", kw, low, high)
	case q <= 0:
		return nil, fmt.Errorf("%s: q (%d) must be > 0", kw, q)
	}
	if err := checkBase(kw, base); err != nil {
		return nil, err
	}
	first, last := (low-1)/q+1, high/q // ceil(low/q), floor(high/q)
	if first > last {
		return nil, fmt.Errorf("%s: no multiple of q (%d) lies within [low (%d), high (%d)]", kw, q, low, high)
	}
	return logIntDist{low: first * q, high: last * q, q: q, base: base}, nil
}

// buildRandn builds randn from [mean, sd] and qrandn from [mean, sd, q].
func buildRandn(kw string, v []any, args []arg) (sampler, error) {
	f, err := numbers(kw, v, args)
	if err != nil {
		return nil, err
	}
	if f[1] <= 0 {
		return nil, fmt.Errorf("%s: sd (%v) must be > 0", kw, f[1])
	}
	d := normalDist{mean: f[0], sd: f[1]}
	if len(f) > 2 {
		d.q = f[2]
		return d, checkQ(kw, d.q)
	}
	return d, nil
}
