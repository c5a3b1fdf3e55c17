package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tunejet/tunejet/events"

	"github.com/tunejet/tunejet/internal/settings"
)

// ParseFile reads and parses the experiment file at path, and sets the
// trainable's Dir to the absolute path of the file's folder when the
// trainable is a command.
func ParseFile(path string) (*events.ExperimentSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	s, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	if len(s.Trainable.Command) > 0 {
		dir, err := filepath.Abs(filepath.Dir(path))
		if err != nil {
			return nil, fmt.Errorf("spec: %w", err)
		}
		s.Trainable.Dir = dir
	}
	return s, nil
}

// Parse parses an experiment file's contents, YAML or JSON, validates it and
// applies the defaults. filename is used in error messages only. Parse
// leaves Trainable.Dir empty: set it to the folder relative commands should
// run in (ParseFile does). Every problem found is reported, sorted by line:
// a single *settings.Error, or several joined with errors.Join.
func Parse(filename string, data []byte) (*events.ExperimentSpec, error) {
	root, err := parseDocument(filename, data)
	if err != nil {
		return nil, err
	}
	d := newDecoder(filename)
	s := d.experiment(root)
	d.validate(s)
	if err := d.err(); err != nil {
		return nil, err
	}
	ApplyDefaults(s)
	return s, nil
}

// parseDocument returns the root node of the file: read by jsonNode if it
// is valid JSON, else by the YAML parser.
func parseDocument(filename string, data []byte) (*yaml.Node, error) {
	if !json.Valid(data) {
		return parseYAML(filename, data)
	}
	root, err := jsonNode(data)
	if err != nil {
		return nil, &settings.Error{File: filename, Msg: "syntax error: " + err.Error()}
	}
	return root, nil
}

// parseYAML returns the root node of the file's only document.
func parseYAML(filename string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &settings.Error{File: filename, Line: 1, Msg: "empty experiment file"}
		}
		return nil, syntaxError(filename, err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, &settings.Error{File: filename, Line: extra.Line, Msg: "more than one YAML document; an experiment file holds one"}
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(filename, err)
	}
	if len(doc.Content) == 0 {
		return nil, &settings.Error{File: filename, Line: 1, Msg: "empty experiment file"}
	}
	return doc.Content[0], nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns a YAML parser error into an *settings.Error with its line.
func syntaxError(filename string, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &settings.Error{File: filename, Line: line, Msg: "syntax error: " + m[2]}
	}
	return &settings.Error{File: filename, Msg: "syntax error: " + strings.TrimPrefix(msg, "yaml: ")}
}

// joinErrors returns nil, the only error, or all of them joined, sorted by
// line.
func joinErrors(errs []*settings.Error) error {
	slices.SortStableFunc(errs, func(a, b *settings.Error) int { return a.Line - b.Line })
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}
