package events_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/events/schema"
	"github.com/tunejet/tunejet/internal/schematest"
)

// compileSchema compiles the schema of event type typ (which also checks it
// against the draft 2020-12 meta-schema).
func compileSchema(t *testing.T, typ string) *jsonschema.Schema {
	t.Helper()
	doc := readSchemaDoc(t, typ)
	url := "https://tunejet.invalid/events/schema/" + typ + ".json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	return sch
}

func readSchemaDoc(t *testing.T, typ string) any {
	t.Helper()
	b, err := schema.FS.ReadFile(typ + ".json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s.json: %v", typ, err)
	}
	return doc
}

func validateData(t *testing.T, sch *jsonschema.Schema, data []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(v)
}

// TestSchemasAcceptGolden: the data of every golden message validates
// against its type's schema.
func TestSchemasAcceptGolden(t *testing.T) {
	for _, typ := range events.Types() {
		t.Run(typ, func(t *testing.T) {
			sch := compileSchema(t, typ)
			if err := validateData(t, sch, readGolden(t, typ).Data); err != nil {
				t.Errorf("golden data does not validate:\n%v", err)
			}
		})
	}
}

// TestSchemasAcceptVariants: every other valid event validates too.
func TestSchemasAcceptVariants(t *testing.T) {
	for _, e := range variants() {
		m, err := events.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := validateData(t, compileSchema(t, e.Type()), m.Data); err != nil {
			t.Errorf("%s: %s does not validate:\n%v", e.Type(), m.Data, err)
		}
	}
}

// TestSchemasRejectWhatDecodeRejects: a payload that events.Decode refuses
// for a bad field is refused by the schema as well.
func TestSchemasRejectWhatDecodeRejects(t *testing.T) {
	tests := []struct {
		typ  string
		edit func(map[string]any)
	}{
		{events.TypeTrialReported, set("attempt", "2")},
		{events.TypeTrialReported, set("attempt", 0)},
		{events.TypeTrialReported, del("result")},
		{events.TypeTrialReported, del("result.training_iteration")},
		{events.TypeTrialReported, set("result.training_iteration", 2.5)},
		{events.TypeTrialReported, set("result.training_iteration", 0)},
		{events.TypeTrialReported, set("trial_id", "bad id")},
		{events.TypeTrialStarted, set("attempt", 0)},
		{events.TypeTrialStarted, set("runner", "")},
		{events.TypeTrialCheckpointed, set("checkpoint.digest", "sha256:XYZ")},
		{events.TypeTrialCheckpointed, set("checkpoint.name", "checkpoint_7")},
		{events.TypeTrialCheckpointed, set("checkpoint.size", -1)},
		{events.TypeCheckpointPersisted, set("digest", "md5:9e107d9d372bb6826bd81d3542a419d6")},
		{events.TypeCheckpointPersisted, set("path", "")},
		{events.TypeCheckpointDeleted, set("name", "ckpt")},
		{events.TypeTrialCompleted, set("status", "DONE")},
		{events.TypeTrialCompleted, set("attempt", -1)},
		{events.TypeTrialCompleted, set("reason", "")},
		{events.TypeTrialFailed, set("cause", "oom")},
		{events.TypeTrialFailed, set("attempt", 1.5)},
		{events.TypeTrialStopRequested, set("reason", "")},
		{events.TypeTrialPaused, set("reason", "")},
		{events.TypeTrialPaused, set("attempt", -1.0)},
		{events.TypeTrialReturned, set("attempt", 0)},
		{events.TypeTrialReturned, set("work_seq", -1)},
		{events.TypeTrialReturned, set("runner", "")},
		{events.TypeTrialReturned, set("reason", "")},
		{events.TypeTrialCreated, set("dir_name", "../../etc")},
		{events.TypeTrialCreated, set("dir_name", "..")},
		{events.TypeTrialCreated, set("dir_name", `a\b`)},
		{events.TypeTrialCreated, set("dir_name", "")},
		{events.TypeTrialCreated, set("config", nil)},
		{events.TypeTrialCreated, set("index", -1)},
		{events.TypeTrialScheduled, set("heartbeat_timeout_s", 0)},
		{events.TypeTrialScheduled, set("max_failures", -2)},
		{events.TypeTrialScheduled, set("trainable", map[string]any{})},
		{events.TypeTrialScheduled, set("trainable", map[string]any{"command": []any{"", "x"}})},
		{events.TypeTrialScheduled, set("checkpoint.digest", "")},
		{events.TypeExperimentSubmitted, set("spec.run_config.failure_config.fail_fast", "yes")},
		{events.TypeExperimentSubmitted, set("spec.run_config.failure_config.fail_fast", 1)},
		{events.TypeExperimentSubmitted, set("spec.tune_config.mode", "avg")},
		{events.TypeExperimentSubmitted, set("spec.tune_config.num_samples", 0)},
		{events.TypeExperimentSubmitted, set("spec.tune_config.max_concurrent_trials", -1)},
		{events.TypeExperimentSubmitted, set("spec.run_config.failure_config.max_failures", -2)},
		{events.TypeExperimentSubmitted, set("spec.name", "my experiment")},
		{events.TypeExperimentSubmitted, set("spec.trainable", map[string]any{"name": ""})},
		{events.TypeExperimentStarted, set("session", "yesterday")},
		{events.TypeExperimentStarted, set("trial_id_prefix", "3F9A2")},
		{events.TypeExperimentStarted, set("run", 0)},
		{events.TypeExperimentStarted, set("num_trials", -2)},
		{events.TypeExperimentStarted, set("storage_path", "")},
		{events.TypeExperimentCompleted, set("reason", "")},
		{events.TypeExperimentRestored, set("mirror.syncer.sync_up", "")},
		{events.TypeExperimentRestored, set("resume.errored", "retry")},
		{events.TypeExperimentRestored, set("source", "backup")},
		{events.TypeSyncCompleted, set("files", -1)},
		{events.TypeSyncCompleted, set("bytes", -1)},
		{events.TypeSyncCompleted, set("seq", -1)},
		{events.TypeSyncFailed, set("error", "")},
		{events.TypeSyncFailed, set("operation", "")},
	}
	for _, tt := range tests {
		m := edit(t, encoded(t, tt.typ), tt.edit)
		if _, err := events.Decode(m.Subject, m.Header, m.Data); err == nil {
			t.Errorf("%s %s: Decode accepted it; the case is wrong", tt.typ, m.Data)
		}
		if err := validateData(t, compileSchema(t, tt.typ), m.Data); err == nil {
			t.Errorf("%s: schema accepts %s, which Decode rejects", tt.typ, m.Data)
		}
	}
}

// TestSchemasDescribeStructs walks each payload struct with reflection next
// to its schema: every json field is a property of the right JSON type, the
// schema has no property the struct lacks, and "required" lists exactly the
// fields without omitempty (those tunejet always writes).
func TestSchemasDescribeStructs(t *testing.T) {
	for _, typ := range events.Types() {
		root := readSchemaDoc(t, typ).(map[string]any)
		schematest.CheckType(t, typ, root, reflect.TypeOf(events.NewPayload(typ)))
	}
}

// TestSchemaDefsAgree: the files are self-contained, so shared definitions
// (CheckpointRef, Trainable, ...) are repeated; the copies must be equal.
func TestSchemaDefsAgree(t *testing.T) {
	first := map[string]any{}
	from := map[string]string{}
	for _, typ := range events.Types() {
		defs, _ := readSchemaDoc(t, typ).(map[string]any)["$defs"].(map[string]any)
		for name, def := range defs {
			if prev, ok := first[name]; ok {
				if diff := cmp.Diff(prev, def); diff != "" {
					t.Errorf("$defs/%s differs between %s and %s:\n%s", name, from[name], typ, diff)
				}
				continue
			}
			first[name], from[name] = def, typ
		}
	}
}

// TestSchemaTitles: each file names its type and declares draft 2020-12.
func TestSchemaTitles(t *testing.T) {
	for _, typ := range events.Types() {
		doc := readSchemaDoc(t, typ).(map[string]any)
		if doc["title"] != typ {
			t.Errorf("%s.json: title %v", typ, doc["title"])
		}
		if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s.json: $schema %v", typ, doc["$schema"])
		}
		if doc["additionalProperties"] != nil {
			t.Errorf("%s.json: additionalProperties must stay open so the contract can grow", typ)
		}
	}
}
