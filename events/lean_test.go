package events_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
)

// TestLeanDecodeTakesWhatTunejetWrites: every event tunejet encodes is
// decoded by the lean path, which gives exactly what the SDK path gives.
func TestLeanDecodeTakesWhatTunejetWrites(t *testing.T) {
	for _, want := range allValid() {
		m, err := events.Encode(want)
		if err != nil {
			t.Fatalf("Encode %s: %v", want.Type(), err)
		}
		got, ok, err := events.DecodeLean(m.Subject, m.Header, m.Data)
		if !ok || err != nil {
			t.Fatalf("%s: the lean path did not take it (ok %v, err %v)", want.Type(), ok, err)
		}
		sdk, err := events.DecodeSDK(m.Subject, m.Header, m.Data)
		if err != nil {
			t.Fatalf("%s: SDK path: %v", want.Type(), err)
		}
		if diff := cmp.Diff(sdk, got); diff != "" {
			t.Errorf("%s: lean and SDK decodes differ (-sdk +lean):\n%s", want.Type(), diff)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: round trip (-want +got):\n%s", want.Type(), diff)
		}
	}
}

// TestLeanDecodeLeavesTheRestToTheSDK: a message the lean path is not sure
// of goes to the SDK path, which accepts or rejects it with its own words,
// and Decode's answer is the SDK path's in every case.
func TestLeanDecodeLeavesTheRestToTheSDK(t *testing.T) {
	reported := func() *events.Message { return encoded(t, events.TypeTrialReported) }
	upper := reported()
	upper.Header = map[string][]string{}
	for k, v := range reported().Header {
		upper.Header[strings.ToUpper(k[:1])+k[1:]] = v
	}
	twice := withHeader(reported(), "Ce-Id", "another")
	tests := []struct {
		name string
		msg  *events.Message
		lean bool // whether the lean path takes it
	}{
		{"canonical", reported(), true},
		{"Ce-* header names", upper, true},
		{"no ce-subject", withHeader(reported(), "ce-subject", ""), true},
		{"no ce-datacontenttype", withHeader(reported(), "ce-datacontenttype", ""), true},
		{"no ce-experiment", withHeader(reported(), "ce-experiment", ""), true},
		{"not a ce header", withHeader(reported(), "X-Other", "yes"), true},
		{"percent-encoded source", withHeader(reported(), "ce-source", "tunejet/runner/b%C3%BCro%20host"), false},
		{"source with a colon", withHeader(reported(), "ce-source", "urn:tunejet:runner"), false},
		{"id with spaces around", withHeader(reported(), "ce-id", "%20abc%20"), false},
		{"another extension", withHeader(reported(), "ce-traceparent", "00-4bf9-01"), false},
		{"bad extension name", withHeader(reported(), "ce-trace-id", "abc"), false},
		{"dataschema", withHeader(reported(), "ce-dataschema", "https://example.com/s.json"), false},
		{"media type with a parameter", withHeader(reported(), "ce-datacontenttype", "application/json; charset=utf-8"), false},
		{"text/plain", withHeader(reported(), "ce-datacontenttype", "text/plain"), false},
		{"wrong specversion", withHeader(reported(), "ce-specversion", "0.3"), false},
		{"no time", withHeader(reported(), "ce-time", ""), false},
		{"bad time", withHeader(reported(), "ce-time", "yesterday"), false},
		{"wrong type", withHeader(reported(), "ce-type", events.TypeTrialStarted), false},
		{"wrong experiment", withHeader(reported(), "ce-experiment", "other"), false},
		{"bad percent-encoding", withHeader(reported(), "ce-source", "host%4"), false},
		{"trailing bytes", &events.Message{Subject: reported().Subject, Header: reported().Header, Data: append(reported().Data, " {}"...)}, false},
		{"string attempt", edit(t, reported(), set("attempt", "2")), false},
		{"no data", &events.Message{Subject: reported().Subject, Header: reported().Header}, false},
		// Taken by the lean path, rejected by the checks both paths share.
		{"attempt 0", edit(t, reported(), set("attempt", 0)), true},
		{"other trial in data", edit(t, reported(), set("trial_id", "3f9a2_00002")), true},
	}
	// The same attribute twice: which value the SDK path keeps depends on
	// the map's order; the lean path must not choose.
	if _, ok, _ := events.DecodeLean(twice.Subject, twice.Header, twice.Data); ok {
		t.Errorf("the lean path took an event with ce-id and Ce-Id")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.msg
			lean, ok, lerr := events.DecodeLean(m.Subject, m.Header, m.Data)
			if ok != tt.lean {
				t.Fatalf("lean path took it: %v, want %v (err %v)", ok, tt.lean, lerr)
			}
			sdk, serr := events.DecodeSDK(m.Subject, m.Header, m.Data)
			got, err := events.Decode(m.Subject, m.Header, m.Data)
			if (err == nil) != (serr == nil) || (err != nil && err.Error() != serr.Error()) {
				t.Fatalf("Decode says %v, the SDK path %v", err, serr)
			}
			if diff := cmp.Diff(sdk, got); diff != "" {
				t.Errorf("Decode and the SDK path differ (-sdk +decode):\n%s", diff)
			}
			if ok {
				if (lerr == nil) != (serr == nil) || (lerr != nil && lerr.Error() != serr.Error()) {
					t.Fatalf("lean path says %v, the SDK path %v", lerr, serr)
				}
				if diff := cmp.Diff(sdk, lean); diff != "" {
					t.Errorf("lean and SDK decodes differ (-sdk +lean):\n%s", diff)
				}
			}
		})
	}
}

func BenchmarkDecodeReported(b *testing.B) {
	m, err := events.Encode(fixture(events.TypeTrialReported))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := events.Decode(m.Subject, m.Header, m.Data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SDK", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := events.DecodeSDK(m.Subject, m.Header, m.Data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkEncodeReported(b *testing.B) {
	ev := fixture(events.TypeTrialReported)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := events.Encode(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// TestValidIDMatchesThePattern: the hand-written id check says what the
// documented pattern says.
func TestValidIDMatchesThePattern(t *testing.T) {
	ids := []string{"", "a", "A", "0", "_", "-", "a_", "a-", "_a", "-a", "3f9a2_00001", "mnist_tune",
		"bad~id", "a.b", "a b", "ü", "a\n", strings.Repeat("a", 128), strings.Repeat("a", 129)}
	for _, id := range ids {
		if got, want := events.ValidID(id), events.IDPattern.MatchString(id); got != want {
			t.Errorf("validID(%q) = %v, the pattern says %v", id, got, want)
		}
	}
}

// TestAppendJSONIsMarshal: AppendJSON writes what json.Marshal writes, for
// the values results hold and for the ones it hands over.
func TestAppendJSONIsMarshal(t *testing.T) {
	type point struct{ X, Y int }
	values := []any{
		nil, true, false, "", "plain", `quote " and \ backslash`, "<html> & co", "tab\there", "ünïcode", "\u2028", "bad \xff utf8",
		0.0, 1.0, -1.5, 0.1, 1e-7, 1e-6, 123456789.0, 1e20, 1e21, 1.5e300, -2.5e-300, math.MaxFloat64, math.SmallestNonzeroFloat64,
		float32(0.1), 0, -7, int64(math.MaxInt64), int32(-3), uint64(math.MaxUint64), uint8(7),
		map[string]any{}, map[string]any(nil), []any{}, []any(nil), []any{1, "a", nil, []any{2.5}},
		map[string]any{"b": 1, "a": map[string]any{"z": []any{true}, "y": "<"}, "": 0.5, "é": 1, "A": 2},
		map[string]float64{"x": 1}, point{1, 2}, time.Date(2026, 11, 30, 10, 0, 0, 5, time.UTC), json.Number("12.50"),
	}
	for _, v := range values {
		want, werr := json.Marshal(v)
		got, gerr := events.AppendJSON([]byte("prefix"), v)
		if (werr == nil) != (gerr == nil) {
			t.Errorf("%#v: json.Marshal error %v, AppendJSON error %v", v, werr, gerr)
			continue
		}
		if werr == nil && string(got) != "prefix"+string(want) {
			t.Errorf("%#v: AppendJSON wrote %s, json.Marshal %s", v, got[len("prefix"):], want)
		}
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), map[string]any{"x": math.Inf(-1)}, []any{func() {}}} {
		if _, err := events.AppendJSON(nil, bad); err == nil {
			t.Errorf("%#v: no error", bad)
		}
	}
}

// TestLeanReportedIsEncodingJSON: trial.reported data of many shapes reads
// the same through the lean reader as through encoding/json, or the lean
// reader declines it.
func TestLeanReportedIsEncodingJSON(t *testing.T) {
	m := encoded(t, events.TypeTrialReported)
	bodies := []string{
		`{"trial_id":"3f9a2_00001","attempt":2,"result":{"training_iteration":1}}`,
		` { "attempt" : 2 , "trial_id" : "3f9a2_00001" , "result" : { "training_iteration" : 1e0 , "x" : -0.5E-3 } } `,
		`{"trial_id":"3f9a2_00001","attempt":2,"result":{"training_iteration":3,"nested":{"a":[1,2,{"b":null}],"c":true,"d":false},"s":"ünï","e":{}, "f":[]}}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"extra":{"ignored":[1,"x"]},"result":{"training_iteration":3}}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"earlier":[{"training_iteration":1,"x":1},{"training_iteration":2}],"result":{"training_iteration":3}}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"earlier":[],"result":{"training_iteration":3}}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"result":{"training_iteration":3,"dup":1,"dup":2}}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"earlier":[null],"result":{"training_iteration":3}}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"earlier":[{"training_iteration":1}, 2],"result":{"training_iteration":3}}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"earlier":[{"training_iteration":4}],"result":{"training_iteration":3}}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"Earlier":[{"training_iteration":1}],"result":{"training_iteration":3}}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"result":{"training_iteration":3,"esc":"a\"b"}}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"Result":{"training_iteration":3}}`,
		`{"trial_id":"3f9a2_00001","attempt":2.0,"result":{"training_iteration":3}}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"result":{"training_iteration":3,"big":1e400}}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"result":{"training_iteration":3,"lead":01}}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"result":{"training_iteration":3}}x`,
		`{"trial_id":"3f9a2_00001","attempt":2,"result":{"training_iteration":3,}}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"result":null}`,
		`{"trial_id":"3f9a2_00001","attempt":2,"trial_id":"3f9a2_00001","result":{"training_iteration":3}}`,
	}
	const plain = 7 // the first bodies are plain JSON the lean reader takes
	for i, body := range bodies {
		lean, ok, lerr := events.DecodeLean(m.Subject, m.Header, []byte(body))
		sdk, serr := events.DecodeSDK(m.Subject, m.Header, []byte(body))
		if i < plain && !ok {
			t.Errorf("%s: the lean reader declined it", body)
		}
		if !ok {
			continue
		}
		if (lerr == nil) != (serr == nil) {
			t.Errorf("%s: lean error %v, SDK error %v", body, lerr, serr)
			continue
		}
		if diff := cmp.Diff(sdk, lean); diff != "" {
			t.Errorf("%s: (-sdk +lean):\n%s", body, diff)
		}
	}
}
