package events_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	ce "github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
)

func TestRoundTrip(t *testing.T) {
	for _, want := range allValid() {
		t.Run(want.Type()+"/"+string(want.Writer), func(t *testing.T) {
			m, err := events.Encode(want)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got, err := events.Decode(m.Subject, m.Header, m.Data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEncodeBinaryMode checks the NATS message that Encode produces: the
// subject, one ce-* header per attribute, Nats-Msg-Id, and the JSON data.
func TestEncodeBinaryMode(t *testing.T) {
	for _, e := range allValid() {
		m, err := events.Encode(e)
		if err != nil {
			t.Fatalf("%s: %v", e.Type(), err)
		}
		ceSubject := e.Trial()
		if ceSubject == "" {
			ceSubject = e.Experiment
		}
		want := map[string][]string{
			"Nats-Msg-Id":        {e.ID},
			"ce-specversion":     {"1.0"},
			"ce-id":              {e.ID},
			"ce-source":          {e.Source},
			"ce-type":            {e.Type()},
			"ce-subject":         {ceSubject},
			"ce-time":            {e.Time.Format(time.RFC3339Nano)},
			"ce-datacontenttype": {"application/json"},
			"ce-experiment":      {e.Experiment},
		}
		if diff := cmp.Diff(want, m.Header); diff != "" {
			t.Errorf("%s: header (-want +got):\n%s", e.Type(), diff)
		}
		if m.Subject != e.Subject() {
			t.Errorf("%s: subject %q, want %q", e.Type(), m.Subject, e.Subject())
		}
		if !json.Valid(m.Data) {
			t.Errorf("%s: data is not JSON: %s", e.Type(), m.Data)
		}
	}
}

func TestEncodeRejectsInvalidEvents(t *testing.T) {
	valid := func() *events.Event { return fixture(events.TypeTrialReported) }
	tests := []struct {
		name  string
		event func() *events.Event
		want  string
	}{
		{"no data", func() *events.Event { e := valid(); e.Data = nil; return e }, "no data"},
		{"no id", func() *events.Event { e := valid(); e.ID = " "; return e }, `attribute "id"`},
		{"no source", func() *events.Event { e := valid(); e.Source = ""; return e }, `attribute "source"`},
		{"source not a URI-reference", func() *events.Event { e := valid(); e.Source = "host%zz"; return e }, `attribute "source" must be a URI-reference`},
		{"no time", func() *events.Event { e := valid(); e.Time = time.Time{}; return e }, `attribute "time"`},
		{"bad experiment", func() *events.Event { e := valid(); e.Experiment = "a.b"; return e }, `experiment name "a.b"`},
		{"wrong writer", func() *events.Event { e := valid(); e.Writer = events.WriterController; return e }, `writer "controller" may not publish io.tunejet.trial.reported`},
		{"bad payload", func() *events.Event {
			e := valid()
			e.Data.(*events.TrialReported).Attempt = 0
			return e
		}, `field "attempt": must be >= 1`},
		{"earlier result without an iteration", func() *events.Event {
			e := valid()
			e.Data.(*events.TrialReported).Earlier = []map[string]any{{"loss": 1.0}}
			return e
		}, `field "earlier[0].training_iteration": must be an integer >= 1, got <nil>`},
		{"earlier results out of order", func() *events.Event {
			e := valid()
			e.Data.(*events.TrialReported).Earlier = []map[string]any{{"training_iteration": 3}, {"training_iteration": 2}}
			return e
		}, `field "earlier[1].training_iteration": must be greater than the one before it (3), got 2`},
		{"an earlier result not before the result", func() *events.Event {
			e := valid()
			e.Data.(*events.TrialReported).Earlier = []map[string]any{{"training_iteration": 7}}
			return e
		}, `field "result.training_iteration": must be greater than the last earlier result's (7), got 7`},
		{"spec names another experiment", func() *events.Event {
			e := fixture(events.TypeExperimentSubmitted)
			e.Data.(*events.ExperimentSubmitted).Spec.Name = "other"
			return e
		}, `field "spec.name": is "other" but the subject says "mnist_tune"`},
		{"fail_fast not false, true or raise", func() *events.Event {
			e := fixture(events.TypeExperimentSubmitted)
			e.Data.(*events.ExperimentSubmitted).Spec.RunConfig.FailureConfig.FailFast = "RAISE"
			return e
		}, `field "spec.run_config.failure_config.fail_fast": must be false, true or "raise", got "RAISE"`},
		{"a restore's mirror with an empty sync_up", func() *events.Event {
			e := fixture(events.TypeExperimentRestored)
			e.Data.(*events.ExperimentRestored).Mirror.Syncer.SyncUp = ""
			return e
		}, `field "mirror.syncer.sync_up": must not be empty`},
		{"negative sync bytes", func() *events.Event {
			e := fixture(events.TypeSyncCompleted)
			e.Data.(*events.SyncCompleted).Bytes = -1
			return e
		}, `field "bytes": must be >= 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := events.Encode(tt.event())
			checkInvalid(t, err, tt.want)
		})
	}
}

// TestTrainingIterationGoIntegers: a Go runner may put an int or an int64 in
// the result; Encode accepts both and Decode gives a JSON number back.
func TestTrainingIterationGoIntegers(t *testing.T) {
	for _, it := range []any{7, int64(7), 7.0} {
		e := fixture(events.TypeTrialReported)
		e.Data.(*events.TrialReported).Result = map[string]any{"training_iteration": it}
		m, err := events.Encode(e)
		if err != nil {
			t.Fatalf("%T: %v", it, err)
		}
		got, err := events.Decode(m.Subject, m.Header, m.Data)
		if err != nil {
			t.Fatalf("%T: %v", it, err)
		}
		if v := got.Data.(*events.TrialReported).Result["training_iteration"]; v != 7.0 {
			t.Errorf("%T: decoded training_iteration %v (%T)", it, v, v)
		}
	}
}

// TestPercentEncodedHeaders: attribute values with spaces, quotes, '%' and
// non-ASCII travel percent-encoded (upper-case hex) and come back unchanged.
func TestPercentEncodedHeaders(t *testing.T) {
	want := fixture(events.TypeTrialReported)
	want.ID = `run "7" at 100% – ü`
	want.Source = "tunejet/runner/büro host 7"
	m, err := events.Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	if got, wantH := m.Header["ce-source"][0], "tunejet/runner/b%C3%BCro%20host%207"; got != wantH {
		t.Errorf("ce-source %q, want %q", got, wantH)
	}
	if got, wantH := m.Header["ce-id"][0], "run%20%227%22%20at%20100%25%20%E2%80%93%20%C3%BC"; got != wantH {
		t.Errorf("ce-id %q, want %q", got, wantH)
	}
	for k, v := range m.Header {
		if k == events.HeaderMsgID {
			continue
		}
		for _, r := range v[0] {
			if r <= 0x20 || r >= 0x7f {
				t.Errorf("header %s=%q: %q is not printable ASCII", k, v[0], r)
			}
		}
	}
	got, err := events.Decode(m.Subject, m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}

	// Header names are case-insensitive, and lower-case hex decodes too.
	h := map[string][]string{}
	for k, v := range m.Header {
		h[strings.ToUpper(k[:1])+k[1:]] = []string{strings.ReplaceAll(v[0], "%C3%BC", "%c3%bc")}
	}
	got, err = events.Decode(m.Subject, h, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Ce-* headers, lower-case hex (-want +got):\n%s", diff)
	}
}

// TestDecodeIgnoresExtraAttributes: other extensions, a dataschema and
// headers that are not ce-* do not stop an event from decoding.
func TestDecodeIgnoresExtraAttributes(t *testing.T) {
	m := encoded(t, events.TypeTrialReported)
	m = withHeader(m, "ce-traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	m = withHeader(m, "ce-dataschema", "https://example.com/schema/io.tunejet.trial.reported.json")
	m = withHeader(m, "X-Other", "yes")
	got, err := events.Decode(m.Subject, m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fixture(events.TypeTrialReported), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// foreignReported is a trial.reported event in the JSON event format, as a
// publisher that is not tunejet (a Python script, a bridge) would send it.
const foreignReported = `{
	"specversion": "1.0",
	"id": "7d1c4f1e-2b7a-4f0e-9d7e-5a0c4b9f6a11",
	"source": "python-bridge/host a",
	"type": "io.tunejet.trial.reported",
	"subject": "3f9a2_00001",
	"time": "2026-11-29T12:30:00.5+01:00",
	"datacontenttype": "application/json",
	"experiment": "mnist_tune",
	"data": {"trial_id": "3f9a2_00001", "attempt": 2, "result": {"training_iteration": 3, "loss": 0.25}, "extra": "ignored"}
}`

func foreignWant() *events.Event {
	return &events.Event{
		ID:         "7d1c4f1e-2b7a-4f0e-9d7e-5a0c4b9f6a11",
		Source:     "python-bridge/host a",
		Time:       time.Date(2026, 11, 29, 11, 30, 0, 500000000, time.UTC),
		Experiment: fxExperiment,
		Writer:     events.WriterRunner,
		Data: &events.TrialReported{TrialID: fxTrial, Attempt: 2, Result: map[string]any{
			"training_iteration": 3.0, "loss": 0.25,
		}},
	}
}

func TestDecodeStructuredMode(t *testing.T) {
	subject := "tunejet.mnist_tune.runner.trial.reported.3f9a2_00001"

	base64Data := func() string {
		var ev map[string]any
		if err := json.Unmarshal([]byte(foreignReported), &ev); err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(ev["data"])
		delete(ev, "data")
		ev["data_base64"] = base64.StdEncoding.EncodeToString(data)
		b, _ := json.Marshal(ev)
		return string(b)
	}

	sdkBuilt := func() string {
		e := ce.New()
		e.SetID("7d1c4f1e-2b7a-4f0e-9d7e-5a0c4b9f6a11")
		e.SetSource("python-bridge/host a")
		e.SetType(events.TypeTrialReported)
		e.SetSubject(fxTrial)
		e.SetTime(time.Date(2026, 11, 29, 11, 30, 0, 500000000, time.UTC))
		e.SetExtension("experiment", fxExperiment)
		if err := e.SetData(ce.ApplicationJSON, map[string]any{
			"trial_id": fxTrial, "attempt": 2, "result": map[string]any{"training_iteration": 3, "loss": 0.25},
		}); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	tests := []struct {
		name   string
		header map[string][]string
		body   string
		source string // the source as sent, kept verbatim
	}{
		{"hand-written", map[string][]string{"Content-Type": {"application/cloudevents+json; charset=utf-8"}}, foreignReported, "python-bridge/host a"},
		{"lower-case header name and media type", map[string][]string{"content-type": {"Application/CloudEvents+JSON"}}, foreignReported, "python-bridge/host a"},
		{"data_base64", map[string][]string{"Content-Type": {"application/cloudevents+json"}}, base64Data(), "python-bridge/host a"},
		// sdk-go writes the source as an escaped URL.
		{"sdk-go JSON format", map[string][]string{"Content-Type": {"application/cloudevents+json"}}, sdkBuilt(), "python-bridge/host%20a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := events.Decode(subject, tt.header, []byte(tt.body))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			want := foreignWant()
			want.Source = tt.source
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// checkInvalid fails unless err wraps events.ErrInvalid and mentions want.
func checkInvalid(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one mentioning %q", want)
	}
	if !errors.Is(err, events.ErrInvalid) {
		t.Errorf("error %q does not wrap ErrInvalid", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not mention %q", err, want)
	}
}

func TestDecodeMalformed(t *testing.T) {
	reported := func() *events.Message { return encoded(t, events.TypeTrialReported) }
	structured := map[string][]string{"Content-Type": {"application/cloudevents+json"}}
	const reportedSubject = "tunejet.mnist_tune.runner.trial.reported.3f9a2_00001"

	tests := []struct {
		name string
		msg  *events.Message
		want string
	}{
		// Not a CloudEvent at all.
		{"garbage bytes without headers", &events.Message{Subject: reportedSubject, Data: []byte("\x00\xff{{not json")},
			`header "ce-specversion" must be "1.0", got "" (is this a CloudEvent?)`},
		{"garbage data with ce headers", &events.Message{Subject: reportedSubject, Header: reported().Header, Data: []byte("\x00\xff{{not json")},
			"io.tunejet.trial.reported: data: invalid character"},
		{"garbage structured body", &events.Message{Subject: reportedSubject, Header: structured, Data: []byte("\x00\xff{{not json")},
			"structured event"},
		{"empty data", &events.Message{Subject: reportedSubject, Header: reported().Header}, "io.tunejet.trial.reported: data: EOF"},
		{"trailing bytes after the data", &events.Message{Subject: reportedSubject, Header: reported().Header, Data: append(reported().Data, []byte(" {}")...)},
			"data: unexpected bytes after the JSON object"},
		{"data is not an object", &events.Message{Subject: reportedSubject, Header: reported().Header, Data: []byte(`[1,2]`)},
			"data: want a JSON object, got JSON array"},

		// Context attributes.
		{"missing ce-specversion", withHeader(reported(), "ce-specversion", ""), `header "ce-specversion"`},
		{"wrong ce-specversion", withHeader(reported(), "ce-specversion", "0.3"), `must be "1.0", got "0.3"`},
		{"type header does not match subject", withHeader(reported(), "ce-type", events.TypeTrialStarted),
			`carries io.tunejet.trial.reported but attribute "type" is "io.tunejet.trial.started"`},
		{"missing ce-type", withHeader(reported(), "ce-type", ""), "type: MUST be a non-empty string"},
		{"missing ce-id", withHeader(reported(), "ce-id", ""), "id: MUST be a non-empty string"},
		{"missing ce-source", withHeader(reported(), "ce-source", ""), "source: REQUIRED"},
		{"missing ce-time", withHeader(reported(), "ce-time", ""), `attribute "time" is missing`},
		{"bad ce-time", withHeader(reported(), "ce-time", "yesterday"), `header "ce-time"`},
		{"bad percent-encoding", withHeader(reported(), "ce-source", "host%4"), `header "ce-source": truncated percent-encoding`},
		{"bad percent-encoding hex", withHeader(reported(), "ce-source", "host%zz"), `header "ce-source": bad percent-encoding`},
		{"percent-encoded invalid UTF-8", withHeader(reported(), "ce-source", "host%C3%28"), `header "ce-source"`},
		{"raw invalid UTF-8", withHeader(reported(), "ce-source", "host\xc3\x28"), "not valid UTF-8"},
		{"bad extension name", withHeader(reported(), "ce-trace-id", "abc"), "extension:trace-id"},
		{"data is not JSON", withHeader(reported(), "ce-datacontenttype", "text/plain"), `datacontenttype "text/plain"`},
		{"experiment extension does not match subject", withHeader(reported(), "ce-experiment", "other"),
			`extension "experiment" is "other" but the subject says "mnist_tune"`},

		// Subjects.
		{"not a tunejet subject", withSubject(reported(), "metrics.mnist_tune.runner.trial.reported.3f9a2_00001"), "want tunejet.<experiment>.<writer>.<kind>.<verb>[.<trial>]"},
		{"too few tokens", withSubject(reported(), "tunejet.mnist_tune.runner"), "want tunejet.<experiment>"},
		{"unknown subject kind", withSubject(reported(), "tunejet.mnist_tune.runner.trial.exploded.3f9a2_00001"), `unknown event kind "trial.exploded"`},
		{"per-trial subject without trial", withSubject(reported(), "tunejet.mnist_tune.runner.trial.reported"), "io.tunejet.trial.reported events have 6 tokens, got 5"},
		{"experiment subject with trial", withSubject(encoded(t, events.TypeExperimentStarted), "tunejet.mnist_tune.controller.experiment.started.3f9a2_00001"),
			"io.tunejet.experiment.started events have 5 tokens, got 6"},
		{"runner publishing trial.created", withSubject(encoded(t, events.TypeTrialCreated), "tunejet.mnist_tune.runner.trial.created.3f9a2_00001"),
			`writer "runner" may not publish io.tunejet.trial.created`},
		{"controller publishing trial.reported", withSubject(reported(), "tunejet.mnist_tune.controller.trial.reported.3f9a2_00001"),
			`writer "controller" may not publish io.tunejet.trial.reported`},
		{"unknown writer", withSubject(reported(), "tunejet.mnist_tune.dashboard.trial.reported.3f9a2_00001"),
			`writer "dashboard" may not publish`},
		{"bad trial id in subject", withSubject(reported(), "tunejet.mnist_tune.runner.trial.reported.bad~id"), `trial id "bad~id"`},
		{"bad experiment in subject", withSubject(reported(), "tunejet.-mnist.runner.trial.reported.3f9a2_00001"), `experiment name "-mnist"`},

		// Data.
		{"trial_id does not match subject", edit(t, reported(), set("trial_id", "3f9a2_00002")),
			`field "trial_id" is "3f9a2_00002" but the subject says "3f9a2_00001"`},
		{"string attempt", edit(t, reported(), set("attempt", "2")), `field "attempt": want int, got JSON string`},
		{"attempt 0", edit(t, reported(), set("attempt", 0)), `io.tunejet.trial.reported: invalid event: field "attempt": must be >= 1, got 0`},
		{"missing attempt", edit(t, reported(), del("attempt")), `field "attempt": must be >= 1, got 0`},
		{"missing result", edit(t, reported(), del("result")), `field "result": must be an object`},
		{"missing training_iteration", edit(t, reported(), del("result.training_iteration")),
			`field "result.training_iteration": must be an integer >= 1`},
		{"fractional training_iteration", edit(t, reported(), set("result.training_iteration", 2.5)),
			`field "result.training_iteration": must be an integer >= 1, got 2.5`},
		{"string training_iteration", edit(t, reported(), set("result.training_iteration", "3")),
			`field "result.training_iteration"`},
		{"bad checkpoint digest", edit(t, encoded(t, events.TypeTrialCheckpointed), set("checkpoint.digest", "sha256:XYZ")),
			`field "checkpoint.digest": want sha256:<64 hex digits>, got "sha256:XYZ"`},
		{"md5 checkpoint digest", edit(t, encoded(t, events.TypeCheckpointPersisted), set("digest", "md5:9e107d9d372bb6826bd81d3542a419d6")),
			`field "digest"`},
		{"bad checkpoint name", edit(t, encoded(t, events.TypeTrialCheckpointed), set("checkpoint.name", "checkpoint_7")),
			`field "checkpoint.name": want checkpoint_NNNNNN, got "checkpoint_7"`},
		{"checkpoint name of another index", edit(t, encoded(t, events.TypeTrialCheckpointed), set("checkpoint.index", 3)),
			`field "checkpoint.name": checkpoint 3 is checkpoint_000003, got "checkpoint_000002"`},
		{"checkpoint object of another attempt", edit(t, encoded(t, events.TypeTrialCheckpointed), set("checkpoint.object", "3f9a2_00001/checkpoint_000002/attempt_1")),
			`field "checkpoint.object": attempt 2 stages checkpoint_000002 as "3f9a2_00001/checkpoint_000002/attempt_2", got "3f9a2_00001/checkpoint_000002/attempt_1"`},
		{"checkpoint object of another checkpoint", edit(t, encoded(t, events.TypeTrialCheckpointed), set("checkpoint.object", "3f9a2_00001/checkpoint_000001")),
			`field "checkpoint.object"`},
		{"checkpoint object of another trial", edit(t, encoded(t, events.TypeTrialCheckpointed), set("checkpoint.object", "3f9a2_00002/checkpoint_000002/attempt_2")),
			`field "checkpoint.object"`},
		{"bad status", edit(t, encoded(t, events.TypeTrialCompleted), set("status", "DONE")),
			`field "status": must be one of [TERMINATED ERROR], got "DONE"`},
		{"non-terminal status", edit(t, encoded(t, events.TypeTrialCompleted), set("status", "RUNNING")), `field "status"`},
		{"bad cause", edit(t, encoded(t, events.TypeTrialFailed), set("cause", "oom")),
			`field "cause": must be one of [error lost preempted], got "oom"`},
		{"dir_name with /", edit(t, encoded(t, events.TypeTrialCreated), set("dir_name", "../../etc")),
			`field "dir_name": "../../etc" must not contain '/'`},
		{"dir_name ..", edit(t, encoded(t, events.TypeTrialScheduled), set("dir_name", "..")),
			`field "dir_name": ".." is not a directory name`},
		{"dir_name with backslash", edit(t, encoded(t, events.TypeTrialCreated), set("dir_name", `..\x`)), `field "dir_name"`},
		{"config null", edit(t, encoded(t, events.TypeTrialCreated), set("config", nil)), `field "config": must be an object`},
		{"a trial exploiting itself", edit(t, encoded(t, events.TypeTrialScheduled), set("exploit", exploitOf("3f9a2_00001", "3f9a2_00001/checkpoint_000002/attempt_1"))),
			`field "exploit.source": a trial cannot exploit itself ("3f9a2_00001")`},
		{"an exploit of another trial's object", edit(t, encoded(t, events.TypeTrialScheduled), set("exploit", exploitOf("3f9a2_00004", "3f9a2_00005/checkpoint_000002/attempt_1"))),
			`field "exploit.checkpoint.object": "3f9a2_00005/checkpoint_000002/attempt_1" is not a staged copy of the donor 3f9a2_00004`},
		{"a pause without a reason", edit(t, encoded(t, events.TypeTrialPaused), set("reason", "")), `field "reason": must not be empty`},
		{"a hand-back without a runner", edit(t, encoded(t, events.TypeTrialReturned), set("runner", "")), `field "runner": must not be empty`},
		{"a hand-back of attempt 0", edit(t, encoded(t, events.TypeTrialReturned), set("attempt", 0)), `field "attempt": must be >= 1`},
		{"fail_fast neither bool nor raise", edit(t, encoded(t, events.TypeExperimentSubmitted), set("spec.run_config.failure_config.fail_fast", "yes")),
			"fail_fast must be one of {bool, 'raise'}. Got yes."},
		{"spec names another experiment", edit(t, encoded(t, events.TypeExperimentSubmitted), set("spec.name", "other")),
			`field "spec.name": is "other" but the subject says "mnist_tune"`},
		{"bad resume mode", edit(t, encoded(t, events.TypeExperimentRestored), set("resume.errored", "retry")),
			`field "resume.errored": must be one of [resume restart skip], got "retry"`},
		{"bad session", edit(t, encoded(t, events.TypeExperimentStarted), set("session", "yesterday")), `field "session"`},
		{"negative sync files", edit(t, encoded(t, events.TypeSyncCompleted), set("files", -1)), `field "files": must be >= 0, got -1`},
		{"negative seq", edit(t, encoded(t, events.TypeSyncCompleted), set("seq", -1)), `field "seq": want uint64, got JSON number -1`},

		// Structured mode with a bad event inside.
		{"structured wrong type", &events.Message{Subject: "tunejet.mnist_tune.runner.trial.started.3f9a2_00001", Header: structured, Data: []byte(foreignReported)},
			`carries io.tunejet.trial.started but attribute "type" is "io.tunejet.trial.reported"`},
		{"structured without time", &events.Message{Subject: reportedSubject, Header: structured,
			Data: []byte(strings.Replace(foreignReported, `"time": "2026-11-29T12:30:00.5+01:00",`, "", 1))}, `attribute "time" is missing`},
		{"structured without specversion", &events.Message{Subject: reportedSubject, Header: structured,
			Data: []byte(strings.Replace(foreignReported, `"specversion": "1.0",`, "", 1))}, "structured event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := events.Decode(tt.msg.Subject, tt.msg.Header, tt.msg.Data)
			if ev != nil {
				t.Errorf("Decode returned an event with the error")
			}
			checkInvalid(t, err, tt.want)
		})
	}
}

// TestSplit: a trial.reported event with earlier results splits into one
// event per result, oldest first, each valid and with the same envelope;
// any other event stays whole.
func TestSplit(t *testing.T) {
	var batch *events.Event
	for _, e := range allValid() {
		if p, ok := e.Data.(*events.TrialReported); ok && len(p.Earlier) > 0 {
			batch = e
		}
	}
	if batch == nil {
		t.Fatal("no batched trial.reported among the valid events")
	}
	parts := events.Split(batch)
	var its []float64
	for _, part := range parts {
		p := part.Data.(*events.TrialReported)
		if len(p.Earlier) != 0 || part.ID != batch.ID || !part.Time.Equal(batch.Time) || part.Source != batch.Source {
			t.Errorf("part %+v does not carry one result in the batch's envelope", part)
		}
		if _, err := events.Encode(part); err != nil {
			t.Errorf("part: %v", err)
		}
		its = append(its, p.Result["training_iteration"].(float64))
	}
	if want := []float64{5, 6, 7}; !slices.Equal(its, want) {
		t.Errorf("split iterations %v, want %v", its, want)
	}
	if batch.Data.(*events.TrialReported).Results()[2]["training_iteration"] != 7.0 {
		t.Error("Results does not end with Result")
	}
	single := fixture(events.TypeTrialReported)
	if got := events.Split(single); len(got) != 1 || got[0] != single {
		t.Errorf("a single report split into %d events", len(got))
	}
}

// exploitOf is a trial.scheduled exploit field: the donor and the object of
// its checkpoint_000002.
func exploitOf(source, object string) map[string]any {
	return map[string]any{"source": source, "checkpoint": map[string]any{
		"name": "checkpoint_000002", "index": 2, "object": object, "size": 10,
		"digest": "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "iteration": 4,
	}}
}
