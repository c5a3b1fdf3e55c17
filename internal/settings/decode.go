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
// keys the caller reads besides, or instead of the fields'. Every problem
// is recorded in p, at the key below p's.
func Decode(p *Problems, name string, m map[string]any, dst any, extra ...Fields) {
	fields, required := readers(dst, extra)
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

// readers returns the readers of dst's settings, its Custom ones and extra
// over its fields', and the names of the required ones.
func readers(dst any, extra []Fields) (Fields, []string) {
	fields, required := fieldsOf(dst)
	if c, ok := dst.(Custom); ok {
		maps.Copy(fields, c.Settings())
	}
	for _, e := range extra {
		maps.Copy(fields, e)
	}
	for k, read := range fields {
		if read == nil {
			panic(fmt.Sprintf("settings: no reader for %T's %q: tag the field settings:\"-\" and read it in Settings(), or pass its reader", dst, k))
		}
	}
	return fields, required
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

// Map reads a mapping, recording a problem for anything else.
func Map(p *Problems, v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		p.Add("", "expected a mapping, got %s", Describe(v))
	}
	return m, ok
}

// For returns the reader Decode uses for a field of the type ptr points
// to, reading into *ptr: for a caller's reader that reads a value of that
// type among others.
func For(ptr any) Reader {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer {
		panic(fmt.Sprintf("settings: For needs a pointer, got %T", ptr))
	}
	if read := reader(v.Elem()); read != nil {
		return read
	}
	panic(fmt.Sprintf("settings: no reader for a %s", v.Elem().Type()))
}

// fieldsOf returns the readers of the settings fields of the struct dst
// points to, by json name, and the names of the required ones. The reader
// of a field of a type Decode cannot read is nil.
func fieldsOf(dst any) (Fields, []string) {
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

// reader returns the reader of a field: a string, a bool, a number, an
// integer, a list or a pointer of those, or a struct, read from a mapping
// by Decode. It is nil for a field of another type.
func reader(f reflect.Value) Reader {
	switch f.Kind() {
	case reflect.String:
		return scalar(f, "a string", func(v any) (any, bool) { s, ok := v.(string); return s, ok })
	case reflect.Bool:
		return scalar(f, "a boolean", func(v any) (any, bool) { b, ok := v.(bool); return b, ok })
	case reflect.Int, reflect.Int64:
		return scalar(f, "an integer", func(v any) (any, bool) { return Int(v) })
	case reflect.Float64:
		return scalar(f, "a finite number", func(v any) (any, bool) { return Finite(v) })
	case reflect.Slice:
		return list(f)
	case reflect.Pointer:
		return pointer(f)
	case reflect.Struct:
		return func(p *Problems, v any) {
			if m, ok := Map(p, v); ok {
				Decode(p, p.Key(""), m, f.Addr().Interface())
			}
		}
	}
	return nil
}

// scalar is the reader of a plain value, which conv converts to a value
// of the field's kind, or refuses.
func scalar(f reflect.Value, want string, conv func(v any) (any, bool)) Reader {
	return func(p *Problems, v any) {
		if x, ok := conv(v); ok {
			f.Set(reflect.ValueOf(x).Convert(f.Type()))
			return
		}
		p.Add("", "expected %s, got %s", want, Describe(v))
	}
}

// list reads a list, each element at its index below the list's key. The
// field is set only when every element reads.
func list(f reflect.Value) Reader {
	t := f.Type()
	if reader(reflect.New(t.Elem()).Elem()) == nil {
		return nil
	}
	return func(p *Problems, v any) {
		l, ok := v.([]any)
		if !ok {
			p.Add("", "expected a list of %s, got %s", plural(t.Elem()), Describe(v))
			return
		}
		out := reflect.MakeSlice(t, len(l), len(l))
		n := p.Len()
		for i, e := range l {
			reader(out.Index(i))(p.Under(strconv.Itoa(i)), e)
		}
		if p.Len() == n {
			f.Set(out)
		}
	}
}

// plural names the values of a list of t.
func plural(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "strings"
	case reflect.Bool:
		return "booleans"
	case reflect.Int, reflect.Int64:
		return "integers"
	case reflect.Float64:
		return "numbers"
	case reflect.Struct:
		return "mappings"
	}
	return "values"
}

// pointer reads an optional value: a nil field stays nil unless a value
// is given, and is set only when that value reads. A value read into a
// field that is set starts from the field's value.
func pointer(f reflect.Value) Reader {
	t := f.Type().Elem()
	if reader(reflect.New(t).Elem()) == nil {
		return nil
	}
	return func(p *Problems, v any) {
		x := reflect.New(t)
		if !f.IsNil() {
			x.Elem().Set(f.Elem())
		}
		n := p.Len()
		reader(x.Elem())(p, v)
		if p.Len() == n {
			f.Set(x)
		}
	}
}
