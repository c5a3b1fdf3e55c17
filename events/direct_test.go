package events_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
)

// directCheckpointed is a trial.checkpointed of a checkpoint the runner
// wrote straight to storage.
func directCheckpointed() *events.TrialCheckpointed {
	return &events.TrialCheckpointed{TrialID: "a1b2c_00000", Attempt: 2, Checkpoint: events.CheckpointRef{
		Name: "checkpoint_000003", Index: 3, Location: "train_a1b2c_00000_0_lr=0.1/checkpoint_000003",
		Files: []events.CheckpointFile{{Path: "model.bin", Size: 10, CRC32C: "0a1b2c3d"}, {Path: "opt/state.pt", Size: 5, CRC32C: "ffffffff"}},
		Size:  15, Digest: "crc32c:00c0ffee", Iteration: 4, Metrics: map[string]any{"loss": 0.5},
	}}
}

func TestDirectCheckpointRoundTrips(t *testing.T) {
	ev := events.New("exp", events.WriterRunner, "runner/r1", directCheckpointed())
	m, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := validateData(t, compileSchema(t, events.TypeTrialCheckpointed), m.Data); err != nil {
		t.Fatalf("the schema refuses a checkpoint in storage: %v\n%s", err, m.Data)
	}
	got, err := events.Decode(m.Subject, m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(directCheckpointed(), got.Data); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}

func TestDirectCheckpointValidation(t *testing.T) {
	for name, tt := range map[string]struct {
		edit  func(c *events.CheckpointRef)
		field string
	}{
		"sha256 digest":         {func(c *events.CheckpointRef) { c.Digest = "sha256:" + strings.Repeat("0", 64) }, "checkpoint.digest"},
		"another name":          {func(c *events.CheckpointRef) { c.Location = "trial/checkpoint_000004" }, "checkpoint.location"},
		"no trial folder":       {func(c *events.CheckpointRef) { c.Location = "checkpoint_000003" }, "checkpoint.location"},
		"nested folder":         {func(c *events.CheckpointRef) { c.Location = "a/b/checkpoint_000003" }, "checkpoint.location"},
		"an object too":         {func(c *events.CheckpointRef) { c.Object = "a1b2c_00000/checkpoint_000003/attempt_2" }, "checkpoint.object"},
		"escaping file":         {func(c *events.CheckpointRef) { c.Files[1].Path = "../x" }, "checkpoint.files[1].path"},
		"bad crc":               {func(c *events.CheckpointRef) { c.Files[0].CRC32C = "xyz" }, "checkpoint.files[0].crc32c"},
		"sizes disagree":        {func(c *events.CheckpointRef) { c.Size = 16 }, "checkpoint.size"},
		"manifest of a staging": {func(c *events.CheckpointRef) { c.Location = "" }, "checkpoint.files"},
	} {
		t.Run(name, func(t *testing.T) {
			p := directCheckpointed()
			tt.edit(&p.Checkpoint)
			err := p.Validate()
			if !errors.Is(err, events.ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Validate = %v, want an error about %s", err, tt.field)
			}
		})
	}
	// A manifest too large for the event is left out: the digest alone.
	p := directCheckpointed()
	p.Checkpoint.Files = nil
	if err := p.Validate(); err != nil {
		t.Fatalf("a checkpoint in storage without its manifest inline: %v", err)
	}
}

// An event written before checkpoints could go straight to storage
// decodes as a staged checkpoint.
func TestStagedCheckpointHasNoLocation(t *testing.T) {
	p := &events.TrialCheckpointed{TrialID: "a1b2c_00000", Attempt: 1, Checkpoint: events.CheckpointRef{
		Name: "checkpoint_000000", Index: 0, Object: "a1b2c_00000/checkpoint_000000/attempt_1", Size: 1,
		Digest: "sha256:" + strings.Repeat("ab", 32),
	}}
	m, err := events.Encode(events.New("exp", events.WriterRunner, "runner/r1", p))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(m.Data), "location") || strings.Contains(string(m.Data), "files") {
		t.Errorf("a staged checkpoint's event names a location or files: %s", m.Data)
	}
	got, err := events.Decode(m.Subject, m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Data.(*events.TrialCheckpointed).Checkpoint; c.Location != "" || c.Files != nil {
		t.Errorf("decoded %+v", c)
	}
}
