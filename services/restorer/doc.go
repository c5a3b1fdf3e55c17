// Package restorer is the service that brings an interrupted experiment
// back.
//
// # Overview
//
// A restore request names an experiment directory (a storage path or URL
// ending in the experiment's name) and Ray's resume flags. The restorer
// reads the experiment's state from the JetStream log when the log still
// holds it (exact), or from the newest experiment_state-*.json in storage
// otherwise (losing at most what happened after that snapshot); validates
// the trainable and any re-specified param_space against it; applies the
// resume rules (internal/restore); brings each resumed trial's latest
// checkpoint back into the Object Store from storage when the store lost
// it; stages the restored state and publishes experiment.restored. A
// controller then starts the next run from that state.
//
// It answers on NATS request/reply as the micro service "tunejet-restorer":
// tunejet.api.restore and tunejet.api.can_restore (JSON Request/Reply).
// Only the restorer and the syncer need storage credentials.
package restorer
