package events

import (
	"fmt"
	"regexp"
	"strings"
)

// Prefix is the first token of every tunejet subject.
const Prefix = "tunejet"

// TypePrefix starts every CloudEvents type that tunejet defines.
const TypePrefix = "io.tunejet."

// Event types. The part after TypePrefix is also the <kind>.<verb> part of the
// subject.
const (
	TypeExperimentSubmitted     = "io.tunejet.experiment.submitted"
	TypeExperimentStarted       = "io.tunejet.experiment.started"
	TypeExperimentStopRequested = "io.tunejet.experiment.stop_requested"
	TypeExperimentInterrupted   = "io.tunejet.experiment.interrupted"
	TypeExperimentCompleted     = "io.tunejet.experiment.completed"
	TypeExperimentRestored      = "io.tunejet.experiment.restored"

	TypeTrialCreated       = "io.tunejet.trial.created"
	TypeTrialScheduled     = "io.tunejet.trial.scheduled"
	TypeTrialStarted       = "io.tunejet.trial.started"
	TypeTrialReported      = "io.tunejet.trial.reported"
	TypeTrialCheckpointed  = "io.tunejet.trial.checkpointed"
	TypeTrialFailed        = "io.tunejet.trial.failed"
	TypeTrialStopRequested = "io.tunejet.trial.stop_requested"
	TypeTrialPaused        = "io.tunejet.trial.paused"
	TypeTrialDecided       = "io.tunejet.trial.decided"
	TypeTrialCompleted     = "io.tunejet.trial.completed"
	TypeTrialArtifacts     = "io.tunejet.trial.artifacts"
	TypeTrialReturned      = "io.tunejet.trial.returned"

	TypeCheckpointPersisted = "io.tunejet.checkpoint.persisted"
	TypeCheckpointDeleted   = "io.tunejet.checkpoint.deleted"
	TypeSyncCompleted       = "io.tunejet.sync.completed"
	TypeSyncFailed          = "io.tunejet.sync.failed"

	TypeDriverAnswered = "io.tunejet.driver.answered"
)

// Writer names the service that publishes an event. It is a subject token.
type Writer string

// The writers. Each owns the subjects tunejet.<experiment>.<writer>.>.
const (
	WriterClient     Writer = "client"
	WriterController Writer = "controller"
	WriterRunner     Writer = "runner"
	WriterSyncer     Writer = "syncer"
	WriterRestorer   Writer = "restorer"
)

// typeInfo is what the contract says about one event type.
type typeInfo struct {
	writers  []Writer // who may publish it
	perTrial bool     // the subject ends with the trial id
	new      func() Payload
}

var registry = map[string]typeInfo{
	TypeExperimentSubmitted:     {[]Writer{WriterClient}, false, func() Payload { return &ExperimentSubmitted{} }},
	TypeExperimentStarted:       {[]Writer{WriterController}, false, func() Payload { return &ExperimentStarted{} }},
	TypeExperimentStopRequested: {[]Writer{WriterClient}, false, func() Payload { return &ExperimentStopRequested{} }},
	TypeExperimentInterrupted:   {[]Writer{WriterController}, false, func() Payload { return &ExperimentInterrupted{} }},
	TypeExperimentCompleted:     {[]Writer{WriterController}, false, func() Payload { return &ExperimentCompleted{} }},
	TypeExperimentRestored:      {[]Writer{WriterRestorer}, false, func() Payload { return &ExperimentRestored{} }},
	TypeTrialCreated:            {[]Writer{WriterController}, true, func() Payload { return &TrialCreated{} }},
	TypeTrialScheduled:          {[]Writer{WriterController}, true, func() Payload { return &TrialScheduled{} }},
	TypeTrialStarted:            {[]Writer{WriterRunner}, true, func() Payload { return &TrialStarted{} }},
	TypeTrialReported:           {[]Writer{WriterRunner}, true, func() Payload { return &TrialReported{} }},
	TypeTrialCheckpointed:       {[]Writer{WriterRunner}, true, func() Payload { return &TrialCheckpointed{} }},
	TypeTrialFailed:             {[]Writer{WriterRunner, WriterController}, true, func() Payload { return &TrialFailed{} }},
	TypeTrialStopRequested:      {[]Writer{WriterController, WriterClient}, true, func() Payload { return &TrialStopRequested{} }},
	TypeTrialPaused:             {[]Writer{WriterRunner, WriterController}, true, func() Payload { return &TrialPaused{} }},
	TypeTrialDecided:            {[]Writer{WriterController}, true, func() Payload { return &TrialDecided{} }},
	TypeTrialCompleted:          {[]Writer{WriterRunner, WriterController}, true, func() Payload { return &TrialCompleted{} }},
	TypeTrialArtifacts:          {[]Writer{WriterRunner}, true, func() Payload { return &TrialArtifacts{} }},
	TypeTrialReturned:           {[]Writer{WriterRunner}, true, func() Payload { return &TrialReturned{} }},
	TypeCheckpointPersisted:     {[]Writer{WriterSyncer}, true, func() Payload { return &CheckpointPersisted{} }},
	TypeCheckpointDeleted:       {[]Writer{WriterSyncer}, true, func() Payload { return &CheckpointDeleted{} }},
	TypeSyncCompleted:           {[]Writer{WriterSyncer}, false, func() Payload { return &SyncCompleted{} }},
	TypeSyncFailed:              {[]Writer{WriterSyncer}, false, func() Payload { return &SyncFailed{} }},
	TypeDriverAnswered:          {[]Writer{WriterController}, false, func() Payload { return &DriverAnswered{} }},
}

// Types returns every event type of the contract, sorted.
func Types() []string {
	out := make([]string, 0, len(registry))
	for t := range registry {
		out = append(out, t)
	}
	sortStrings(out)
	return out
}

// Writers returns the writers allowed to publish events of type t.
func Writers(t string) []Writer { return append([]Writer(nil), registry[t].writers...) }

// PerTrial reports whether events of type t are about one trial, in which
// case their subject ends with the trial id.
func PerTrial(t string) bool { return registry[t].perTrial }

// NewPayload returns an empty payload for event type t, or nil if t is not
// part of the contract.
func NewPayload(t string) Payload {
	info, ok := registry[t]
	if !ok {
		return nil
	}
	return info.new()
}

// idPattern is what experiment and trial ids may contain: they are subject
// tokens, consumer names and directory names at once. validID checks it
// without the regexp engine (ids are checked on every decode).
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// validID reports whether s matches idPattern.
func validID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// ValidateID reports whether s can be an experiment or trial id. what names
// the id in the error ("experiment name", "trial id").
func ValidateID(what, s string) error {
	if !validID(s) {
		return fmt.Errorf("%w: %s %q: must be 1-128 characters of letters, digits, '_' and '-', starting with a letter or digit", ErrInvalid, what, s)
	}
	return nil
}

// Subject returns the subject on which writer w publishes an event of type t
// about experiment exp (and trial, for per-trial types).
func Subject(exp string, w Writer, t string, trial string) string {
	kindVerb := strings.TrimPrefix(t, TypePrefix)
	s := Prefix + "." + exp + "." + string(w) + "." + kindVerb
	if PerTrial(t) {
		s += "." + trial
	}
	return s
}

// ExperimentSubjects is the filter that matches every event of experiment exp.
func ExperimentSubjects(exp string) string { return Prefix + "." + exp + ".>" }

// WriterSubjects is the filter that matches every event writer w publishes
// for experiment exp ("*" for every experiment).
func WriterSubjects(exp string, w Writer) string {
	return Prefix + "." + exp + "." + string(w) + ".>"
}

// TypeSubjects is the filter that matches events of type t written by w for
// experiment exp ("*" for every experiment); per-trial types match every trial.
func TypeSubjects(exp string, w Writer, t string) string {
	return Subject(exp, w, t, "*")
}

// TrialSubjects is the filter that matches every event written by w about one
// trial.
func TrialSubjects(exp string, w Writer, trial string) string {
	return Prefix + "." + exp + "." + string(w) + ".trial.*." + trial
}

// Address is what a subject says about an event.
type Address struct {
	Experiment string
	Writer     Writer
	Type       string
	Trial      string // empty for experiment-level events
}

// ParseSubject splits a tunejet subject into its parts and checks that the
// writer may publish that type there.
func ParseSubject(subject string) (Address, error) {
	tok := strings.Split(subject, ".")
	if len(tok) < 5 || tok[0] != Prefix {
		return Address{}, fmt.Errorf("%w: subject %q: want %s.<experiment>.<writer>.<kind>.<verb>[.<trial>]", ErrInvalid, subject, Prefix)
	}
	a := Address{Experiment: tok[1], Writer: Writer(tok[2]), Type: TypePrefix + tok[3] + "." + tok[4]}
	info, ok := registry[a.Type]
	if !ok {
		return Address{}, fmt.Errorf("%w: subject %q: unknown event kind %q", ErrInvalid, subject, tok[3]+"."+tok[4])
	}
	want := 5
	if info.perTrial {
		want = 6
	}
	if len(tok) != want {
		return Address{}, fmt.Errorf("%w: subject %q: %s events have %d tokens, got %d", ErrInvalid, subject, a.Type, want, len(tok))
	}
	if info.perTrial {
		a.Trial = tok[5]
		if err := ValidateID("trial id", a.Trial); err != nil {
			return Address{}, fmt.Errorf("subject %q: %w", subject, err)
		}
	}
	if err := ValidateID("experiment name", a.Experiment); err != nil {
		return Address{}, fmt.Errorf("subject %q: %w", subject, err)
	}
	if !writerAllowed(info, a.Writer) {
		return Address{}, fmt.Errorf("%w: subject %q: writer %q may not publish %s", ErrInvalid, subject, a.Writer, a.Type)
	}
	return a, nil
}

func writerAllowed(info typeInfo, w Writer) bool {
	for _, x := range info.writers {
		if x == w {
			return true
		}
	}
	return false
}
