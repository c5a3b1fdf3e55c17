package spec

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tunejet/tunejet/internal/settings"
)

// decoder reads the experiment file: it turns the YAML node tree into
// plain values, recording the line of every key, and reads them into the
// spec with settings.Decode, so that every problem points at its line.
type decoder struct {
	file   string
	lines  map[string]int  // dotted key path → line of the key
	null   map[string]bool // keys given null, which counts as absent
	lost   map[string]bool // keys whose value could not be decoded: nil
	bad    map[string]bool // keys whose value could not be read
	errs   []*settings.Error
	active map[*yaml.Node]bool // the collections value is inside of
	values int                 // how many nodes value has decoded
}

// maxValues bounds the file's values after aliases are expanded.
const maxValues = 100000

func newDecoder(file string) *decoder {
	return &decoder{
		file: file, lines: map[string]int{}, null: map[string]bool{}, lost: map[string]bool{},
		bad: map[string]bool{}, active: map[*yaml.Node]bool{},
	}
}

// fail records a problem with key's value, at the key's line.
func (d *decoder) fail(key, format string, args ...any) {
	d.failAt(key, d.lineOf(key), format, args...)
}

// failAt records a problem with key's value at line.
func (d *decoder) failAt(key string, line int, format string, args ...any) {
	d.bad[key] = true
	d.errs = append(d.errs, &settings.Error{File: d.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// drop records a problem with key's value, which is lost: nil.
func (d *decoder) drop(key, format string, args ...any) any {
	d.fail(key, format, args...)
	d.lost[key] = true
	return nil
}

// record records the problems settings.Decode found, each at its key's
// line, but for those at a lost value, which was reported already.
func (d *decoder) record(p *settings.Problems) {
	for _, e := range p.List() {
		if !d.lost[e.Key] {
			d.fail(e.Key, "%s", e.Msg)
		}
	}
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

// has reports whether key is in the file with a value other than null.
func (d *decoder) has(key string) bool {
	_, ok := d.lines[key]
	return ok && !d.null[key]
}

// given reports whether key was set in the file and read.
func (d *decoder) given(key string) bool { return d.has(key) && !d.bad[key] }

func (d *decoder) err() error { return joinErrors(d.errs) }

// join appends k to the dotted path key.
func join(key, k string) string { return settings.Join(key, k) }

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// value decodes any node into plain values: map[string]any, []any,
// string, bool, int, float64 and nil. Scalars of other tags (timestamps,
// binary) are kept as their text. Keys must be scalars and unique. An
// alias that refers to a node containing it, or aliases that expand the
// file beyond maxValues, are errors.
func (d *decoder) value(key string, n *yaml.Node) any {
	d.values++
	switch {
	case d.active[n]:
		return d.drop(key, "alias refers to a value that contains it")
	case d.values == maxValues+1:
		d.bad[""] = true // the values after it are lost: check nothing more
		return d.drop(key, "too many values after expanding aliases (more than %d)", maxValues)
	case d.values > maxValues:
		d.lost[key] = true
		return nil
	}
	d.active[n] = true
	defer delete(d.active, n)
	switch n.Kind {
	case yaml.MappingNode:
		return d.mapping(key, n)
	case yaml.SequenceNode:
		l := make([]any, len(n.Content))
		for i, e := range n.Content {
			path := join(key, strconv.Itoa(i))
			d.lines[path] = e.Line
			l[i] = d.value(path, resolve(e))
		}
		return l
	}
	return d.scalar(key, n)
}

// mapping decodes the entries of a mapping, recording their lines.
func (d *decoder) mapping(key string, n *yaml.Node) map[string]any {
	m := map[string]any{}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			what := "a list"
			if k.Kind == yaml.MappingNode {
				what = "a mapping"
			}
			d.failAt(key, k.Line, "mapping keys must be strings, got %s", what)
			continue
		}
		path := join(key, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.failAt(path, k.Line, "duplicate key (first given on line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		d.lines[path] = k.Line
		m[k.Value] = d.value(path, v)
	}
	return m
}

func (d *decoder) scalar(key string, n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!str":
		if n.Style == 0 && outOfRange(n.Value) {
			return d.drop(key, "number %s is out of range", n.Value)
		}
	case "!!null":
		d.null[key] = true
		return nil
	case "!!bool":
		return decodeAs[bool](d, key, "boolean", n)
	case "!!int":
		return decodeAs[int](d, key, "integer", n)
	case "!!float":
		return decodeAs[float64](d, key, "number", n)
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

// decodeAs decodes the scalar n, a what, as a T, or returns nil after
// reporting that it is out of T's range.
func decodeAs[T any](d *decoder, key, what string, n *yaml.Node) any {
	var v T
	if err := n.Decode(&v); err != nil {
		return d.drop(key, "%s %s is out of range", what, n.Value)
	}
	return v
}
