package events_test

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
)

// encoded returns the encoded fixture of type typ.
func encoded(t *testing.T, typ string) *events.Message {
	t.Helper()
	m, err := events.Encode(fixture(typ))
	if err != nil {
		t.Fatalf("Encode %s: %v", typ, err)
	}
	return m
}

// edit returns a copy of m whose data has been changed by f, which gets the
// data as a generic JSON object.
func edit(t *testing.T, m *events.Message, f func(data map[string]any)) *events.Message {
	t.Helper()
	var data map[string]any
	if err := json.Unmarshal(m.Data, &data); err != nil {
		t.Fatal(err)
	}
	f(data)
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	return &events.Message{Subject: m.Subject, Header: cloneHeader(m.Header), Data: b}
}

// set returns an edit that sets the value at a dotted path ("checkpoint.digest").
func set(path string, v any) func(map[string]any) {
	return func(data map[string]any) {
		parent, key := walk(data, path)
		parent[key] = v
	}
}

// del returns an edit that deletes the value at a dotted path.
func del(path string) func(map[string]any) {
	return func(data map[string]any) {
		parent, key := walk(data, path)
		delete(parent, key)
	}
}

func walk(data map[string]any, path string) (map[string]any, string) {
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		data = data[k].(map[string]any)
	}
	return data, keys[len(keys)-1]
}

func cloneHeader(h map[string][]string) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, v := range h {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// withHeader returns a copy of m with header k set to v, or removed if v is "".
func withHeader(m *events.Message, k, v string) *events.Message {
	h := cloneHeader(m.Header)
	if v == "" {
		delete(h, k)
	} else {
		h[k] = []string{v}
	}
	return &events.Message{Subject: m.Subject, Header: h, Data: m.Data}
}

// withSubject returns a copy of m published on another subject.
func withSubject(m *events.Message, s string) *events.Message {
	return &events.Message{Subject: s, Header: maps.Clone(m.Header), Data: m.Data}
}
