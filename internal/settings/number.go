package settings

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Number reads a decoded number as a float64: an int, int32, int64,
// uint64, float32 or float64, or a json.Number (from a decoder with
// UseNumber). isInt says whether it is of an integer kind or a json.Number
// written as an int64 ("32", not "32.0" or "1e3"), so that a config keeps
// its ints. ok is false for anything else: bools, strings, nil, other
// kinds, and a json.Number that is not a float64 ("1e999"). NaN and
// infinities are numbers here; a caller that needs finite values checks.
func Number(v any) (f float64, isInt, ok bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true, true
	case int32:
		return float64(x), true, true
	case int64:
		return float64(x), true, true
	case uint64:
		return float64(x), true, true
	case float32:
		return float64(x), false, true
	case float64:
		return x, false, true
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return float64(i), true, true
		}
		if f, err := x.Float64(); err == nil {
			return f, false, true
		}
	}
	return 0, false, false
}

// Finite reads a finite number: Number, but NaN and infinities, which it
// lets through, are refused, as a setting must be a number JSON can hold.
func Finite(v any) (float64, bool) {
	f, _, ok := Number(v)
	return f, ok && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// Int reads an integer: an int, or a number with an integral value (a
// JSON decoder gives 10 as float64).
func Int(v any) (int, bool) {
	if x, ok := v.(int); ok {
		return x, true
	}
	f, ok := Finite(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) >= 1<<53 {
		return 0, false
	}
	return int(f), true
}

// Describe names a decoded value's type and value for messages: null,
// string "x", boolean true, integer 3, number 0.5, a mapping, a list.
func Describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "string " + strconv.Quote(shorten(x))
	case bool:
		return "boolean " + strconv.FormatBool(x)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	if f, isInt, ok := Number(v); ok {
		if isInt {
			return "integer " + strconv.FormatFloat(f, 'f', -1, 64)
		}
		return "number " + strconv.FormatFloat(f, 'g', -1, 64)
	}
	return fmt.Sprintf("%T %v", v, v)
}

// shorten cuts a value's text to 40 characters for a message.
func shorten(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}
