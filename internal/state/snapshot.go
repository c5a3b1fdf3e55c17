package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// SchemaVersion is the version of the snapshot format this code writes and
// reads.
const SchemaVersion = 1

// ErrCorrupt is wrapped by every error about an unreadable snapshot.
var ErrCorrupt = errors.New("corrupt experiment state")

// snapshotFile is the JSON form: the state plus what makes it checkable.
type snapshotFile struct {
	Format        string          `json:"format"`
	SchemaVersion int             `json:"schema_version"`
	Experiment    string          `json:"experiment"`
	Seq           uint64          `json:"stream_seq"`
	Checksum      string          `json:"checksum"`
	State         json.RawMessage `json:"state"`
}

const snapshotFormat = "tunejet.experiment_state"

// Snapshot encodes the state as versioned JSON with a SHA-256 checksum of
// the state and the stream sequence it reflects.
func (e *Experiment) Snapshot() ([]byte, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("snapshot experiment %q: %w", e.Name, err)
	}
	sum := sha256.Sum256(body)
	f := snapshotFile{
		Format: snapshotFormat, SchemaVersion: SchemaVersion, Experiment: e.Name,
		Seq: e.LastSeq, Checksum: "sha256:" + hex.EncodeToString(sum[:]), State: body,
	}
	out, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("snapshot experiment %q: %w", e.Name, err)
	}
	return append(out, '\n'), nil
}

// Load reads a snapshot. It checks the format, the schema version and the
// checksum, and names what is wrong; nothing in the file is executed.
func Load(data []byte) (*Experiment, error) {
	var f snapshotFile
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: not valid JSON: %w", ErrCorrupt, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the snapshot's JSON object (at byte %d): two files run together, or a partial overwrite", ErrCorrupt, dec.InputOffset())
	}
	if f.Format != snapshotFormat {
		return nil, fmt.Errorf("%w: field \"format\" is %q, want %q", ErrCorrupt, f.Format, snapshotFormat)
	}
	if f.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("%w: schema_version %d is not supported (this build reads %d)", ErrCorrupt, f.SchemaVersion, SchemaVersion)
	}
	sum := sha256.Sum256(f.State)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != f.Checksum {
		return nil, fmt.Errorf("%w: checksum mismatch (file says %s, content is %s): the file was truncated or edited", ErrCorrupt, f.Checksum, got)
	}
	e := New(f.Experiment)
	if err := json.Unmarshal(f.State, e); err != nil {
		return nil, fmt.Errorf("%w: field \"state\": %w", ErrCorrupt, err)
	}
	if e.Name != f.Experiment || e.LastSeq != f.Seq {
		return nil, fmt.Errorf("%w: state says experiment %q at seq %d, header says %q at seq %d", ErrCorrupt, e.Name, e.LastSeq, f.Experiment, f.Seq)
	}
	if e.Trials == nil {
		e.Trials = map[string]*Trial{}
	}
	if err := e.checkTrials(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err := e.JudgeErr(); err != nil {
		return nil, fmt.Errorf("%w: field \"tuner\": %w", ErrCorrupt, err)
	}
	e.Recount()
	return e, nil
}

// checkTrials checks what the fold guarantees and the services rely on:
// "order" lists each trial of "trials" once, each under its own id, and
// no trial or metric is null.
func (e *Experiment) checkTrials() error {
	listed := make(map[string]bool, len(e.Order))
	for _, id := range e.Order {
		if listed[id] {
			return fmt.Errorf("trial %q is listed twice in \"order\"", id)
		}
		listed[id] = true
		if e.Trials[id] == nil {
			return fmt.Errorf("trial %q is listed in \"order\" but missing from \"trials\"", id)
		}
	}
	for id, t := range e.Trials {
		if !listed[id] {
			return fmt.Errorf("trial %q is in \"trials\" but not listed in \"order\"", id)
		}
		if t.ID != id {
			return fmt.Errorf("trial %q has trial_id %q", id, t.ID)
		}
		for name, m := range t.Metrics {
			if m == nil {
				return fmt.Errorf("trial %q: metric_analysis %q is null", id, name)
			}
		}
	}
	return nil
}
