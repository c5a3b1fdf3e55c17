package trainproto

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// jsonNumber is the grammar of a JSON number (RFC 8259, section 6).
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

// ParseKeyValues turns the arguments of `tunejet report key=value ...` into
// metrics. A key is everything before the first "=" and is kept as given (a
// flat key, even with "/" in it). A value that is a JSON number becomes a
// float64, the JSON literals true, false and null become true, false and nil,
// and anything else is a string. An argument without "=", an empty key, a
// repeated key, a number out of float64 range and a spelling of NaN or an
// infinity ("NaN", "Infinity", "-inf", ...) are errors naming the argument.
func ParseKeyValues(args []string) (map[string]any, error) {
	metrics := make(map[string]any, len(args))
	for _, arg := range args {
		key, raw, ok := strings.Cut(arg, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("argument %q: want key=value", arg)
		case key == "":
			return nil, fmt.Errorf("argument %q: empty key", arg)
		}
		if _, dup := metrics[key]; dup {
			return nil, fmt.Errorf("argument %q: key %q given twice", arg, key)
		}
		v, err := parseValue(raw)
		if err != nil {
			return nil, fmt.Errorf("argument %q: %w", arg, err)
		}
		metrics[key] = v
	}
	return metrics, nil
}

func parseValue(raw string) (any, error) {
	switch raw {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "null":
		return nil, nil
	}
	if !jsonNumber.MatchString(raw) {
		if f, err := strconv.ParseFloat(raw, 64); err == nil && (math.IsInf(f, 0) || math.IsNaN(f)) {
			// Meant as a number, which JSON cannot carry: stored as a
			// string it would pass for one in a table or a summary.
			return nil, fmt.Errorf("%s is not a number JSON can carry: report null instead (as the Python SDK sends NaN and infinities), or a finite number", raw)
		}
		return raw, nil
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, fmt.Errorf("number %s is out of range", raw)
	}
	return f, nil
}
