// Package restore turns a folded experiment into the state a restored run
// starts from, with Ray Tune's resume rules, and moves that state through
// the experiment's Object Store.
//
// # Resume rules
//
// Each trial is classified by status — ERROR by ResumeConfig.Errored,
// TERMINATED by Finished, anything else (PENDING, RUNNING, PAUSED) by
// Unfinished — and then:
//
//   - resume: same trial id and directory, back to PENDING; it resumes
//     from its latest checkpoint. Its failure count is kept, and it gets a
//     fresh max_failures budget for the new run (tunejet's deviation).
//   - restart: replaced by a new trial (new id and directory) with the
//     same config, from scratch.
//   - skip: kept as it is; a trial that had not finished ends TERMINATED,
//     an ERROR trial stays ERROR.
//
// # One fold, two sources
//
// The restorer computes the restored state once (from the log, or from the
// newest snapshot when the log is gone), stages it in the Object Store and
// publishes experiment.restored naming it. state.Fold, given Loader, is
// how every reader of the log applies an event: it loads that state when
// it meets the event, so the controller, the syncer, runners and clients
// agree without storage access.
package restore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"
)

// Resume types (Ray's ResumeType).
const (
	Resume  = "resume"
	Restart = "restart"
	Skip    = "skip"
)

// FromFlags maps Tuner.restore's flags to a ResumeConfig as Ray does:
// resume_errored wins over restart_errored; finished trials are skipped.
func FromFlags(resumeUnfinished, resumeErrored, restartErrored bool) events.ResumeConfig {
	cfg := events.ResumeConfig{Finished: Skip, Unfinished: Skip, Errored: Skip}
	if resumeUnfinished {
		cfg.Unfinished = Resume
	}
	switch {
	case resumeErrored:
		cfg.Errored = Resume
	case restartErrored:
		cfg.Errored = Restart
	}
	return cfg
}

// Restarter builds the new trial that replaces old under "restart".
type Restarter func(old *state.Trial) *state.Trial

// Apply turns st into the state a restored run starts from, in place: the
// resume rules applied to every trial, and the experiment back to PENDING,
// so a controller starts its next run. It returns st. An unknown resume
// type is refused before anything changes. (st is the restorer's own fold
// or snapshot, used for nothing else: copying it first meant encoding and
// decoding the whole state, ~25 MB of JSON at 10,000 trials.)
func Apply(st *state.Experiment, cfg events.ResumeConfig, restart Restarter) (*state.Experiment, error) {
	for _, action := range []string{cfg.Finished, cfg.Unfinished, cfg.Errored} {
		if action != Resume && action != Restart && action != Skip {
			return nil, fmt.Errorf("Unknown resume type: %q", action) //nolint:staticcheck // Ray's message, word for word
		}
	}
	for i, id := range st.Order {
		t := st.Trials[id]
		switch action := actionFor(t.Status, cfg); action {
		case Resume:
			resume(t)
		case Restart:
			nt := restart(t)
			st.TunerRemove(t)
			delete(st.Trials, id)
			st.Trials[nt.ID] = nt
			st.Order[i] = nt.ID
			st.TunerAdd(nt)
		case Skip:
			if !t.Finished() {
				t.Status, t.EndReason = events.StatusTerminated, "not resumed"
				st.TunerRemove(t)
			}
		}
	}
	st.Status, st.StopRequested, st.StopReason, st.EndReason, st.Error = state.ExperimentPending, false, "", "", ""
	st.Recount() // the trials changed outside the fold
	return st, nil
}

func actionFor(status string, cfg events.ResumeConfig) string {
	switch status {
	case events.StatusError:
		return cfg.Errored
	case events.StatusTerminated:
		return cfg.Finished
	}
	return cfg.Unfinished
}

// resume puts a trial back to PENDING, waiting for a new work message; a
// PAUSED one stays paused (and resumes as it would have). A pause decided
// and not yet carried out is requested again.
func resume(t *state.Trial) {
	if t.Status != events.StatusPaused {
		t.Status = events.StatusPending
	}
	t.Scheduled, t.StopRequested, t.StopReason, t.EndReason, t.PauseRequested = false, false, "", "", false
	t.FailuresAtRestore = t.NumFailures
}

// NewTrial is the default Restarter's shape: a fresh trial with the old
// one's search position and config, a new id and directory.
func NewTrial(old *state.Trial, id, trainableName, dirName string) *state.Trial {
	return &state.Trial{
		ID: id, Index: old.Index, Name: trainableName + "_" + id, Tag: old.Tag, DirName: dirName,
		Config: old.Config, Status: events.StatusPending,
	}
}

// The refusals of a restore's trainable. Code to run comes from the
// caller, or from the event log; never from a file in storage.
var (
	// ErrTrainableMismatch: the caller's trainable is another than the
	// experiment's.
	ErrTrainableMismatch = errors.New("another trainable than the experiment's")
	// ErrTrainableRequired: the state was read from a file in storage, and
	// the caller gave no trainable (nor trusted the stored one).
	ErrTrainableRequired = errors.New("the trainable must be given: the state comes from a file in storage")
)

// CheckTrainable refuses another trainable than the experiment's (Ray's
// "Invalid `trainable` input" error, naming both); the error wraps
// ErrTrainableMismatch.
func CheckTrainable(saved, got events.Trainable) error {
	if Identifier(saved) == Identifier(got) {
		return nil
	}
	return &mismatchError{msg: fmt.Sprintf("Invalid `trainable` input to `Tuner.restore()`. To fix this error, pass in the same trainable that was used to initialize the Tuner. Got a trainable with identifier '%s' but expected '%s'.", Identifier(got), Identifier(saved))}
}

// mismatchError is Ray's message, unchanged, matching ErrTrainableMismatch.
type mismatchError struct{ msg string }

func (e *mismatchError) Error() string        { return e.msg }
func (e *mismatchError) Is(target error) bool { return target == ErrTrainableMismatch }

// Identifier is what tells trainables apart: a command trainable's
// command line, else the name.
func Identifier(t events.Trainable) string {
	if len(t.Command) > 0 {
		return strings.Join(t.Command, " ")
	}
	return t.Name
}

// CheckParamSpace refuses a param_space whose flattened keys differ from
// the experiment's (Ray's "Invalid `param_space` input" error).
func CheckParamSpace(saved, got map[string]any) error {
	a, err := search.ParseSpace(saved)
	if err != nil {
		return err
	}
	b, err := search.ParseSpace(got)
	if err != nil {
		return err
	}
	if slices.Equal(a.FlatKeys(), b.FlatKeys()) {
		return nil
	}
	//nolint:staticcheck // Ray's message, word for word
	return fmt.Errorf("Invalid `param_space` input to `Tuner.restore()`. This parameter is only used to re-specify values that cannot be saved, such as object references; it should not be used to introduce new hyperparameters to tune.\n\nGot: %q\nExpected: %q", b.FlatKeys(), a.FlatKeys())
}

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
