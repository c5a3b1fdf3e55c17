// Package restorestate moves a restored experiment's state through the
// experiment's Object Store, and checks a stored snapshot against the log
// a restore reads. The resume rules that compute that state are pure, in
// internal/restore.
//
// # One fold, two sources
//
// The restorer computes the restored state once (from the log, or from the
// newest snapshot when the log is gone), stages it in the Object Store and
// publishes experiment.restored naming it. state.Fold, given Loader, is
// how every reader of the log applies an event: it loads that state when
// it meets the event, so the controller, the syncer, runners and clients
// agree without storage access.
package restorestate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/state"
)

// objectPrefix names restored states in the Object Store.
const objectPrefix = "restored/"

// Stage stores a restored state in the experiment's Object Store and
// returns its object name and digest.
func Stage(ctx context.Context, stores ckpt.Opener, st *state.Experiment, run int) (object, digest string, err error) {
	obs, err := stores.Checkpoints(ctx, st.Name)
	if err != nil {
		return "", "", err
	}
	data, err := st.Snapshot()
	if err != nil {
		return "", "", err
	}
	// Named by its content too: a restore killed before its run started
	// leaves an event naming its state, and the next restore of the same
	// run must not replace that state (readers of the log would then meet
	// an event whose state is gone).
	sum := sha256.Sum256(data)
	digest = hex.EncodeToString(sum[:])
	object = fmt.Sprintf("%srun-%d-%s", objectPrefix, run, digest[:16])
	if _, err := obs.PutBytes(ctx, object, data); err != nil {
		return "", "", fmt.Errorf("stage the restored state of %s: %w", st.Name, err)
	}
	return object, "sha256:" + digest, nil
}

// ErrStateGone is wrapped when the restored state an event names cannot be
// read.
var ErrStateGone = errors.New("restored state missing")

// Load reads the restored state an experiment.restored event names.
func Load(ctx context.Context, stores ckpt.Opener, exp string, r *events.ExperimentRestored) (*state.Experiment, error) {
	data, err := staged(ctx, stores, exp, r)
	if err != nil {
		return nil, err
	}
	st, err := state.Load(data)
	if err != nil {
		return nil, fmt.Errorf("%s of %s: %w", r.Object, exp, err)
	}
	return st, nil
}

// Loader is the state.Loader of experiment exp: it reads the restored
// state an experiment.restored event names from the experiment's Object
// Store.
func Loader(stores ckpt.Opener, exp string) state.Loader {
	return func(ctx context.Context, r *events.ExperimentRestored) (*state.Experiment, error) {
		return Load(ctx, stores, exp, r)
	}
}

// staged reads the bytes of the restored state an experiment.restored
// event names, checked against its digest.
func staged(ctx context.Context, stores ckpt.Opener, exp string, r *events.ExperimentRestored) ([]byte, error) {
	obs, err := stores.Checkpoints(ctx, exp)
	if err != nil {
		return nil, err
	}
	data, err := obs.GetBytes(ctx, r.Object)
	if err != nil {
		return nil, fmt.Errorf("%w: %s of %s: %w", ErrStateGone, r.Object, exp, err)
	}
	sum := sha256.Sum256(data)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != r.Digest {
		return nil, fmt.Errorf("%w: %s of %s: digest %s, the event says %s", ErrStateGone, r.Object, exp, got, r.Digest)
	}
	return data, nil
}

// LoadSpec reads only the experiment spec of the restored state an
// experiment.restored event names (the digest still covers all of it):
// the spec comes first, so the trials, most of the state, are not
// decoded.
func LoadSpec(ctx context.Context, stores ckpt.Opener, exp string, r *events.ExperimentRestored) (*events.ExperimentSpec, error) {
	data, err := staged(ctx, stores, exp, r)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var spec *events.ExperimentSpec
	err = field(dec, "state", func() error {
		return field(dec, "spec", func() error { return dec.Decode(&spec) })
	})
	if err == nil && spec == nil {
		err = errors.New("no spec")
	}
	if err != nil {
		return nil, fmt.Errorf("%s of %s: %w", r.Object, exp, err)
	}
	return spec, nil
}

// field reads the JSON object dec is at up to the value of key, and calls
// value to decode it; it stops there.
func field(dec *json.Decoder, key string, value func() error) error {
	if tok, err := dec.Token(); err != nil {
		return err
	} else if tok != json.Delim('{') {
		return fmt.Errorf("want an object, got %v", tok)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if tok == key {
			return value()
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return fmt.Errorf("no field %q", key)
}

// EventLog is the part of the event log OfThisLog reads (bus.Bus).
type EventLog interface {
	// EventIs reports whether the log holds, at seq, experiment exp's
	// event with id.
	EventIs(ctx context.Context, exp string, seq uint64, id string) (bool, error)
}

// OfThisLog says why a stored snapshot st of experiment name is not of
// the log at hand, whose last event of the experiment is at last; "" when
// it is: the log holds, at the snapshot's sequence, the event it folded
// last. A new log after a lost one reuses sequences, so the sequence alone
// says nothing.
func OfThisLog(ctx context.Context, log EventLog, st *state.Experiment, name string, last uint64) (string, error) {
	if st.Name != name {
		return fmt.Sprintf("it is of experiment %q", st.Name), nil
	}
	if st.LastSeq > last {
		return fmt.Sprintf("it reflects sequence %d, beyond the log's last event %d: it is of another log", st.LastSeq, last), nil
	}
	ok, err := log.EventIs(ctx, name, st.LastSeq, st.LastEventID)
	if err != nil {
		return "", fmt.Errorf("check the snapshot against the log: %w", err)
	}
	if !ok {
		return fmt.Sprintf("it is of another log: the log does not hold its last event %q at sequence %d", st.LastEventID, st.LastSeq), nil
	}
	return "", nil
}
