package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// jsonNode reads data, a valid JSON document, into the node tree the YAML
// parser would give, with the line of every node. Parse reads JSON this
// way because the YAML parser refuses some valid JSON: surrogate pair
// escapes ("\ud83d\ude00", which Python's json.dump writes for any
// character beyond the BMP) and keys longer than 1024 characters; and it
// reads a number beyond float64 as a string. Strings are decoded as
// encoding/json decodes them, and an integer beyond int64 is a float, as
// JSON encoders write large floats (1.1e19 as 11000000000000000000).
func jsonNode(data []byte) (*yaml.Node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	r := &jsonReader{dec: dec, data: data, line: 1}
	return r.node()
}

// jsonReader turns JSON tokens into nodes, counting lines as it goes.
type jsonReader struct {
	dec  *json.Decoder
	data []byte
	off  int64 // input offset after the last token
	line int   // the line of that offset
}

// token returns the next token and its line: a JSON token never spans
// lines, so the line where it ends is its line.
func (r *jsonReader) token() (json.Token, int, error) {
	tok, err := r.dec.Token()
	if err != nil {
		return nil, 0, err
	}
	end := r.dec.InputOffset()
	r.line += bytes.Count(r.data[r.off:end], []byte("\n"))
	r.off = end
	return tok, r.line, nil
}

func (r *jsonReader) node() (*yaml.Node, error) {
	tok, line, err := r.token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line}
		if x == '[' {
			n.Kind, n.Tag = yaml.SequenceNode, "!!seq"
		}
		return n, r.content(n)
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: x, Style: yaml.DoubleQuotedStyle, Line: line}, nil
	case json.Number:
		return numberNode(x, line), nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(x), Line: line}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: line}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// numberNode is an !!int node for an integer that int64 holds, else a
// !!float node. An integer beyond int64 is written in the float syntax
// the YAML decoder reads; beyond float64, it stays out of range.
func numberNode(x json.Number, line int) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: string(x), Line: line}
	if _, err := x.Int64(); err == nil {
		return n
	}
	n.Tag = "!!float"
	if f, err := x.Float64(); err == nil && !strings.ContainsAny(n.Value, ".eE") {
		n.Value = strconv.FormatFloat(f, 'g', -1, 64)
	}
	return n
}

// content reads the entries of an object (keys and values in turn) or the
// elements of an array into n, and its closing delimiter.
func (r *jsonReader) content(n *yaml.Node) error {
	for r.dec.More() {
		e, err := r.node()
		if err != nil {
			return err
		}
		n.Content = append(n.Content, e)
	}
	_, _, err := r.token()
	return err
}
