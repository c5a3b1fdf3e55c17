package search

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"github.com/tunejet/tunejet/internal/settings"
)

// maxDepth bounds the nesting of a space, which also stops a Go map that
// contains itself.
const maxDepth = 100

// normalize converts a decoded value at path to the forms the space works
// with: map[string]any, []any, string, bool, nil, int, float64. Other integer
// and float kinds, json.Number, and other slices and string-keyed maps are
// converted; NaN, infinities and anything else are errors naming the path.
// The result never shares maps or slices with v.
func normalize(path []string, v any) (any, error) {
	if len(path) > maxDepth {
		return nil, keyError(path[:maxDepth], fmt.Sprintf("nested more than %d levels deep", maxDepth))
	}
	switch x := v.(type) {
	case nil, string, bool, int:
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, keyError(path, fmt.Sprintf("expected a finite number, got %v; JSON cannot hold it", x))
		}
		return x, nil
	case json.Number:
		n, err := fromJSONNumber(path, x)
		if err != nil {
			return nil, err
		}
		return normalize(path, n)
	case map[string]any:
		return normalizeMap(path, x)
	case []any:
		return normalizeList(path, x)
	}
	n, err := normalizeReflect(reflect.ValueOf(v))
	if err != nil {
		return nil, keyError(path, err.Error())
	}
	return normalize(path, n)
}

func normalizeMap(path []string, m map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		n, err := normalize(append(path, k), v)
		if err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, nil
}

func normalizeList(path []string, l []any) ([]any, error) {
	out := make([]any, len(l))
	for i, v := range l {
		n, err := normalize(append(path, strconv.Itoa(i)), v)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// normalizeReflect converts the kinds a Go caller may use in a space (sized
// numbers, typed slices, string-keyed maps) to a value normalize accepts.
func normalizeReflect(rv reflect.Value) (any, error) {
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if rv.Uint() > math.MaxInt64 {
			return nil, fmt.Errorf("integer %d is too large", rv.Uint())
		}
		return int(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Slice, reflect.Array:
		l := make([]any, rv.Len())
		for i := range l {
			l[i] = rv.Index(i).Interface()
		}
		return l, nil
	case reflect.Map:
		return normalizeReflectMap(rv)
	}
	return nil, fmt.Errorf("unsupported value of type %s", typeName(rv))
}

func normalizeReflectMap(rv reflect.Value) (any, error) {
	if rv.Type().Key().Kind() != reflect.String {
		return nil, fmt.Errorf("unsupported map with %s keys", rv.Type().Key())
	}
	m := make(map[string]any, rv.Len())
	for it := rv.MapRange(); it.Next(); {
		m[it.Key().String()] = it.Value().Interface()
	}
	return m, nil
}

func typeName(rv reflect.Value) string {
	if !rv.IsValid() {
		return "nil"
	}
	return rv.Type().String()
}

// fromJSONNumber keeps integers as int and everything else as float64.
func fromJSONNumber(path []string, n json.Number) (any, error) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return int(i), nil
	}
	f, err := n.Float64()
	if err != nil {
		return nil, keyError(path, fmt.Sprintf("invalid number %q", n))
	}
	return f, nil
}

// CopyValue returns a deep copy of a normalized value: its mappings and
// lists are new, so changing the copy changes nothing the original holds.
func CopyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = CopyValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = CopyValue(e)
		}
		return out
	}
	return v
}

// toFloat is Number without isInt, for the space's normalized values
// (ints and float64s).
func toFloat(v any) (float64, bool) {
	f, _, ok := settings.Number(v)
	return f, ok
}

// toInt converts a normalized number with an integral value to int.
func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int(x), true
		}
	}
	return 0, false
}
