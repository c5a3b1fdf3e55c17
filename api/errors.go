package api

import "errors"

// Code classifies a refused request on the wire (RestoreReply.Code).
type Code string

// The codes of a refused restore or can_restore.
const (
	// CodeBadRequest: the request is malformed — not JSON of a
	// RestoreRequest, a path that does not end in an experiment's
	// directory, an unknown resume type, a param space that does not parse.
	CodeBadRequest Code = "bad_request"
	// CodeNoState: there is nothing to restore at the path: the event log
	// does not hold the experiment and storage holds no
	// experiment_state-*.json.
	CodeNoState Code = "no_state"
	// CodeTrainableRequired: the state comes from a file in storage and
	// the request names no trainable, nor trusts the stored one.
	CodeTrainableRequired Code = "trainable_required"
	// CodeTrainableDiffers: the request's trainable is another than the
	// experiment's.
	CodeTrainableDiffers Code = "trainable_mismatch"
	// CodeParamSpaceDiffers: the request re-specifies a param space whose
	// keys are not the experiment's.
	CodeParamSpaceDiffers Code = "param_space_differs"
	// CodeStateInvalid: the stored state cannot be restored as it is: it
	// does not decode, holds no experiment spec, or names a trial folder
	// or checkpoint like a path (it was edited).
	CodeStateInvalid Code = "state_invalid"
	// CodeCheckpointLost: a trial that would run again has lost its latest
	// checkpoint: gone from the Object Store and not readable from storage.
	CodeCheckpointLost Code = "checkpoint_lost"
	// CodeRunning: the experiment is running: the log holds no interruption
	// or end of its run, and a live controller leads it (renews its lease).
	// Stop it, or let it end, then restore.
	CodeRunning Code = "running"
	// CodeOwned: another deployment owns the experiment's storage folder
	// and is not gone: it renews its claim, or is an embedded store on this
	// host that a server still runs. Restore it there, or wait until the
	// owner is stale.
	CodeOwned Code = "owned"
	// CodeInternal: the service failed (NATS, storage, a timeout); asking
	// again may succeed.
	CodeInternal Code = "internal"
)

// The errors a code stands for: errors.Is matches an error of a reply
// against them.
var (
	ErrBadRequest        = errors.New("bad request")
	ErrNoState           = errors.New("no state to restore")
	ErrTrainableRequired = errors.New("the trainable must be given: the state comes from a file in storage")
	ErrTrainableDiffers  = errors.New("another trainable than the experiment's")
	ErrParamSpaceDiffers = errors.New("param space differs")
	ErrStateInvalid      = errors.New("invalid stored state")
	ErrCheckpointLost    = errors.New("latest checkpoint lost")
	ErrRunning           = errors.New("the experiment is running")
	ErrOwned             = errors.New("the storage folder is owned by another deployment")
	ErrInternal          = errors.New("internal error")
)

// codes pairs each code with its sentinel, in the order CodeOf tries them.
var codes = []struct {
	code Code
	err  error
}{
	{CodeBadRequest, ErrBadRequest},
	{CodeNoState, ErrNoState},
	{CodeTrainableRequired, ErrTrainableRequired},
	{CodeTrainableDiffers, ErrTrainableDiffers},
	{CodeParamSpaceDiffers, ErrParamSpaceDiffers},
	{CodeStateInvalid, ErrStateInvalid},
	{CodeCheckpointLost, ErrCheckpointLost},
	{CodeRunning, ErrRunning},
	{CodeOwned, ErrOwned},
	{CodeInternal, ErrInternal},
}

// Codes lists every code.
func Codes() []Code {
	out := make([]Code, len(codes))
	for i, c := range codes {
		out[i] = c.code
	}
	return out
}

// Err is the sentinel error of c, or nil for a code this version does not
// know.
func (c Code) Err() error {
	for _, k := range codes {
		if k.code == c {
			return k.err
		}
	}
	return nil
}

// Error is an error that crossed the wire: the service's message, matching
// the sentinel of its code.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is matches the sentinel of e's code.
func (e *Error) Is(target error) bool { return target != nil && target == e.Code.Err() }

// coded is an error a service classified: err's message, matching both
// err and the code's sentinel.
type coded struct {
	code Code
	err  error
}

func (e *coded) Error() string   { return e.err.Error() }
func (e *coded) Unwrap() []error { return []error{e.err, e.code.Err()} }

// WithCode classifies err as code, keeping its message; nil stays nil.
func WithCode(code Code, err error) error {
	if err == nil {
		return nil
	}
	return &coded{code: code, err: err}
}

// CodeOf is the code of err: the first code whose sentinel err matches,
// CodeInternal when none does, "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return CodeInternal
}
