// Package restorer is the service that brings an interrupted experiment
// back.
//
// # Overview
//
// A restore request names an experiment directory (a storage path or URL
// ending in the experiment's name) and Ray's resume flags. The restorer
// reads the experiment's state from the JetStream log when the log still
// holds it (exact), or from the newest experiment_state-*.json in storage
// otherwise (losing at most what happened after that snapshot); decides
// what the restored run runs and validates any re-specified param_space
// against it; applies the
// resume rules (internal/restore); brings each resumed trial's latest
// checkpoint back into the Object Store from storage when the store lost
// it; stages the restored state and publishes experiment.restored. A
// controller then starts the next run from that state.
//
// # What a restore runs
//
// Code to run comes from the caller or from the event log, never from a
// file in storage: a state file's checksum is unkeyed, so anyone who can
// write the storage folder can edit the command it names. From the log,
// the trainable is the log's (a stored snapshot naming another is passed
// over), and one in the request must be the same. From a snapshot alone,
// the request's trainable is used, once checked against the stored one;
// without one the restore is refused (api.CodeTrainableRequired, with the
// stored trainable in the reply's Trainable) unless the request sets
// TrustStoredTrainable.
//
// # Wire contract
//
// It answers on NATS request/reply as the micro service "tunejet-restorer":
// tunejet.api.restore and tunejet.api.can_restore, with the JSON
// api.RestoreRequest and api.RestoreReply (schemas in api/schema, docs in
// docs/api.md). Every refusal carries a code (api.Code*): a malformed
// request, no state at the path, the trainable required or another than
// the experiment's, a param space with other keys, a stored state that is
// unreadable or was edited, a latest checkpoint lost; anything else
// (NATS, storage, a timeout) is "internal".
//
// Only the restorer and the syncer need storage credentials.
package restorer
