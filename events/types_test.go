package events_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
)

var allWriters = []events.Writer{
	events.WriterClient, events.WriterController, events.WriterRunner, events.WriterSyncer, events.WriterRestorer,
}

func TestRegistry(t *testing.T) {
	types := events.Types()
	if len(types) != 23 {
		t.Errorf("%d types, want 23: %v", len(types), types)
	}
	if !slices.IsSorted(types) {
		t.Errorf("Types() is not sorted: %v", types)
	}
	for _, typ := range types {
		if !strings.HasPrefix(typ, events.TypePrefix) {
			t.Errorf("%s: want prefix %s", typ, events.TypePrefix)
		}
		p := events.NewPayload(typ)
		if p == nil || p.Type() != typ {
			t.Errorf("NewPayload(%s) = %#v", typ, p)
		}
		if len(events.Writers(typ)) == 0 {
			t.Errorf("%s: no writer", typ)
		}
		if got, want := events.PerTrial(typ), strings.Contains(typ, ".trial.") || strings.Contains(typ, ".checkpoint."); got != want {
			t.Errorf("PerTrial(%s) = %v", typ, got)
		}
	}
	if p := events.NewPayload("io.tunejet.trial.exploded"); p != nil {
		t.Errorf("NewPayload of an unknown type = %#v, want nil", p)
	}
	if w := events.Writers("io.tunejet.trial.exploded"); len(w) != 0 {
		t.Errorf("Writers of an unknown type = %v", w)
	}
	// Writers returns a copy.
	w := events.Writers(events.TypeTrialFailed)
	w[0] = "x"
	if events.Writers(events.TypeTrialFailed)[0] == "x" {
		t.Error("Writers exposes the registry")
	}
}

func TestWriters(t *testing.T) {
	want := map[string][]events.Writer{
		events.TypeExperimentSubmitted:     {events.WriterClient},
		events.TypeExperimentStarted:       {events.WriterController},
		events.TypeExperimentStopRequested: {events.WriterClient},
		events.TypeExperimentInterrupted:   {events.WriterController},
		events.TypeExperimentCompleted:     {events.WriterController},
		events.TypeExperimentRestored:      {events.WriterRestorer},
		events.TypeTrialCreated:            {events.WriterController},
		events.TypeTrialScheduled:          {events.WriterController},
		events.TypeTrialStarted:            {events.WriterRunner},
		events.TypeTrialReported:           {events.WriterRunner},
		events.TypeTrialCheckpointed:       {events.WriterRunner},
		events.TypeTrialFailed:             {events.WriterRunner, events.WriterController},
		events.TypeTrialStopRequested:      {events.WriterController, events.WriterClient},
		events.TypeTrialPaused:             {events.WriterRunner, events.WriterController},
		events.TypeTrialDecided:            {events.WriterController},
		events.TypeDriverAnswered:          {events.WriterController},
		events.TypeTrialCompleted:          {events.WriterRunner, events.WriterController},
		events.TypeTrialArtifacts:          {events.WriterRunner},
		events.TypeTrialReturned:           {events.WriterRunner},
		events.TypeCheckpointPersisted:     {events.WriterSyncer},
		events.TypeCheckpointDeleted:       {events.WriterSyncer},
		events.TypeSyncCompleted:           {events.WriterSyncer},
		events.TypeSyncFailed:              {events.WriterSyncer},
	}
	got := map[string][]events.Writer{}
	for _, typ := range events.Types() {
		got[typ] = events.Writers(typ)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("writers (-want +got):\n%s", diff)
	}
}

func TestSubject(t *testing.T) {
	tests := []struct {
		w     events.Writer
		typ   string
		trial string
		want  string
	}{
		{events.WriterClient, events.TypeExperimentSubmitted, "", "tunejet.mnist_tune.client.experiment.submitted"},
		{events.WriterController, events.TypeExperimentStarted, "", "tunejet.mnist_tune.controller.experiment.started"},
		{events.WriterClient, events.TypeExperimentStopRequested, "", "tunejet.mnist_tune.client.experiment.stop_requested"},
		{events.WriterController, events.TypeTrialCreated, "3f9a2_00001", "tunejet.mnist_tune.controller.trial.created.3f9a2_00001"},
		{events.WriterRunner, events.TypeTrialReported, "3f9a2_00001", "tunejet.mnist_tune.runner.trial.reported.3f9a2_00001"},
		{events.WriterController, events.TypeTrialFailed, "3f9a2_00001", "tunejet.mnist_tune.controller.trial.failed.3f9a2_00001"},
		{events.WriterSyncer, events.TypeCheckpointPersisted, "3f9a2_00001", "tunejet.mnist_tune.syncer.checkpoint.persisted.3f9a2_00001"},
		{events.WriterSyncer, events.TypeSyncCompleted, "", "tunejet.mnist_tune.syncer.sync.completed"},
		{events.WriterRestorer, events.TypeExperimentRestored, "", "tunejet.mnist_tune.restorer.experiment.restored"},
	}
	for _, tt := range tests {
		if got := events.Subject(fxExperiment, tt.w, tt.typ, tt.trial); got != tt.want {
			t.Errorf("Subject(%s, %s, %q) = %q, want %q", tt.w, tt.typ, tt.trial, got, tt.want)
		}
		addr, err := events.ParseSubject(tt.want)
		if err != nil {
			t.Errorf("ParseSubject(%q): %v", tt.want, err)
			continue
		}
		want := events.Address{Experiment: fxExperiment, Writer: tt.w, Type: tt.typ, Trial: tt.trial}
		if addr != want {
			t.Errorf("ParseSubject(%q) = %+v, want %+v", tt.want, addr, want)
		}
	}
}

// TestSubjectRoundTrip: for every type and every allowed writer, Subject and
// ParseSubject are inverse, and every other writer is refused.
func TestSubjectRoundTrip(t *testing.T) {
	for _, typ := range events.Types() {
		trial := ""
		if events.PerTrial(typ) {
			trial = fxTrial
		}
		for _, w := range allWriters {
			s := events.Subject(fxExperiment, w, typ, trial)
			addr, err := events.ParseSubject(s)
			if !slices.Contains(events.Writers(typ), w) {
				checkInvalid(t, err, "may not publish")
				continue
			}
			if err != nil {
				t.Errorf("ParseSubject(%q): %v", s, err)
				continue
			}
			if want := (events.Address{Experiment: fxExperiment, Writer: w, Type: typ, Trial: trial}); addr != want {
				t.Errorf("ParseSubject(%q) = %+v, want %+v", s, addr, want)
			}
		}
	}
}

func TestParseSubjectErrors(t *testing.T) {
	tests := []struct {
		subject string
		want    string
	}{
		{"", "want tunejet.<experiment>"},
		{"tunejet", "want tunejet.<experiment>"},
		{"tunejet.mnist_tune.runner.trial", "want tunejet.<experiment>"},
		{"nats.mnist_tune.runner.trial.reported.t1", "want tunejet.<experiment>"},
		{"tunejet.mnist_tune.runner.trial.exploded.t1", `unknown event kind "trial.exploded"`},
		{"tunejet.mnist_tune.runner.trial.*.t1", `unknown event kind "trial.*"`},
		{"tunejet.mnist_tune.runner.trial.reported", "have 6 tokens, got 5"},
		{"tunejet.mnist_tune.runner.trial.reported.t1.x", "have 6 tokens, got 7"},
		{"tunejet.mnist_tune.syncer.sync.completed.t1", "have 5 tokens, got 6"},
		{"tunejet.mnist_tune.runner.trial.reported.*", `trial id "*"`},
		{"tunejet.mnist_tune.runner.trial.reported.-t1", `trial id "-t1"`},
		{"tunejet.*.runner.trial.reported.t1", `experiment name "*"`},
		{"tunejet..runner.trial.reported.t1", `experiment name ""`},
		{"tunejet.mnist_tune.runner.trial.created.t1", `writer "runner" may not publish io.tunejet.trial.created`},
		{"tunejet.mnist_tune.syncer.trial.completed.t1", `writer "syncer" may not publish io.tunejet.trial.completed`},
		{"tunejet.mnist_tune.Runner.trial.reported.t1", `writer "Runner" may not publish`},
	}
	for _, tt := range tests {
		t.Run(tt.subject, func(t *testing.T) {
			_, err := events.ParseSubject(tt.subject)
			checkInvalid(t, err, tt.want)
		})
	}
}

// TestSubjectFilters: the filters match what they promise, and each writer's
// subjects are disjoint from every other writer's (so each writer can be
// fenced on its own subjects).
func TestSubjectFilters(t *testing.T) {
	if got, want := events.ExperimentSubjects("e1"), "tunejet.e1.>"; got != want {
		t.Errorf("ExperimentSubjects = %q, want %q", got, want)
	}
	if got, want := events.WriterSubjects("*", events.WriterRunner), "tunejet.*.runner.>"; got != want {
		t.Errorf("WriterSubjects = %q, want %q", got, want)
	}
	if got, want := events.TypeSubjects("e1", events.WriterController, events.TypeTrialScheduled), "tunejet.e1.controller.trial.scheduled.*"; got != want {
		t.Errorf("TypeSubjects = %q, want %q", got, want)
	}
	if got, want := events.TypeSubjects("*", events.WriterSyncer, events.TypeSyncCompleted), "tunejet.*.syncer.sync.completed"; got != want {
		t.Errorf("TypeSubjects = %q, want %q", got, want)
	}
	if got, want := events.TrialSubjects("e1", events.WriterRunner, "t1"), "tunejet.e1.runner.trial.*.t1"; got != want {
		t.Errorf("TrialSubjects = %q, want %q", got, want)
	}
	for _, e := range allValid() {
		s := e.Subject()
		if !matches(events.ExperimentSubjects(e.Experiment), s) || !matches(events.ExperimentSubjects("*"), s) {
			t.Errorf("%s: not matched by ExperimentSubjects", s)
		}
		if !matches(events.TypeSubjects("*", e.Writer, e.Type()), s) {
			t.Errorf("%s: not matched by TypeSubjects", s)
		}
		if e.Trial() != "" && !strings.HasPrefix(e.Type(), "io.tunejet.checkpoint.") &&
			!matches(events.TrialSubjects(e.Experiment, e.Writer, e.Trial()), s) {
			t.Errorf("%s: not matched by TrialSubjects", s)
		}
		for _, w := range allWriters {
			if got, want := matches(events.WriterSubjects(e.Experiment, w), s), w == e.Writer; got != want {
				t.Errorf("%s: WriterSubjects(%s) matches = %v", s, w, got)
			}
		}
	}
}

// matches implements NATS subject matching with * and >.
func matches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}

func TestValidateID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"7", true},
		{"mnist_tune", true},
		{"3f9a2_00001", true},
		{"My-Experiment_2", true},
		{strings.Repeat("x", 128), true},
		{"", false},
		{strings.Repeat("x", 129), false},
		{"-a", false},
		{"_a", false},
		{"a.b", false},
		{"a b", false},
		{"a/b", false},
		{"*", false},
		{">", false},
		{"a\x00", false},
		{"büro", false},
	}
	for _, tt := range tests {
		err := events.ValidateID("trial id", tt.id)
		if tt.ok {
			if err != nil {
				t.Errorf("ValidateID(%q): %v", tt.id, err)
			}
			continue
		}
		checkInvalid(t, err, "trial id "+strconv.Quote(tt.id))
	}
}
