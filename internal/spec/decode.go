package spec

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tunejet/tunejet/internal/settings"
)

// decoder turns the YAML node tree into a spec, recording the line of every
// key so that later checks can point at it.
type decoder struct {
	file   string
	lines  map[string]int  // dotted key path → line of the key
	bad    map[string]bool // keys whose value could not be decoded
	errs   []*settings.Error
	active map[*yaml.Node]bool // the collections value is inside of
	values int                 // how many nodes value has decoded
}

// maxValues bounds the param_space after aliases are expanded.
const maxValues = 100000

func newDecoder(file string) *decoder {
	return &decoder{file: file, lines: map[string]int{}, bad: map[string]bool{}, active: map[*yaml.Node]bool{}}
}

// setter decodes the value of the key at a dotted path.
type setter func(key string, n *yaml.Node)

// fields maps the keys a mapping allows to their setters.
type fields map[string]setter

// fail records a problem with key's value, at the key's line.
func (d *decoder) fail(key, format string, args ...any) {
	d.failAt(key, d.lineOf(key), format, args...)
}

// failAt records a problem with key's value at line.
func (d *decoder) failAt(key string, line int, format string, args ...any) {
	d.bad[key] = true
	d.errs = append(d.errs, &settings.Error{File: d.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// lineOf returns the line of key, or of its closest recorded parent.
func (d *decoder) lineOf(key string) int {
	for {
		if l, ok := d.lines[key]; ok {
			return l
		}
		if key == "" {
			return 1
		}
		i := strings.LastIndexByte(key, '.')
		key = key[:max(i, 0)]
	}
}

// given reports whether key was set in the file and decoded.
func (d *decoder) given(key string) bool {
	_, ok := d.lines[key]
	return ok && !d.bad[key]
}

func (d *decoder) err() error { return joinErrors(d.errs) }

// join appends k to the dotted path key.
func join(key, k string) string {
	if key == "" {
		return k
	}
	return key + "." + k
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// pairs calls fn for each entry of the mapping n at key, with the entry's
// path, after checking that keys are scalars and unique and recording their
// lines.
func (d *decoder) pairs(key string, n *yaml.Node, fn func(path string, k, v *yaml.Node)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.failAt(key, k.Line, "mapping keys must be strings, got %s", describe(k))
			continue
		}
		path := join(key, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.failAt(path, k.Line, "duplicate key (first given on line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		d.lines[path] = k.Line
		fn(path, k, v)
	}
}

// mapping decodes the mapping n at key with fs. Unknown keys are errors;
// keys with a null value are treated as absent.
func (d *decoder) mapping(key string, n *yaml.Node, fs fields) {
	if !d.expect(key, n, yaml.MappingNode, "a mapping") {
		return
	}
	d.pairs(key, n, func(path string, k, v *yaml.Node) {
		set, ok := fs[k.Value]
		switch {
		case !ok:
			d.unknown(path, k.Value, fs)
		case isNull(v):
			delete(d.lines, path)
		default:
			set(path, v)
		}
	})
}

// unknown reports an unknown key, suggesting the closest known one.
func (d *decoder) unknown(path, name string, fs fields) {
	known := make([]string, 0, len(fs))
	for k := range fs {
		known = append(known, k)
	}
	slices.Sort(known)
	if s := settings.Suggest(name, known); s != "" {
		d.fail(path, "unknown key, did you mean %q?", s)
		return
	}
	d.fail(path, "unknown key; valid keys: %s", strings.Join(known, ", "))
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// expect checks that n has the given kind.
func (d *decoder) expect(key string, n *yaml.Node, kind yaml.Kind, want string) bool {
	if n.Kind == kind {
		return true
	}
	d.fail(key, "expected %s, got %s", want, describe(n))
	return false
}

// scalar checks that n is a scalar with one of tags.
func (d *decoder) scalar(key string, n *yaml.Node, want string, tags ...string) bool {
	if n.Kind == yaml.ScalarNode && slices.Contains(tags, n.ShortTag()) {
		return true
	}
	d.fail(key, "expected %s, got %s", want, describe(n))
	return false
}

// describe names a node's type and, for scalars, its value.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return describeScalar(n)
	}
	return "an empty value"
}

func describeScalar(n *yaml.Node) string {
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	switch n.ShortTag() {
	case "!!str":
		return fmt.Sprintf("string %q", v)
	case "!!int":
		return "integer " + v
	case "!!float":
		return "number " + v
	case "!!bool":
		return "boolean " + v
	case "!!null":
		return "null"
	}
	return n.ShortTag() + " " + v
}

// str decodes a string; an unquoted date (a YAML timestamp) is kept as its
// text.
func (d *decoder) str(p *string) setter {
	return func(key string, n *yaml.Node) {
		if d.scalar(key, n, "a string", "!!str", "!!timestamp") {
			*p = n.Value
		}
	}
}

func (d *decoder) boolean(p *bool) setter {
	return func(key string, n *yaml.Node) {
		if d.scalar(key, n, "a boolean", "!!bool") {
			d.decode(key, n, p)
		}
	}
}

func (d *decoder) boolPtr(p **bool) setter {
	return func(key string, n *yaml.Node) {
		var b bool
		if d.scalar(key, n, "a boolean", "!!bool") && d.decode(key, n, &b) {
			*p = &b
		}
	}
}

func (d *decoder) integer(p *int) setter {
	return func(key string, n *yaml.Node) {
		if d.scalar(key, n, "an integer", "!!int") {
			d.decode(key, n, p)
		}
	}
}

func (d *decoder) int64Ptr(p **int64) setter {
	return func(key string, n *yaml.Node) {
		var i int64
		if d.scalar(key, n, "an integer", "!!int") && d.decode(key, n, &i) {
			*p = &i
		}
	}
}

func (d *decoder) number(p *float64) setter {
	return func(key string, n *yaml.Node) {
		var f float64
		if !d.scalar(key, n, "a number", "!!int", "!!float") || !d.decode(key, n, &f) {
			return
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			d.fail(key, "expected a finite number, got %s", n.Value)
			return
		}
		*p = f
	}
}

// decode decodes the scalar n into p, reporting a value out of p's range.
func (d *decoder) decode(key string, n *yaml.Node, p any) bool {
	if err := n.Decode(p); err != nil {
		d.fail(key, "%s is out of range", describe(n))
		return false
	}
	return true
}

// strings decodes a list of strings; elements are keyed by their index.
func (d *decoder) strings(p *[]string) setter {
	return func(key string, n *yaml.Node) {
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
			d.fail(key, "expected a list of strings, got %s; write it as a list, e.g. [\"python3\", \"train.py\"]", describe(n))
			return
		}
		if !d.expect(key, n, yaml.SequenceNode, "a list of strings") {
			return
		}
		out := make([]string, len(n.Content))
		for i, e := range n.Content {
			path := join(key, strconv.Itoa(i))
			d.lines[path] = e.Line
			d.str(&out[i])(path, resolve(e))
		}
		*p = out
	}
}

// value decodes any node into the plain values of a param_space:
// map[string]any, []any, string, bool, int, float64 and nil. Scalars of
// other tags (timestamps, binary) are kept as their text. An alias that
// refers to a node containing it, or aliases that expand the space beyond
// maxValues, are errors.
func (d *decoder) value(key string, n *yaml.Node) any {
	d.values++
	switch {
	case d.active[n]:
		d.fail(key, "alias refers to a value that contains it")
		return nil
	case d.values == maxValues+1:
		d.fail(key, "too many values after expanding aliases (more than %d)", maxValues)
		fallthrough
	case d.values > maxValues:
		return nil
	}
	d.active[n] = true
	defer delete(d.active, n)
	return d.collection(key, n)
}

func (d *decoder) collection(key string, n *yaml.Node) any {
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		d.pairs(key, n, func(path string, k, v *yaml.Node) {
			m[k.Value] = d.value(path, v)
		})
		return m
	case yaml.SequenceNode:
		l := make([]any, len(n.Content))
		for i, e := range n.Content {
			path := join(key, strconv.Itoa(i))
			d.lines[path] = e.Line
			l[i] = d.value(path, resolve(e))
		}
		return l
	}
	return d.scalarValue(key, n)
}

func (d *decoder) scalarValue(key string, n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!str":
		if n.Style == 0 && outOfRange(n.Value) {
			d.fail(key, "number %s is out of range", n.Value)
			return nil
		}
	case "!!null":
		return nil
	case "!!bool":
		return decodeAs[bool](d, key, n)
	case "!!int":
		return decodeAs[int](d, key, n)
	case "!!float":
		return decodeAs[float64](d, key, n)
	}
	return n.Value
}

// yamlFloat is the syntax of a YAML float, which the YAML parser reads as
// a string when the value is beyond float64 (1e400).
var yamlFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// outOfRange reports whether an unquoted, untagged string is a number
// beyond float64.
func outOfRange(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return errors.Is(err, strconv.ErrRange) && yamlFloat.MatchString(s)
}

// decodeAs decodes the scalar n as a T, or returns nil after reporting why
// it cannot.
func decodeAs[T any](d *decoder, key string, n *yaml.Node) any {
	var v T
	if !d.decode(key, n, &v) {
		return nil
	}
	return v
}
