package api

import "github.com/tunejet/tunejet/events"

// Subjects of the restorer's endpoints.
const (
	RestoreSubject    = "tunejet.api.restore"
	CanRestoreSubject = "tunejet.api.can_restore"
)

// RestoreRequest asks to restore an experiment (on CanRestoreSubject,
// whether it can be; only Path is read there).
type RestoreRequest struct {
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
	// seen it (RestoreReply.Trainable of can_restore) and trusts the file.
	TrustStoredTrainable bool `json:"trust_stored_trainable,omitempty"`
	// ParamSpace, when set, re-specifies the param space (same keys).
	ParamSpace map[string]any `json:"param_space,omitempty"`
	// NumSamples, when set, is the restored experiment's num_samples: a
	// larger one adds trials to it, finished or interrupted (-1: sample
	// until stopped). Refused below the trials the experiment has created.
	NumSamples int `json:"num_samples,omitempty"`
	// Mirror, when set, is the caller's upload_dir, command syncer and
	// exclude patterns (of its sync_config): the restored run mirrors with
	// them. A stored state file's are never used: restoring from one
	// without Mirror, the run does not mirror. From the log without
	// Mirror, the run keeps the mirror it had. An empty UploadDir turns
	// mirroring off.
	Mirror *events.Mirror `json:"mirror,omitempty"`
}

// RestoreReply answers a RestoreRequest.
type RestoreReply struct {
	OK bool `json:"ok"`
	// Error says why not, for humans, when not OK.
	Error string `json:"error,omitempty"`
	// Code classifies the refusal, when not OK (see Err).
	Code Code `json:"code,omitempty"`
	// Experiment is the experiment's name.
	Experiment string `json:"experiment,omitempty"`
	// Source is where the state comes from (one of the Source*
	// constants); Snapshot names the state file.
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
	// Skipped names the newer state files that could not be read, each
	// with why ("experiment_state-X.json: corrupt experiment state: ..."):
	// the state came from an older one, Snapshot.
	Skipped []string `json:"skipped,omitempty"`
	// TookOver names the owner of the storage folder this restore took it
	// over from (another deployment, gone: see docs/architecture.md).
	TookOver string `json:"took_over,omitempty"`
}

// Err is the reply's refusal as an error — the service's message, matching
// (errors.Is) the sentinel of Code — or nil when OK. A reply refused
// without a code (from an older service) is CodeInternal.
func (r RestoreReply) Err() error {
	if r.OK {
		return nil
	}
	code := r.Code
	if code == "" {
		code = CodeInternal
	}
	return &Error{Code: code, Message: r.Error}
}

// Where a restore's state comes from (RestoreReply.Source).
const (
	// SourceLog: the JetStream event log, exact.
	SourceLog = "log"
	// SourceSnapshot: the newest experiment_state-*.json in storage; what
	// happened after it is lost.
	SourceSnapshot = "snapshot"
)

// How a restorer read an experiment's state (RestoreReply.Read).
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

// Where the trainable of a restore comes from (RestoreReply.TrainableFrom).
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
