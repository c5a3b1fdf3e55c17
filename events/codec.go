package events

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	ce "github.com/cloudevents/sdk-go/v2/event"
)

// Header names used on NATS messages.
const (
	// HeaderMsgID is JetStream's de-duplication header; it carries the event id.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderContentType marks structured-mode events.
	HeaderContentType = "Content-Type"
	// ExtensionExperiment is the CloudEvents extension naming the experiment.
	ExtensionExperiment = "experiment"

	contentTypeJSON       = "application/json"
	contentTypeStructured = "application/cloudevents"
	headerPrefix          = "ce-"
)

// Event is one tunejet event: the CloudEvents context attributes plus the
// typed payload.
type Event struct {
	// ID is unique per event; it is also the Nats-Msg-Id.
	ID string
	// Source names the service instance that wrote the event, e.g.
	// "tunejet/runner/host-1234".
	Source string
	// Time is when the event happened.
	Time time.Time
	// Experiment and Writer locate the event (with the type and trial, they
	// give the subject).
	Experiment string
	Writer     Writer
	// Data is the payload; its Type() is the CloudEvents type.
	Data Payload
	// Seq is the event's JetStream stream sequence when it was read from
	// the log; 0 before it is published.
	Seq uint64
}

// Message is an encoded event: what goes on the wire.
type Message struct {
	Subject string
	Header  map[string][]string
	Data    []byte
}

// New returns an event with a fresh id and the current time.
func New(exp string, w Writer, source string, p Payload) *Event {
	return &Event{ID: NewID(), Source: source, Time: time.Now().UTC(), Experiment: exp, Writer: w, Data: p}
}

// NewID returns a random 128-bit id in hex.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Type is the event's CloudEvents type.
func (e *Event) Type() string { return e.Data.Type() }

// Trial is the trial the event is about, or "".
func (e *Event) Trial() string { return TrialOf(e.Data) }

// Subject is the NATS subject the event is published on.
func (e *Event) Subject() string { return Subject(e.Experiment, e.Writer, e.Type(), e.Trial()) }

// ceSubject is the CloudEvents subject attribute: the trial, or the
// experiment for experiment-level events.
func (e *Event) ceSubject() string {
	if t := e.Trial(); t != "" {
		return t
	}
	return e.Experiment
}

// Validate checks the whole event: attributes, address and payload.
func (e *Event) Validate() error {
	_, err := e.validate()
	return err
}

// validate is Validate; it returns the subject it checked.
func (e *Event) validate() (string, error) {
	err := e.validateAttrs()
	if err != nil {
		return "", err
	}
	subject := e.Subject()
	if _, err := ParseSubject(subject); err != nil {
		return "", fmt.Errorf("%s: %w", e.Type(), err)
	}
	if err := checkSpecName(e.Data, e.Experiment); err != nil {
		return "", fmt.Errorf("%s: %w", e.Type(), err)
	}
	return subject, nil
}

func (e *Event) validateAttrs() error {
	if e.Data == nil {
		return fmt.Errorf("%w: no data", ErrInvalid)
	}
	if strings.TrimSpace(e.ID) == "" {
		return fmt.Errorf("%w: %s: attribute \"id\" must not be empty", ErrInvalid, e.Type())
	}
	if !utf8.ValidString(e.ID) {
		return fmt.Errorf("%w: %s: attribute \"id\" is not valid UTF-8: %q", ErrInvalid, e.Type(), e.ID)
	}
	if !utf8.ValidString(e.Source) {
		return fmt.Errorf("%w: %s: attribute \"source\" is not valid UTF-8: %q", ErrInvalid, e.Type(), e.Source)
	}
	if strings.TrimSpace(e.Source) == "" {
		return fmt.Errorf("%w: %s: attribute \"source\" must not be empty", ErrInvalid, e.Type())
	}
	if !plainSource(e.Source) {
		if _, err := url.Parse(e.Source); err != nil {
			return fmt.Errorf("%w: %s: attribute \"source\" must be a URI-reference: %w", ErrInvalid, e.Type(), err)
		}
	}
	if e.Time.IsZero() {
		return fmt.Errorf("%w: %s: attribute \"time\" must be set", ErrInvalid, e.Type())
	}
	// Check the ids before building the subject from them, so a bad id is
	// named as such rather than as a subject of the wrong shape.
	if err := ValidateID("experiment name", e.Experiment); err != nil {
		return fmt.Errorf("%s: %w", e.Type(), err)
	}
	if err := e.Data.Validate(); err != nil {
		return fmt.Errorf("%s: %w", e.Type(), err)
	}
	return nil
}

// checkSpecName rejects an experiment.submitted whose spec names another
// experiment than its subject: the name is the subject token and the
// storage directory at once.
func checkSpecName(p Payload, exp string) error {
	if s, ok := p.(*ExperimentSubmitted); ok && s.Spec.Name != exp {
		return fieldErr("spec.name", "is %q but the subject says %q", s.Spec.Name, exp)
	}
	return nil
}

// Encode validates e and encodes it in CloudEvents binary content mode.
func Encode(e *Event) (*Message, error) {
	subject, err := e.validate()
	if err != nil {
		return nil, err
	}
	var data []byte
	if r, ok := e.Data.(*TrialReported); ok {
		data, err = marshalReported(r)
	} else {
		data, err = json.Marshal(e.Data)
	}
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", e.Type(), err)
	}
	// One backing array for the nine values: this runs for every report.
	v := [...]string{
		e.ID, ce.CloudEventsVersionV1, percentEncode(e.ID), percentEncode(e.Source), e.Type(),
		percentEncode(e.ceSubject()), e.Time.UTC().Format(time.RFC3339Nano), contentTypeJSON, e.Experiment,
	}
	vals := v[:]
	h := make(map[string][]string, len(v))
	for i, k := range [...]string{
		HeaderMsgID, headerPrefix + "specversion", headerPrefix + "id", headerPrefix + "source", headerPrefix + "type",
		headerPrefix + "subject", headerPrefix + "time", headerPrefix + "datacontenttype", headerPrefix + ExtensionExperiment,
	} {
		h[k] = vals[i : i+1 : i+1]
	}
	return &Message{Subject: subject, Header: h, Data: data}, nil
}

// Decode reads an event from a NATS message in binary or structured mode.
// Every error wraps ErrInvalid and says what is wrong.
func Decode(subject string, header map[string][]string, data []byte) (*Event, error) {
	addr, err := ParseSubject(subject)
	if err != nil {
		return nil, err
	}
	if out, p, ok := decodeBinaryLean(addr, header, data); ok {
		return finishDecode(addr, out, p)
	}
	return decodeSDK(subject, addr, header, data)
}

// decodeSDK is the general decoder: it builds a CloudEvents SDK event from
// either content mode, so every attribute the SDK checks is checked, and
// its errors say which. Decode uses it for structured mode and for any
// binary message the lean path does not take.
func decodeSDK(subject string, addr Address, header map[string][]string, data []byte) (*Event, error) {
	var ev ce.Event
	var err error
	var source string // verbatim: ev.Source() re-escapes it as a URL
	if isStructured(header) {
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, fmt.Errorf("%w: subject %q: structured event: %w", ErrInvalid, subject, err)
		}
		var raw struct {
			Source string `json:"source"`
		}
		_ = json.Unmarshal(data, &raw) // cannot fail: the same bytes just parsed
		source = raw.Source
		// Binary mode's SetID trims the id; so does structured mode, so
		// that both give the same event and it encodes back to itself.
		if id := strings.TrimSpace(ev.ID()); id != ev.ID() {
			if id == "" {
				return nil, fmt.Errorf("%w: subject %q: structured event: attribute \"id\" must not be empty", ErrInvalid, subject)
			}
			ev.SetID(id)
		}
	} else {
		ev, source, err = readBinary(subject, header, data)
		if err != nil {
			return nil, err
		}
	}
	if err := ev.Validate(); err != nil {
		return nil, fmt.Errorf("%w: subject %q: %w", ErrInvalid, subject, err)
	}
	if err := checkUTF8(ev, source); err != nil {
		return nil, fmt.Errorf("%w: subject %q: %w", ErrInvalid, subject, err)
	}
	if ev.Type() != addr.Type {
		return nil, fmt.Errorf("%w: subject %q carries %s but attribute \"type\" is %q", ErrInvalid, subject, addr.Type, ev.Type())
	}
	if ct := ev.DataContentType(); ct != "" && !strings.HasPrefix(ct, contentTypeJSON) {
		return nil, fmt.Errorf("%w: %s: datacontenttype %q: want %s", ErrInvalid, addr.Type, ct, contentTypeJSON)
	}
	if exp, ok := ev.Extensions()[ExtensionExperiment]; ok && fmt.Sprint(exp) != addr.Experiment {
		return nil, fmt.Errorf("%w: %s: extension \"experiment\" is %q but the subject says %q", ErrInvalid, addr.Type, exp, addr.Experiment)
	}
	p := NewPayload(addr.Type)
	dec := json.NewDecoder(bytes.NewReader(ev.Data()))
	if err := dec.Decode(p); err != nil {
		return nil, fmt.Errorf("%w: %s: data: %v", ErrInvalid, addr.Type, describeJSONError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: %s: data: unexpected bytes after the JSON object", ErrInvalid, addr.Type)
	}
	out := &Event{
		ID: ev.ID(), Source: source, Time: ev.Time(), Experiment: addr.Experiment,
		Writer: addr.Writer, Data: p,
	}
	if _, err := finishDecode(addr, out, p); err != nil {
		return nil, err
	}
	// What Encode requires of the attributes, beyond the SDK's checks (a
	// source of white space passes those): an accepted event encodes.
	if err := out.validateAttrs(); err != nil {
		return nil, err
	}
	return out, nil
}

// checkUTF8 rejects attributes that are not valid UTF-8, as percentDecode
// does for binary mode: structured mode's JSON reader lets such bytes
// through, and an event holding them could not be encoded and read back.
func checkUTF8(ev ce.Event, source string) error {
	attrs := [][2]string{{"id", ev.ID()}, {"source", source}, {"subject", ev.Subject()}, {"dataschema", ev.DataSchema()}}
	exts := ev.Extensions()
	names := make([]string, 0, len(exts))
	for name := range exts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		attrs = append(attrs, [2]string{name, fmt.Sprint(exts[name])})
	}
	for _, a := range attrs {
		if !utf8.ValidString(a[1]) {
			return fmt.Errorf("attribute %q is not valid UTF-8: %q", a[0], a[1])
		}
	}
	return nil
}

// finishDecode checks what both decoders check the same way: the time, the
// payload against the subject, and the payload's own rules.
func finishDecode(addr Address, out *Event, p Payload) (*Event, error) {
	if out.Time.IsZero() {
		return nil, fmt.Errorf("%w: %s: attribute \"time\" is missing", ErrInvalid, addr.Type)
	}
	if t := TrialOf(p); t != addr.Trial {
		return nil, fmt.Errorf("%w: %s: field \"trial_id\" is %q but the subject says %q", ErrInvalid, addr.Type, t, addr.Trial)
	}
	if err := checkSpecName(p, addr.Experiment); err != nil {
		return nil, fmt.Errorf("%s: %w", addr.Type, err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", addr.Type, err)
	}
	return out, nil
}

// decodeBinaryLean decodes a binary-mode message of the usual shape — the
// attributes tunejet writes, each once, well formed — straight from its
// headers, and unmarshals the data once into the typed payload, without
// building an SDK event (trial.reported, the hot one, through
// leanReported). It accepts only what decodeSDK accepts and gives
// the same event for it; anything else (an unknown extension, a
// dataschema, a media type other than application/json, a bad value, data
// that does not unmarshal) returns ok false, and decodeSDK decodes it again
// and names the problem.
func decodeBinaryLean(addr Address, h map[string][]string, data []byte) (*Event, Payload, bool) {
	const (
		seenSpec = 1 << iota
		seenID
		seenSource
		seenType
		seenSubject
		seenCT
		seenTime
		seenExp
	)
	var seen int
	var id, source, typ, ct, tm, exp string
	for k, v := range h {
		if len(k) < len(headerPrefix) || !strings.EqualFold(k[:len(headerPrefix)], headerPrefix) {
			if strings.EqualFold(k, HeaderContentType) {
				return nil, nil, false // structured mode, perhaps
			}
			continue
		}
		if len(v) == 0 {
			continue
		}
		val, err := percentDecode(v[0])
		if err != nil {
			return nil, nil, false
		}
		var bit int
		switch name := k[len(headerPrefix):]; {
		case strings.EqualFold(name, "specversion"):
			if val != ce.CloudEventsVersionV1 {
				return nil, nil, false
			}
			bit = seenSpec
		case strings.EqualFold(name, "id"):
			id, bit = val, seenID
		case strings.EqualFold(name, "source"):
			source, bit = val, seenSource
		case strings.EqualFold(name, "type"):
			typ, bit = val, seenType
		case strings.EqualFold(name, "subject"):
			bit = seenSubject // not used; the NATS subject addresses the event
		case strings.EqualFold(name, "datacontenttype"):
			ct, bit = val, seenCT
		case strings.EqualFold(name, "time"):
			tm, bit = val, seenTime
		case strings.EqualFold(name, ExtensionExperiment):
			exp, bit = val, seenExp
		default:
			return nil, nil, false
		}
		if seen&bit != 0 { // the same attribute twice, in different cases
			return nil, nil, false
		}
		seen |= bit
	}
	const required = seenSpec | seenID | seenSource | seenType | seenTime
	if seen&required != required || typ != addr.Type || !trimmed(id) || !trimmed(source) ||
		!plainSource(source) || (seen&seenCT != 0 && ct != contentTypeJSON) ||
		(seen&seenExp != 0 && exp != addr.Experiment) {
		return nil, nil, false
	}
	t, err := time.Parse(time.RFC3339Nano, tm)
	if err != nil || t.IsZero() {
		return nil, nil, false
	}
	var p Payload
	if addr.Type == TypeTrialReported {
		r, ok := leanReported(data)
		if !ok {
			return nil, nil, false
		}
		p = r
	} else {
		p = NewPayload(addr.Type)
		if len(data) == 0 || data[0] != '{' || json.Unmarshal(data, p) != nil {
			return nil, nil, false
		}
	}
	return &Event{ID: id, Source: source, Time: t, Experiment: addr.Experiment, Writer: addr.Writer, Data: p}, p, true
}

// trimmed reports whether s is non-empty with no surrounding white space:
// the SDK trims an id, and rejects an empty one.
func trimmed(s string) bool { return s != "" && strings.TrimSpace(s) == s }

// plainSource reports whether a source is made only of characters that
// make url.Parse succeed without a question (letters, digits, '/', '.',
// '_', '-'); any other source goes through the SDK's check.
func plainSource(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '/' && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isStructured(h map[string][]string) bool {
	for k, v := range h {
		if strings.EqualFold(k, HeaderContentType) && len(v) > 0 &&
			strings.HasPrefix(strings.ToLower(v[0]), contentTypeStructured) {
			return true
		}
	}
	return false
}

// readBinary builds the event from ce-* headers and returns it with the
// decoded source attribute.
func readBinary(subject string, h map[string][]string, data []byte) (ce.Event, string, error) {
	ev := ce.New()
	attrs := map[string]string{}
	for k, v := range h {
		lk := strings.ToLower(k)
		if !strings.HasPrefix(lk, headerPrefix) || len(v) == 0 {
			continue
		}
		val, err := percentDecode(v[0])
		if err != nil {
			return ev, "", fmt.Errorf("%w: subject %q: header %q: %w", ErrInvalid, subject, k, err)
		}
		attrs[strings.TrimPrefix(lk, headerPrefix)] = val
	}
	if attrs["specversion"] != ce.CloudEventsVersionV1 {
		return ev, "", fmt.Errorf("%w: subject %q: header \"ce-specversion\" must be %q, got %q (is this a CloudEvent?)", ErrInvalid, subject, ce.CloudEventsVersionV1, attrs["specversion"])
	}
	for name, val := range attrs {
		var err error
		switch name {
		case "specversion":
		case "id":
			ev.SetID(val)
		case "source":
			ev.SetSource(val)
		case "type":
			ev.SetType(val)
		case "subject":
			ev.SetSubject(val)
		case "datacontenttype":
			ev.SetDataContentType(val)
		case "dataschema":
			ev.SetDataSchema(val)
		case "time":
			var t time.Time
			t, err = time.Parse(time.RFC3339Nano, val)
			ev.SetTime(t)
		default:
			ev.SetExtension(name, val)
		}
		if err != nil {
			return ev, "", fmt.Errorf("%w: subject %q: header \"ce-%s\": %w", ErrInvalid, subject, name, err)
		}
	}
	ev.DataEncoded = data
	return ev, attrs["source"], nil
}

func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" { // the data itself, not one of its fields
			return fmt.Sprintf("want a JSON object, got JSON %s", te.Value)
		}
		return fmt.Sprintf("field %q: want %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	return err.Error()
}

// percentEncode encodes a header value as the CloudEvents NATS binding asks:
// space, '"', '%' and anything outside printable ASCII become %XX.
func percentEncode(s string) string {
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c > 0x20 && c < 0x7f && c != '"' && c != '%'
	}
	if plain {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 0x20 || c >= 0x7f || c == '"' || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// percentDecode reverses percentEncode and rejects invalid UTF-8, as the
// binding requires.
func percentDecode(s string) (string, error) {
	if !strings.Contains(s, "%") {
		if !utf8.ValidString(s) {
			return "", fmt.Errorf("%q is not valid UTF-8", s)
		}
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("truncated percent-encoding in %q", s)
		}
		v, err := hex.DecodeString(s[i+1 : i+3])
		if err != nil {
			return "", fmt.Errorf("bad percent-encoding in %q", s)
		}
		b.WriteByte(v[0])
		i += 2
	}
	if !utf8.ValidString(b.String()) {
		return "", fmt.Errorf("%q decodes to invalid UTF-8", s)
	}
	return b.String(), nil
}
