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
	// Trainable, when set, must be the experiment's trainable.
	Trainable *events.Trainable `json:"trainable,omitempty"`
	// ParamSpace, when set, re-specifies the param space (same keys).
	ParamSpace map[string]any `json:"param_space,omitempty"`
}

// Reply answers a Request.
type Reply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Experiment is the experiment's name.
	Experiment string `json:"experiment,omitempty"`
	// Source is "log" or "snapshot"; Snapshot names the state file.
	Source   string `json:"source,omitempty"`
	Snapshot string `json:"snapshot,omitempty"`
	// Counts are the trials by status before the restore.
	Counts map[string]int `json:"counts,omitempty"`
	// Seq is the log sequence of experiment.restored.
	Seq uint64 `json:"seq,omitempty"`
}
