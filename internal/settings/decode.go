package settings

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Reader reads one setting's value, recording its problems in p, which is
// at the setting's key.
type Reader func(p *Problems, v any)

// Fields maps setting names to their readers.
type Fields map[string]Reader

// Read is the reader of a key the caller has read already.
func Read(*Problems, any) {}

// Custom is a settings struct with settings of a shape its plain fields
// cannot read (PBT's hyperparam_mutations, TPE's gamma): Settings returns
// their readers, which Decode uses besides the fields'.
type Custom interface {
	Settings() Fields
}

// Decode reads the mapping m, the settings of what name names ("asha"),
// into the struct dst points to. Each key is read by the field with that
// json name (fields of embedded structs included) or by dst's Custom
// readers; a null value keeps the field's value, its default. A key no
// reader takes is refused with the closest known name, and a field tagged
// `settings:"required"` that is absent is reported. extra are readers of
// keys the caller reads besides. Every problem is recorded in p, at the
// key below p's.
func Decode(p *Problems, name string, m map[string]any, dst any, extra ...Fields) {
	fields, required := FieldsOf(dst)
	if c, ok := dst.(Custom); ok {
		maps.Copy(fields, c.Settings())
	}
	for _, e := range extra {
		maps.Copy(fields, e)
	}
	known := slices.Sorted(maps.Keys(fields))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		read, ok := fields[k]
		switch {
		case !ok:
			unknown(p, k, name, known)
		case m[k] != nil:
			read(p.Under(k), m[k])
		}
	}
	for _, k := range required {
		if m[k] == nil {
			p.Add(k, "required")
		}
	}
}

// unknown reports the unknown key k, suggesting the closest of known.
func unknown(p *Problems, k, name string, known []string) {
	switch s := Suggest(k, known); {
	case s != "":
		p.Add(k, "unknown key, did you mean %q?", s)
	case len(known) == 0:
		p.Add(k, "unknown key; %q takes no settings", name)
	default:
		p.Add(k, "unknown key; valid keys: %s", strings.Join(known, ", "))
	}
}

// FieldsOf returns the readers of the settings fields of the struct dst
// points to, by json name, and the names of the required ones.
func FieldsOf(dst any) (Fields, []string) {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("settings: Decode needs a pointer to a struct, got %T", dst))
	}
	fields := Fields{}
	var required []string
	collect(v.Elem(), fields, &required)
	return fields, required
}

func collect(v reflect.Value, fields Fields, required *[]string) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("settings")
		if !f.IsExported() || tag == "-" {
			continue
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			collect(v.Field(i), fields, required)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = reader(v.Field(i))
		if tag == "required" {
			*required = append(*required, name)
		}
	}
}

// reader returns the reader of a field of a plain type: a string, a bool,
// a number, an integer, a list of numbers or an optional number.
func reader(f reflect.Value) Reader {
	switch {
	case f.Kind() == reflect.String:
		return func(p *Problems, v any) {
			if s, ok := v.(string); ok {
				f.SetString(s)
				return
			}
			p.Add("", "expected a string, got %s", Describe(v))
		}
	case f.Kind() == reflect.Bool:
		return func(p *Problems, v any) {
			if b, ok := v.(bool); ok {
				f.SetBool(b)
				return
			}
			p.Add("", "expected a boolean, got %s", Describe(v))
		}
	case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
		return func(p *Problems, v any) {
			if n, ok := Int(v); ok {
				f.SetInt(int64(n))
				return
			}
			p.Add("", "expected an integer, got %s", Describe(v))
		}
	case f.Kind() == reflect.Float64:
		return func(p *Problems, v any) { number(p, v, f.SetFloat) }
	case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Float64:
		return func(p *Problems, v any) {
			number(p, v, func(x float64) {
				f.Set(reflect.New(f.Type().Elem()))
				f.Elem().SetFloat(x)
			})
		}
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Float64:
		return func(p *Problems, v any) { numbers(p, v, f) }
	}
	panic(fmt.Sprintf("settings: no reader for a field of type %s: tag it settings:\"-\" and read it in Settings()", f.Type()))
}

func number(p *Problems, v any, set func(float64)) {
	if x, ok := Finite(v); ok {
		set(x)
		return
	}
	p.Add("", "expected a finite number, got %s", Describe(v))
}

func numbers(p *Problems, v any, f reflect.Value) {
	l, ok := v.([]any)
	if !ok {
		p.Add("", "expected a list of numbers, got %s", Describe(v))
		return
	}
	out := reflect.MakeSlice(f.Type(), len(l), len(l))
	for i, e := range l {
		x, ok := Finite(e)
		if !ok {
			p.Add(strconv.Itoa(i), "expected a finite number, got %s", Describe(e))
			return
		}
		out.Index(i).SetFloat(x)
	}
	f.Set(out)
}
