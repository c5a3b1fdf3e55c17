package restorer

import "github.com/tunejet/tunejet/events"

// Subjects of the restorer's endpoints.
const (
	RestoreSubject    = "tunejet.api.restore"
	CanRestoreSubject = "tunejet.api.can_restore"
)

// Request asks to restore an experiment (or, for can_restore, whether it
// can be).
type Request struct {
	// Path is the experiment directory: <storage_path>/<name>, a resolved
	// local path or a storage URL.
	Path string `json:"path"`
	// Resume is what happens to each group of trials.
	Resume events.ResumeConfig `json:"resume"`
	// Trainable, when set, must be the experiment's trainable (the same
	// command, or name). When the state comes from a file in storage (the
	// log does not hold the experiment), the restore runs this trainable,
	// and without it the restore is refused (CodeTrainableRequired): code
	// to run is never taken from a file in storage. When the state comes
	// from the log, the restore runs the log's trainable.
	Trainable *events.Trainable `json:"trainable,omitempty"`
	// TrustStoredTrainable, with no Trainable, runs the trainable the
	// state file names when the state comes from storage: the caller has
	// seen it (Reply.Trainable of can_restore) and trusts the file.
	TrustStoredTrainable bool `json:"trust_stored_trainable,omitempty"`
	// ParamSpace, when set, re-specifies the param space (same keys).
	ParamSpace map[string]any `json:"param_space,omitempty"`
}

// Reply answers a Request.
type Reply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Code classifies a refusal the client may act on (one of the Code*
	// constants); empty for other errors.
	Code string `json:"code,omitempty"`
	// Experiment is the experiment's name.
	Experiment string `json:"experiment,omitempty"`
	// Source is "log" or "snapshot"; Snapshot names the state file.
	Source   string `json:"source,omitempty"`
	Snapshot string `json:"snapshot,omitempty"`
	// Read says how the restorer read the state (one of the Read*
	// constants): from Source "log" it folds the events after the newest
	// state of this log it already has. ReadFrom names that state (a
	// snapshot file or the last experiment.restored), ReadSeq the log
	// sequence it reflects, and Folded counts the events folded after it.
	Read     string `json:"read,omitempty"`
	ReadFrom string `json:"read_from,omitempty"`
	ReadSeq  uint64 `json:"read_seq,omitempty"`
	Folded   int    `json:"folded,omitempty"`
	// Counts are the trials by status before the restore.
	Counts map[string]int `json:"counts,omitempty"`
	// Trainable is what the restored run runs, and TrainableFrom where it
	// comes from (one of the TrainableFrom* constants). On a refusal of the
	// trainable, and from can_restore, it is the trainable the state holds:
	// from storage, the one the state file names.
	Trainable     *events.Trainable `json:"trainable,omitempty"`
	TrainableFrom string            `json:"trainable_from,omitempty"`
	// Seq is the log sequence of experiment.restored.
	Seq uint64 `json:"seq,omitempty"`
}

// How a restorer read an experiment's state (Reply.Read).
const (
	// ReadLog: every event of the experiment in the log.
	ReadLog = "log"
	// ReadSnapshotLog: the newest stored snapshot, which belongs to this
	// log, and the log's events after it.
	ReadSnapshotLog = "snapshot+log"
	// ReadRestoredLog: the state the last restore staged, and the log's
	// events after its experiment.restored.
	ReadRestoredLog = "restored+log"
	// ReadSnapshot: the newest stored snapshot alone (the log lost the
	// experiment).
	ReadSnapshot = "snapshot"
)

// Codes of a refused restore (Reply.Code).
const (
	// CodeTrainableRequired: the state comes from a file in storage and
	// the request names no trainable, nor trusts the stored one
	// (restore.ErrTrainableRequired).
	CodeTrainableRequired = "trainable_required"
	// CodeTrainableMismatch: the request's trainable is another than the
	// experiment's (restore.ErrTrainableMismatch).
	CodeTrainableMismatch = "trainable_mismatch"
)

// Where the trainable of a restore comes from (Reply.TrainableFrom).
const (
	// TrainableFromLog: the event log (its experiment.submitted, or the
	// state its last experiment.restored staged).
	TrainableFromLog = "log"
	// TrainableFromCaller: the request, checked against the stored one.
	TrainableFromCaller = "caller"
	// TrainableFromStorage: the state file in storage; run only when the
	// request trusts it.
	TrainableFromStorage = "storage"
)
