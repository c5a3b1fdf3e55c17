package events

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the JSON encoding of v to dst: byte for byte what
// json.Marshal(v) gives, and its error. Results are maps of plain values,
// encoded for every report (the runner's event, the syncer's result.json
// line), so maps, slices, strings, numbers and booleans are written here
// without reflection; any other value, and any string that needs escaping,
// is handed to json.Marshal.
func AppendJSON(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case string:
		return appendJSONString(dst, x)
	case float64:
		return appendJSONFloat(dst, x)
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), nil
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), nil
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJSONString(dst, k); err != nil {
				return dst, err
			}
			dst = append(dst, ':')
			if dst, err = AppendJSON(dst, x[k]); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case []any:
		if x == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = AppendJSON(dst, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	}
	return appendMarshal(dst, v)
}

func appendMarshal(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// appendJSONString writes s quoted when it needs no escaping under
// json.Marshal's rules (which also escape <, > and &), else asks it.
func appendJSONString(dst []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return appendMarshal(dst, s)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"'), nil
}

// appendJSONFloat formats f as encoding/json does (ES6 number format).
func appendJSONFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return appendMarshal(dst, f) // its UnsupportedValueError
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}

// marshalReported encodes a trial.reported payload as json.Marshal does.
func marshalReported(p *TrialReported) ([]byte, error) {
	dst := make([]byte, 0, 64+32*len(p.Result)*(1+len(p.Earlier)))
	dst = append(dst, `{"trial_id":`...)
	dst, err := appendJSONString(dst, p.TrialID)
	if err != nil {
		return nil, err
	}
	dst = append(dst, `,"attempt":`...)
	dst = strconv.AppendInt(dst, int64(p.Attempt), 10)
	if len(p.Earlier) > 0 {
		dst = append(dst, `,"earlier":[`...)
		for i, r := range p.Earlier {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = AppendJSON(dst, r); err != nil {
				return nil, err
			}
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"result":`...)
	if dst, err = AppendJSON(dst, p.Result); err != nil {
		return nil, err
	}
	return append(dst, '}'), nil
}
