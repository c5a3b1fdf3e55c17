// Package api is the contract of tunejet's request/reply endpoints: the
// subjects, the JSON a client sends and the service answers, and the error
// codes that cross the wire. The services and the Go API (package tune)
// share it; clients in other languages read the JSON Schemas in
// api/schema and docs/api.md.
//
// # Overview
//
// The restorer answers two subjects with the micro service
// "tunejet-restorer":
//
//   - RestoreSubject (tunejet.api.restore): restore an experiment, given a
//     RestoreRequest; the RestoreReply says how, or why not.
//   - CanRestoreSubject (tunejet.api.can_restore): the same request, only
//     read: whether the experiment can be restored, from where, and with
//     which trainable.
//
// An external searcher (search_alg external) is the other way round: a
// service anyone may write, which the controller asks for each new
// trial's config with a SuggestRequest on the subject the experiment
// names, and which answers a SuggestReply.
//
// # Errors
//
// A refused request is a reply with OK false, a human message in Error and
// a machine code in Code (one of the Code* constants). RestoreReply.Err
// turns them back into an error that errors.Is matches against the
// sentinel of its code (ErrNoState, ErrTrainableDiffers, ...), keeping the
// service's message. A service classifies its errors with WithCode, and
// CodeOf reads the code back; an error nothing classified is CodeInternal.
//
// Codes are stable: a new refusal gets a new code, and a client that does
// not know a code still has the message and OK false.
package api
