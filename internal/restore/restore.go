// Package restore turns a folded experiment into the state a restored run
// starts from, with Ray Tune's resume rules, and checks what a restore is
// given (trainable, param space, object references). It is pure: the
// restored state goes through the Object Store in internal/restore/restorestate.
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
package restore

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"

	"github.com/tunejet/tunejet/internal/settings"
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
			st.JudgeRemove(t)
			delete(st.Trials, id)
			st.Trials[nt.ID] = nt
			st.Order[i] = nt.ID
			st.JudgeAdd(nt)
		case Skip:
			if !t.Finished() {
				t.Status, t.EndReason = events.StatusTerminated, "not resumed"
				st.JudgeRemove(t)
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
	t.RunnerSeq = 0 // the restored run may be on another log: its first attempt reads the history
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
		return settings.Prefix("param_space", err)
	}
	b, err := search.ParseSpace(got)
	if err != nil {
		return settings.Prefix("param_space", err)
	}
	if slices.Equal(a.FlatKeys(), b.FlatKeys()) {
		return nil
	}
	//nolint:staticcheck // Ray's message, word for word
	return fmt.Errorf("Invalid `param_space` input to `Tuner.restore()`. This parameter is only used to re-specify values that cannot be saved, such as object references; it should not be used to introduce new hyperparameters to tune.\n\nGot: %q\nExpected: %q", b.FlatKeys(), a.FlatKeys())
}
