package events

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by every error about a malformed event.
var ErrInvalid = errors.New("invalid event")

// Payload is the data of one event type.
type Payload interface {
	// Type is the CloudEvents type of the event that carries this payload.
	Type() string
	// Validate reports the first malformed field, naming it.
	Validate() error
}

// Trial statuses, as Ray Tune names them.
const (
	StatusPending    = "PENDING"
	StatusRunning    = "RUNNING"
	StatusPaused     = "PAUSED"
	StatusTerminated = "TERMINATED"
	StatusError      = "ERROR"
)

// Failure causes carried by trial.failed.
const (
	// CauseError: the trainable raised an error or its process exited non-zero.
	CauseError = "error"
	// CauseLost: the runner stopped heartbeating (killed, frozen, cut off).
	CauseLost = "lost"
	// CausePreempted: the runner was told to stop (SIGTERM) and handed the trial back.
	CausePreempted = "preempted"
)

// ExperimentSubmitted asks a controller to run an experiment.
type ExperimentSubmitted struct {
	Spec ExperimentSpec `json:"spec"`
}

// ExperimentStarted records a controller's start of (one run of) an
// experiment and the choices that make the run reproducible.
type ExperimentStarted struct {
	// Run counts controller sessions: 1 for the first, +1 per restore.
	Run int `json:"run"`
	// Session is the run's timestamp, YYYY-MM-DD_HH-MM-SS, used in
	// experiment_state-<session>.json.
	Session string `json:"session"`
	// Seed is the effective random seed of the search.
	Seed int64 `json:"seed"`
	// TrialIDPrefix is the 5 hex digits that start every trial id.
	TrialIDPrefix string `json:"trial_id_prefix"`
	// NumTrials is how many trials the search will create; -1 if unbounded.
	NumTrials int `json:"num_trials"`
	// StoragePath is the resolved storage path (a directory or URL).
	StoragePath string `json:"storage_path"`
}

// ExperimentStopRequested asks the controller to stop every trial and end
// the experiment.
type ExperimentStopRequested struct {
	Reason string `json:"reason"`
}

// ExperimentInterrupted records that the run stopped before completion
// (Ctrl-C, shutdown); the experiment can be restored.
type ExperimentInterrupted struct {
	Reason string `json:"reason"`
}

// ExperimentCompleted is the end of the experiment.
type ExperimentCompleted struct {
	// Reason: "finished", "time_budget", "fail_fast", "stopped", or
	// "invalid" (a spec the controller cannot run, or a result without the
	// experiment's metric: Ray's strict metric check).
	Reason string `json:"reason"`
	// Error is the trainable error that ended an experiment with
	// fail_fast: raise, or why it was invalid.
	Error string `json:"error,omitempty"`
}

// ResumeConfig says what a restore does with each group of trials.
type ResumeConfig struct {
	Finished   string `json:"finished"`   // "resume", "restart" or "skip"
	Unfinished string `json:"unfinished"` // "resume", "restart" or "skip"
	Errored    string `json:"errored"`    // "resume", "restart" or "skip"
}

// ExperimentRestored records a restore. The restored state — the fold with
// the resume rules applied — is staged in the experiment's Object Store as
// Object; every reader of the log loads it when it meets this event and
// folds the events after it.
type ExperimentRestored struct {
	Resume ResumeConfig `json:"resume"`
	// Source is "log" or "snapshot".
	Source string `json:"source"`
	// Snapshot is the state file restored from, when Source is "snapshot".
	Snapshot string `json:"snapshot,omitempty"`
	// Object and Digest locate the restored state (the snapshot format)
	// in the experiment's Object Store bucket.
	Object string `json:"object"`
	Digest string `json:"digest"`
	// NumSamples is the num_samples the restore set, when it changed the
	// experiment's (to add trials); the restored state's spec holds it.
	NumSamples int `json:"num_samples,omitempty"`
	// Mirror is what the restored run mirrors to upload_dir with: the
	// restore's caller's upload_dir, command syncer and exclude patterns,
	// never a stored state file's. Always set on a restore from a state
	// file (empty: no mirror); on a restore from the log only when the
	// caller gave them, else the run keeps the mirror it had (the
	// experiment.submitted one or an earlier restore's).
	Mirror *Mirror `json:"mirror,omitempty"`
}

// Mirror is the part of a SyncConfig that says where and with which
// commands the syncer mirrors an experiment's folder: only a client (in
// experiment.submitted) or a restore's caller (through the restorer, in
// experiment.restored) sets it.
type Mirror struct {
	UploadDir string         `json:"upload_dir,omitempty"`
	Syncer    *CommandSyncer `json:"syncer,omitempty"`
	Exclude   []string       `json:"exclude,omitempty"`
}

// MirrorOf is sc's mirror settings.
func MirrorOf(sc SyncConfig) Mirror {
	return Mirror{UploadDir: sc.UploadDir, Syncer: sc.Syncer, Exclude: sc.Exclude}
}

// ApplyTo replaces sc's mirror settings with m's.
func (m Mirror) ApplyTo(sc *SyncConfig) {
	sc.UploadDir, sc.Syncer, sc.Exclude = m.UploadDir, m.Syncer, m.Exclude
}

// TrialCreated adds a trial to the experiment.
type TrialCreated struct {
	TrialID string `json:"trial_id"`
	// Index is the trial's position in the search: 0, 1, 2, ...
	Index int `json:"index"`
	// TrialName is "<trainable>_<trial_id>".
	TrialName string `json:"trial_name"`
	// ExperimentTag is "<index>_<k=v,...>" of the sampled values.
	ExperimentTag string `json:"experiment_tag"`
	// DirName is the trial's directory under the experiment directory.
	DirName string `json:"dir_name"`
	// Config is the resolved configuration the trainable receives.
	Config map[string]any `json:"config"`
	// SearcherSeq is the log sequence of the last event a model-based
	// searcher (tpe, or an external searcher: what its request's history
	// reflected) had seen when it suggested Config: a tpe suggestion is a
	// function of the log up to it, the seed and Index. 0 for random and
	// grid search, whose configs depend on the seed and Index alone.
	SearcherSeq uint64 `json:"searcher_seq,omitempty"`
}

// CheckpointRef points at a checkpoint's bytes.
type CheckpointRef struct {
	// Name is checkpoint_NNNNNN.
	Name string `json:"name"`
	// Index is the NNNNNN of Name.
	Index int `json:"index"`
	// Object is the name of the staged copy in the experiment's Object Store.
	Object string `json:"object,omitempty"`
	// Location, for a checkpoint the runner wrote straight to storage, is
	// its folder relative to the experiment's folder:
	// <trial dir>/checkpoint_NNNNNN. Object is then empty.
	Location string `json:"location,omitempty"`
	// Files is the manifest of a checkpoint in storage (Location): each
	// file's path, size and CRC-32C. It is left out when it would exceed
	// 256 KiB; the folder's manifest file always holds it, and Digest
	// checks that file.
	Files []CheckpointFile `json:"files,omitempty"`
	// Size is the total bytes of the checkpoint's files.
	Size int64 `json:"size"`
	// Digest is "sha256:<hex>" over the checkpoint's archive for a staged
	// checkpoint, and "crc32c:<8 hex>" over the canonical manifest for
	// one in storage (Location).
	Digest string `json:"digest"`
	// Iteration is the training_iteration reported with the checkpoint.
	Iteration int `json:"iteration"`
	// Metrics is the result reported with the checkpoint: retention ranks
	// checkpoints by its checkpoint_score_attribute.
	Metrics map[string]any `json:"metrics,omitempty"`
}

// CheckpointFile is one file of a checkpoint in storage.
type CheckpointFile struct {
	// Path is slash-relative to the checkpoint's folder.
	Path string `json:"path"`
	Size int64  `json:"size"`
	// CRC32C is the CRC-32C (Castagnoli) of the file, 8 lowercase hex digits.
	CRC32C string `json:"crc32c"`
}

// CheckpointName is the name of a trial's checkpoint number index, as
// Ray names it: checkpoint_NNNNNN.
func CheckpointName(index int) string { return fmt.Sprintf("checkpoint_%06d", index) }

// CheckpointIndex is the number a CheckpointName holds; false when name is
// not one.
func CheckpointIndex(name string) (int, bool) {
	var n int
	_, err := fmt.Sscanf(name, "checkpoint_%d", &n)
	return n, err == nil
}

// CheckpointObject is the Object Store name of the staged copy of one
// checkpoint of one attempt of a trial. Attempts of a trial may number
// their checkpoints alike (a retry resumes from the last checkpoint it
// knew of while an attempt presumed lost goes on), so each attempt stages
// its own object.
func CheckpointObject(trialID string, attempt int, name string) string {
	return trialID + "/" + name + "/attempt_" + strconv.Itoa(attempt)
}

// LegacyCheckpointObject is the object a checkpoint was staged as before
// objects were named per attempt, and as a restore stages again a
// checkpoint of a state that names no object.
func LegacyCheckpointObject(trialID, name string) string { return trialID + "/" + name }

// TrialScheduled is trial work: a runner that pulls it runs the trial. It
// carries everything a stateless runner needs.
type TrialScheduled struct {
	TrialID   string         `json:"trial_id"`
	TrialName string         `json:"trial_name"`
	DirName   string         `json:"dir_name"`
	Config    map[string]any `json:"config"`
	Trainable Trainable      `json:"trainable"`
	// Stop is the experiment's stop criteria, checked by the runner on
	// every report.
	Stop map[string]float64 `json:"stop,omitempty"`
	// AttemptBase is added to the delivery count to give the attempt
	// number, so attempts keep counting across restores.
	AttemptBase int `json:"attempt_base"`
	// MaxFailures is how many failures the work may take before the trial
	// is ERROR: the experiment's max_failures less the trial's failures
	// since the last restore (-1: no limit). HeartbeatTimeoutS is the
	// experiment's.
	MaxFailures       int     `json:"max_failures"`
	HeartbeatTimeoutS float64 `json:"heartbeat_timeout_s"`
	// Checkpoint is the trial's latest checkpoint when it was scheduled.
	Checkpoint *CheckpointRef `json:"checkpoint,omitempty"`
	// RunnerSeq is the log sequence of the last event a runner wrote about
	// the trial that the controller had read when it scheduled the work (0:
	// none, or not said). A runner that finds no later one knows Checkpoint
	// (or Exploit's) is the newest kept and AttemptBase the last attempt
	// started, without reading the trial's history.
	RunnerSeq uint64 `json:"runner_seq,omitempty"`
	// CheckpointScoreAttribute is the result key checkpoints are ranked
	// by; a checkpoint reported with a non-numeric value is refused.
	CheckpointScoreAttribute string `json:"checkpoint_score_attribute,omitempty"`
	// Artifacts, when set, makes the runner stage the files the trainable
	// writes in its trial directory (SyncConfig.sync_artifacts).
	Artifacts *ArtifactSync `json:"artifacts,omitempty"`
	// Exploit, when set, is a PBT exploit: the trial goes on with Config
	// (the donor's, explored) from another trial's checkpoint instead of
	// its own, until it makes a checkpoint of its own.
	Exploit *Exploit `json:"exploit,omitempty"`
	// Resources is what the trial needs, resolved from the trainable's
	// resources and the trial's config. Absent: {"cpu": 1} (Shape).
	Resources Resources `json:"resources,omitempty"`
	// WaitForDecisions: the runner holds each report until the controller
	// has judged it (TuneConfig.WaitForDecisions, with a scheduler or
	// stoppers to judge), or has stopped or paused the trial.
	WaitForDecisions bool `json:"wait_for_decisions,omitempty"`
}

// Exploit is the checkpoint of another trial that a trial resumes from.
type Exploit struct {
	// Source is the donor trial's id.
	Source string `json:"source"`
	// Checkpoint is the donor's checkpoint; its Object names the staged copy.
	Checkpoint CheckpointRef `json:"checkpoint"`
}

// ArtifactSync is the experiment's artifact policy, for runners.
type ArtifactSync struct {
	// PeriodS throttles staging on reports (SyncConfig.sync_period).
	PeriodS float64 `json:"sync_period"`
	// OnCheckpoint forces staging on every checkpoint
	// (SyncConfig.sync_artifacts_on_checkpoint).
	OnCheckpoint bool `json:"on_checkpoint"`
}

// TrialArtifacts records the files a trainable wrote in its trial directory
// since the last staging, staged as one archive in the Object Store.
type TrialArtifacts struct {
	TrialID string `json:"trial_id"`
	Attempt int    `json:"attempt"`
	// Object is the staged archive's name in the Object Store.
	Object string `json:"object"`
	Files  int    `json:"files"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"`
}

// TrialStarted records that a runner began an attempt of a trial.
type TrialStarted struct {
	TrialID  string `json:"trial_id"`
	Attempt  int    `json:"attempt"`
	Runner   string `json:"runner"`
	Hostname string `json:"hostname"`
	PID      int    `json:"pid"`
	// RestoredFrom is the checkpoint the attempt resumes from, if any.
	RestoredFrom string `json:"restored_from,omitempty"`
	// StageRestore is set when RestoredFrom is a checkpoint in storage
	// that this runner cannot reach: the syncer stages it in the Object
	// Store for the attempt.
	StageRestore bool `json:"stage_restore,omitempty"`
	// WorkSeq is the log sequence of the trial.scheduled the attempt runs.
	// Only the trial's current work starts it: work of a run before a
	// restore, or of an earlier scheduling, changes nothing.
	WorkSeq uint64 `json:"work_seq,omitempty"`
}

// TrialReported carries a result of a trial: the trainable's metrics plus
// Ray's automatic fields (training_iteration, time_this_iter_s, ...).
//
// A runner whose trial reports faster than the log answers sends the
// results that queued meanwhile in one event: Earlier holds them, oldest
// first, and Result is the newest. An event of one result has no Earlier,
// so a consumer that wants only the latest metrics reads Result, and one
// that wants every result reads Results.
type TrialReported struct {
	TrialID string           `json:"trial_id"`
	Attempt int              `json:"attempt"`
	Earlier []map[string]any `json:"earlier,omitempty"`
	Result  map[string]any   `json:"result"`
}

// Results returns every result of the event, oldest first.
func (p *TrialReported) Results() []map[string]any {
	if len(p.Earlier) == 0 {
		return []map[string]any{p.Result}
	}
	return append(p.Earlier[:len(p.Earlier):len(p.Earlier)], p.Result)
}

// Split returns a trial.reported event as one event per result, oldest
// first, each with the event's envelope; any other event alone.
func Split(e *Event) []*Event {
	p, ok := e.Data.(*TrialReported)
	if !ok || len(p.Earlier) == 0 {
		return []*Event{e}
	}
	out := make([]*Event, 0, len(p.Earlier)+1)
	for _, r := range p.Results() {
		one := *e
		one.Data = &TrialReported{TrialID: p.TrialID, Attempt: p.Attempt, Result: r}
		out = append(out, &one)
	}
	return out
}

// TrialCheckpointed records a checkpoint staged in the Object Store.
type TrialCheckpointed struct {
	TrialID    string        `json:"trial_id"`
	Attempt    int           `json:"attempt"`
	Checkpoint CheckpointRef `json:"checkpoint"`
}

// TrialFailed records a failed attempt.
type TrialFailed struct {
	TrialID string `json:"trial_id"`
	Attempt int    `json:"attempt"`
	// Cause is "error", "lost" or "preempted".
	Cause string `json:"cause"`
	// ErrorType classifies the error ("ExitError", "GoError", ...).
	ErrorType string `json:"error_type,omitempty"`
	// Error is the error text: the message, or a command's last stderr lines.
	Error string `json:"error"`
	// Final is true when no retry follows: the trial is ERROR.
	Final bool `json:"final"`
	// Counted is false when the failure does not count against max_failures.
	Counted bool `json:"counted"`
}

// TrialStopRequested asks the runner of a trial to stop it; the trial ends
// TERMINATED. With Pause, the trial is paused instead: the runner ends the
// attempt with trial.paused, the trial frees its slot, and it resumes later
// from its latest checkpoint, on any runner.
type TrialStopRequested struct {
	TrialID string `json:"trial_id"`
	Reason  string `json:"reason"`
	Pause   bool   `json:"pause,omitempty"`
}

// TrialPaused records that a trial was paused (a scheduler's decision): it
// holds no slot, and it resumes from its latest checkpoint when it is
// scheduled again. Attempt is the attempt that paused; 0 when the
// controller paused a trial that was not running.
type TrialPaused struct {
	TrialID string `json:"trial_id"`
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason"`
}

// TrialReturned records that a runner handed a trial's work back without
// running it: the work needs more than the runner has even when idle (it
// was scheduled after the runner last read the experiment's work, so the
// runner took it blind). A hand-back costs no attempt: the trial is
// unscheduled again, its status unchanged, and the controller schedules it
// anew for a runner that holds it. Only a hand-back of the trial's current
// work (WorkSeq) by a delivery later than the trial's last started attempt
// counts.
type TrialReturned struct {
	TrialID string `json:"trial_id"`
	// Attempt is the attempt the delivery would have run (attempt_base +
	// delivery count); it did not start.
	Attempt int `json:"attempt"`
	// WorkSeq is the log sequence of the trial.scheduled handed back (0
	// names no work: the hand-back changes nothing).
	WorkSeq uint64 `json:"work_seq"`
	// Runner is the runner that handed it back.
	Runner string `json:"runner"`
	// Reason says why, for a person ("needs gpu=1; runner cpu-1 has gpu=0").
	Reason string `json:"reason"`
}

// TrialDecided is a tuning decision about a trial: a scheduler's judgement
// of a result (a rung record, a stop) or a stopper's stop. Every reader's
// fold makes the same decisions from the same log; the controller
// publishes each before it acts on it, for the record and for `tunejet
// explain`, and a stop is followed by trial.stop_requested.
type TrialDecided struct {
	TrialID string `json:"trial_id"`
	// Ordinal numbers the experiment's decisions from 1, in log order.
	Ordinal int `json:"ordinal"`
	// By is what decided: "scheduler" or "stopper".
	By string `json:"by"`
	// Action is "continue", "stop", "pause", "resume", "exploit" or
	// "record".
	Action string `json:"action"`
	// Reason says why, for a person.
	Reason string `json:"reason,omitempty"`
	// Detail is the decision as its maker wrote it, with the inputs it
	// came from (for ASHA: the rung, the cutoff and the values behind it).
	Detail map[string]any `json:"detail,omitempty"`
	// ResultSeq is the log sequence of the result decided on.
	ResultSeq uint64 `json:"result_seq,omitempty"`
}

// Quoted is how a stop or pause the decision makes is told on, in the
// trial's stop request and end_reason: "scheduler: stopped at rung 4 …".
func (p *TrialDecided) Quoted() string { return p.By + ": " + p.Reason }

// The makers of a decision.
const (
	DecidedByScheduler = "scheduler"
	DecidedByStopper   = "stopper"
)

// DriverAnswered is an answer of the experiment's driver (the Python
// Tuner.fit() that serves the user's stopper, searcher and functions, spec
// section driver) to a question the controller asked it, with the
// question. The controller publishes it before acting on it, and a restore
// replays it rather than asking again (docs/driver.md).
type DriverAnswered struct {
	DriverQuestion
	// ResultSeq is the log sequence of the result judged (stop).
	ResultSeq uint64 `json:"result_seq,omitempty"`
	// Answer is the driver's answer.
	Answer DriverAnswer `json:"answer"`
	// By names the user object that answered ("MyStopper").
	By string `json:"by,omitempty"`
}

// DriverQuestion is a question the controller asks the experiment's
// driver, with its inputs.
type DriverQuestion struct {
	// Key names the decision: "stop/<trial>/<iteration>",
	// "suggest/<index>", "sample/<index>" or "explore/<trial>/<ordinal>"
	// (the ordinal of the exploit's trial.decided).
	Key string `json:"key"`
	// Method is DriverStop, DriverSuggest, DriverSample or DriverExplore.
	Method string `json:"method"`
	// Through is the log sequence the controller had folded when it asked:
	// the driver's objects had seen the events up to it.
	Through uint64 `json:"through"`
	// TrialID is the trial judged or explored, or the new trial's id.
	TrialID string `json:"trial_id"`
	// Index is the new trial's search index (suggest, sample).
	Index *int `json:"index,omitempty"`
	// Result is the result judged (stop).
	Result map[string]any `json:"result,omitempty"`
	// Config is the new trial's config as drawn, its sample_from values
	// null (sample), or the exploit's as explored, the keys the driver
	// resamples null (explore).
	Config map[string]any `json:"config,omitempty"`
	// Resample are the keys whose function mutation the driver calls
	// (explore).
	Resample []string `json:"resample,omitempty"`
}

// DriverAnswer is the driver's answer to one question: Stop and StopAll
// for a stop; Config, or Finished (Ray's Searcher.FINISHED: no trial from
// this index on), for a suggestion.
type DriverAnswer struct {
	Stop     bool           `json:"stop,omitempty"`
	StopAll  bool           `json:"stop_all,omitempty"`
	Config   map[string]any `json:"config,omitempty"`
	Finished bool           `json:"finished,omitempty"`
}

// The questions the controller asks a driver: whether a result stops its
// trial (its stopper), a new trial's config (its searcher), the values of
// a new trial's sample_from domains (its functions), a PBT exploit's
// config (PBT's function mutations and custom_explore_fn).
const (
	DriverStop    = "stop"
	DriverSuggest = "suggest"
	DriverSample  = "sample"
	DriverExplore = "explore"
)

// TrialCompleted is a trial's terminal status.
type TrialCompleted struct {
	TrialID string `json:"trial_id"`
	// Attempt is the attempt that ended; 0 when the controller ended a trial
	// that was not running.
	Attempt int `json:"attempt"`
	// Status is TERMINATED or ERROR.
	Status string `json:"status"`
	// Reason: "finished", "stop_criteria", "stopped", "time_budget",
	// "fail_fast", "max_failures".
	Reason string `json:"reason"`
}

// CheckpointPersisted announces a checkpoint that is durable in storage.
type CheckpointPersisted struct {
	TrialID string `json:"trial_id"`
	Name    string `json:"name"`
	// Path is where it lives: a directory path or a storage URL.
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"`
}

// CheckpointDeleted announces a checkpoint removed by retention.
type CheckpointDeleted struct {
	TrialID string `json:"trial_id"`
	Name    string `json:"name"`
	Reason  string `json:"reason"`
}

// SyncCompleted announces that storage reflects the log up to Seq.
type SyncCompleted struct {
	// Seq is the last stream sequence reflected in storage.
	Seq uint64 `json:"seq"`
	// Snapshot is the experiment state file written, if any.
	Snapshot  string  `json:"snapshot,omitempty"`
	Files     int     `json:"files"`
	Bytes     int64   `json:"bytes"`
	DurationS float64 `json:"duration_s"`
}

// SyncFailed announces a sync that failed (it will be retried).
type SyncFailed struct {
	Operation string `json:"operation"`
	Error     string `json:"error"`
	Attempt   int    `json:"attempt"`
}

// Type implementations.
func (*ExperimentSubmitted) Type() string     { return TypeExperimentSubmitted }
func (*ExperimentStarted) Type() string       { return TypeExperimentStarted }
func (*ExperimentStopRequested) Type() string { return TypeExperimentStopRequested }
func (*ExperimentInterrupted) Type() string   { return TypeExperimentInterrupted }
func (*ExperimentCompleted) Type() string     { return TypeExperimentCompleted }
func (*ExperimentRestored) Type() string      { return TypeExperimentRestored }
func (*TrialCreated) Type() string            { return TypeTrialCreated }
func (*TrialScheduled) Type() string          { return TypeTrialScheduled }
func (*TrialStarted) Type() string            { return TypeTrialStarted }
func (*TrialReported) Type() string           { return TypeTrialReported }
func (*TrialCheckpointed) Type() string       { return TypeTrialCheckpointed }
func (*TrialFailed) Type() string             { return TypeTrialFailed }
func (*TrialStopRequested) Type() string      { return TypeTrialStopRequested }
func (*TrialPaused) Type() string             { return TypeTrialPaused }
func (*TrialDecided) Type() string            { return TypeTrialDecided }
func (*TrialCompleted) Type() string          { return TypeTrialCompleted }
func (*TrialArtifacts) Type() string          { return TypeTrialArtifacts }
func (*TrialReturned) Type() string           { return TypeTrialReturned }
func (*CheckpointPersisted) Type() string     { return TypeCheckpointPersisted }
func (*CheckpointDeleted) Type() string       { return TypeCheckpointDeleted }
func (*SyncCompleted) Type() string           { return TypeSyncCompleted }
func (*SyncFailed) Type() string              { return TypeSyncFailed }
func (*DriverAnswered) Type() string          { return TypeDriverAnswered }

// TrialOf returns the trial id a per-trial payload is about, or "".
func TrialOf(p Payload) string {
	switch x := p.(type) {
	case *TrialCreated:
		return x.TrialID
	case *TrialScheduled:
		return x.TrialID
	case *TrialStarted:
		return x.TrialID
	case *TrialReported:
		return x.TrialID
	case *TrialCheckpointed:
		return x.TrialID
	case *TrialFailed:
		return x.TrialID
	case *TrialStopRequested:
		return x.TrialID
	case *TrialPaused:
		return x.TrialID
	case *TrialDecided:
		return x.TrialID
	case *TrialCompleted:
		return x.TrialID
	case *TrialArtifacts:
		return x.TrialID
	case *TrialReturned:
		return x.TrialID
	case *CheckpointPersisted:
		return x.TrialID
	case *CheckpointDeleted:
		return x.TrialID
	}
	return ""
}

// fieldErr builds the error for one bad field.
func fieldErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: field %q: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

func checkID(field, s string) error {
	if !validID(s) {
		return fieldErr(field, "%q is not a valid id (letters, digits, '_' and '-', 1-128 characters)", s)
	}
	return nil
}

func checkAttempt(a int) error {
	if a < 1 {
		return fieldErr("attempt", "must be >= 1, got %d", a)
	}
	return nil
}

func checkOneOf(field, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fieldErr(field, "must be one of %v, got %q", allowed, v)
}

func checkNonEmpty(field, v string) error {
	if v == "" {
		return fieldErr(field, "must not be empty")
	}
	return nil
}

var (
	checkpointNameRE = regexp.MustCompile(`^checkpoint_[0-9]{6,}$`)
	digestRE         = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	crcDigestRE      = regexp.MustCompile(`^crc32c:[0-9a-f]{8}$`)
	crcHexRE         = regexp.MustCompile(`^[0-9a-f]{8}$`)
	sessionRE        = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}_[0-9]{2}-[0-9]{2}-[0-9]{2}$`)
	hexPrefixRE      = regexp.MustCompile(`^[0-9a-f]{5}$`)
)

// Validate implementations.

func (p *ExperimentSubmitted) Validate() error { return p.Spec.Validate() }

func (p *ExperimentStarted) Validate() error {
	if p.Run < 1 {
		return fieldErr("run", "must be >= 1, got %d", p.Run)
	}
	if !sessionRE.MatchString(p.Session) {
		return fieldErr("session", "want YYYY-MM-DD_HH-MM-SS, got %q", p.Session)
	}
	if !hexPrefixRE.MatchString(p.TrialIDPrefix) {
		return fieldErr("trial_id_prefix", "want 5 lowercase hex digits, got %q", p.TrialIDPrefix)
	}
	if p.NumTrials < -1 {
		return fieldErr("num_trials", "must be >= -1, got %d", p.NumTrials)
	}
	return checkNonEmpty("storage_path", p.StoragePath)
}

func (p *ExperimentStopRequested) Validate() error { return nil }
func (p *ExperimentInterrupted) Validate() error   { return nil }

func (p *ExperimentCompleted) Validate() error {
	return checkNonEmpty("reason", p.Reason)
}

func (p *ExperimentRestored) Validate() error {
	for _, f := range []struct{ name, v string }{
		{"resume.finished", p.Resume.Finished}, {"resume.unfinished", p.Resume.Unfinished}, {"resume.errored", p.Resume.Errored},
	} {
		if err := checkOneOf(f.name, f.v, "resume", "restart", "skip"); err != nil {
			return err
		}
	}
	if err := checkOneOf("source", p.Source, "log", "snapshot"); err != nil {
		return err
	}
	if err := checkNonEmpty("object", p.Object); err != nil {
		return err
	}
	if !digestRE.MatchString(p.Digest) {
		return fieldErr("digest", "want sha256:<64 hex digits>, got %q", p.Digest)
	}
	if m := p.Mirror; m != nil && m.Syncer != nil {
		if err := checkNonEmpty("mirror.syncer.sync_up", m.Syncer.SyncUp); err != nil {
			return err
		}
	}
	return nil
}

func (p *TrialCreated) Validate() error {
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	if p.Index < 0 {
		return fieldErr("index", "must be >= 0, got %d", p.Index)
	}
	if err := checkNonEmpty("trial_name", p.TrialName); err != nil {
		return err
	}
	if err := checkDirName("dir_name", p.DirName); err != nil {
		return err
	}
	if p.Config == nil {
		return fieldErr("config", "must be an object")
	}
	return nil
}

func (p *CheckpointRef) validate(prefix string) error {
	if !checkpointNameRE.MatchString(p.Name) {
		return fieldErr(prefix+"name", "want checkpoint_NNNNNN, got %q", p.Name)
	}
	if p.Index < 0 {
		return fieldErr(prefix+"index", "must be >= 0, got %d", p.Index)
	}
	if p.Size < 0 {
		return fieldErr(prefix+"size", "must be >= 0, got %d", p.Size)
	}
	if p.Location != "" {
		return p.validateDirect(prefix)
	}
	if len(p.Files) > 0 {
		return fieldErr(prefix+"files", "only a checkpoint in storage (location) has a manifest")
	}
	if !digestRE.MatchString(p.Digest) {
		return fieldErr(prefix+"digest", "want sha256:<64 hex digits>, got %q", p.Digest)
	}
	return nil
}

// validateDirect checks a checkpoint in storage.
func (p *CheckpointRef) validateDirect(prefix string) error {
	dir, name, ok := strings.Cut(p.Location, "/")
	if !ok || name != p.Name {
		return fieldErr(prefix+"location", "want <trial dir>/%s, got %q", p.Name, p.Location)
	}
	if err := checkDirName(prefix+"location", dir); err != nil {
		return err
	}
	if p.Object != "" {
		return fieldErr(prefix+"object", "a checkpoint in storage (location) has no staged object, got %q", p.Object)
	}
	if !crcDigestRE.MatchString(p.Digest) {
		return fieldErr(prefix+"digest", "want crc32c:<8 hex digits> for a checkpoint in storage, got %q", p.Digest)
	}
	var size int64
	for i, f := range p.Files {
		field := fmt.Sprintf("%sfiles[%d]", prefix, i)
		if f.Path == "" || strings.HasPrefix(f.Path, "/") || slices.Contains(strings.Split(f.Path, "/"), "..") {
			return fieldErr(field+".path", "want a relative path inside the checkpoint, got %q", f.Path)
		}
		if f.Size < 0 {
			return fieldErr(field+".size", "must be >= 0, got %d", f.Size)
		}
		if !crcHexRE.MatchString(f.CRC32C) {
			return fieldErr(field+".crc32c", "want 8 lowercase hex digits, got %q", f.CRC32C)
		}
		size += f.Size
	}
	if len(p.Files) > 0 && size != p.Size {
		return fieldErr(prefix+"size", "the files hold %d bytes, got %d", size, p.Size)
	}
	return nil
}

func (p *TrialScheduled) Validate() error {
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	if err := checkNonEmpty("trial_name", p.TrialName); err != nil {
		return err
	}
	if err := checkDirName("dir_name", p.DirName); err != nil {
		return err
	}
	if p.Config == nil {
		return fieldErr("config", "must be an object")
	}
	if err := p.Trainable.validate("trainable."); err != nil {
		return err
	}
	if p.AttemptBase < 0 {
		return fieldErr("attempt_base", "must be >= 0, got %d", p.AttemptBase)
	}
	if err := p.Resources.validate("resources."); err != nil {
		return err
	}
	if p.MaxFailures < -1 {
		return fieldErr("max_failures", "must be >= -1, got %d", p.MaxFailures)
	}
	if !(p.HeartbeatTimeoutS > 0) || math.IsInf(p.HeartbeatTimeoutS, 0) {
		return fieldErr("heartbeat_timeout_s", "must be > 0, got %v", p.HeartbeatTimeoutS)
	}
	if p.Checkpoint != nil {
		if err := p.Checkpoint.validate("checkpoint."); err != nil {
			return err
		}
	}
	if x := p.Exploit; x != nil {
		if err := checkID("exploit.source", x.Source); err != nil {
			return err
		}
		if x.Source == p.TrialID {
			return fieldErr("exploit.source", "a trial cannot exploit itself (%q)", x.Source)
		}
		if o := x.Checkpoint.Object; o != "" && !strings.HasPrefix(o, x.Source+"/") {
			return fieldErr("exploit.checkpoint.object", "%q is not a staged copy of the donor %s", o, x.Source)
		}
		return x.Checkpoint.validate("exploit.checkpoint.")
	}
	return nil
}

func (p *TrialStarted) Validate() error {
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	if err := checkAttempt(p.Attempt); err != nil {
		return err
	}
	return checkNonEmpty("runner", p.Runner)
}

func (p *TrialReported) Validate() error {
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	if err := checkAttempt(p.Attempt); err != nil {
		return err
	}
	if p.Result == nil {
		return fieldErr("result", "must be an object")
	}
	last, err := resultIteration("result", p.Result)
	if err != nil {
		return err
	}
	// Earlier results come before Result, in the order they were reported.
	prev := 0.0
	for i, r := range p.Earlier {
		field := fmt.Sprintf("earlier[%d]", i)
		if r == nil {
			return fieldErr(field, "must be an object")
		}
		it, err := resultIteration(field, r)
		if err != nil {
			return err
		}
		if it <= prev {
			return fieldErr(field+".training_iteration", "must be greater than the one before it (%v), got %v", prev, it)
		}
		prev = it
	}
	if last <= prev {
		return fieldErr("result.training_iteration", "must be greater than the last earlier result's (%v), got %v", prev, last)
	}
	return nil
}

// resultIteration returns a result's training_iteration, an integer >= 1.
func resultIteration(field string, r map[string]any) (float64, error) {
	var it float64
	ok := true
	switch x := r["training_iteration"].(type) {
	case float64: // as decoded from JSON
		it = x
	case int:
		it = float64(x)
	case int64:
		it = float64(x)
	default:
		ok = false
	}
	if !ok || it < 1 || it != math.Trunc(it) {
		return 0, fieldErr(field+".training_iteration", "must be an integer >= 1, got %v", r["training_iteration"])
	}
	return it, nil
}

func (p *TrialCheckpointed) Validate() error {
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	if err := checkAttempt(p.Attempt); err != nil {
		return err
	}
	c := p.Checkpoint
	if err := c.validate("checkpoint."); err != nil {
		return err
	}
	// A runner stages checkpoint_<index> as its attempt's own object; an
	// event naming another lies about where its bytes are.
	if c.Name != CheckpointName(c.Index) {
		return fieldErr("checkpoint.name", "checkpoint %d is %s, got %q", c.Index, CheckpointName(c.Index), c.Name)
	}
	switch c.Object {
	case "", CheckpointObject(p.TrialID, p.Attempt, c.Name), LegacyCheckpointObject(p.TrialID, c.Name):
		return nil
	}
	return fieldErr("checkpoint.object", "attempt %d stages %s as %q, got %q", p.Attempt, c.Name, CheckpointObject(p.TrialID, p.Attempt, c.Name), c.Object)
}

func (p *TrialFailed) Validate() error {
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	if p.Attempt < 0 {
		return fieldErr("attempt", "must be >= 0, got %d", p.Attempt)
	}
	return checkOneOf("cause", p.Cause, CauseError, CauseLost, CausePreempted)
}

func (p *TrialStopRequested) Validate() error {
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	return checkNonEmpty("reason", p.Reason)
}

func (p *TrialPaused) Validate() error {
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	if p.Attempt < 0 {
		return fieldErr("attempt", "must be >= 0, got %d", p.Attempt)
	}
	return checkNonEmpty("reason", p.Reason)
}

func (p *TrialReturned) Validate() error {
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	if err := checkAttempt(p.Attempt); err != nil {
		return err
	}
	if err := checkNonEmpty("runner", p.Runner); err != nil {
		return err
	}
	return checkNonEmpty("reason", p.Reason)
}

func (p *TrialDecided) Validate() error {
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	if p.Ordinal < 1 {
		return fieldErr("ordinal", "must be >= 1, got %d", p.Ordinal)
	}
	if err := checkOneOf("by", p.By, DecidedByScheduler, DecidedByStopper); err != nil {
		return err
	}
	if err := checkOneOf("action", p.Action, "continue", "stop", "pause", "resume", "exploit", "record"); err != nil {
		return err
	}
	return nil
}

func (p *DriverAnswered) Validate() error {
	if err := checkNonEmpty("key", p.Key); err != nil {
		return err
	}
	if err := checkOneOf("method", p.Method, DriverStop, DriverSuggest, DriverSample, DriverExplore); err != nil {
		return err
	}
	newTrial := p.Method == DriverSuggest || p.Method == DriverSample
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	switch {
	case newTrial && (p.Index == nil || *p.Index < 0):
		return fieldErr("index", "a new trial's config needs its index, >= 0")
	case p.Method == DriverSuggest && p.Answer.Config == nil && !p.Answer.Finished:
		return fieldErr("answer", "a suggestion is a config or finished")
	case p.Method == DriverSample && p.Answer.Config == nil:
		return fieldErr("answer", "a sample is the config with its sample_from values")
	case p.Method == DriverExplore && p.Answer.Config == nil:
		return fieldErr("answer", "an explore answer is the exploit's config")
	case p.Method == DriverStop && p.Result == nil:
		return fieldErr("result", "a stop answer needs the result it judged")
	}
	return nil
}

func (p *TrialCompleted) Validate() error {
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	if p.Attempt < 0 {
		return fieldErr("attempt", "must be >= 0, got %d", p.Attempt)
	}
	if err := checkOneOf("status", p.Status, StatusTerminated, StatusError); err != nil {
		return err
	}
	return checkNonEmpty("reason", p.Reason)
}

func (p *TrialArtifacts) Validate() error {
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	if err := checkAttempt(p.Attempt); err != nil {
		return err
	}
	if err := checkNonEmpty("object", p.Object); err != nil {
		return err
	}
	if p.Files < 0 || p.Size < 0 {
		return fieldErr("files", "files and size must be >= 0")
	}
	if !digestRE.MatchString(p.Digest) {
		return fieldErr("digest", "want sha256:<64 hex digits>, got %q", p.Digest)
	}
	return nil
}

func (p *CheckpointPersisted) Validate() error {
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	if !checkpointNameRE.MatchString(p.Name) {
		return fieldErr("name", "want checkpoint_NNNNNN, got %q", p.Name)
	}
	if err := checkNonEmpty("path", p.Path); err != nil {
		return err
	}
	if !digestRE.MatchString(p.Digest) {
		return fieldErr("digest", "want sha256:<64 hex digits>, got %q", p.Digest)
	}
	return nil
}

func (p *CheckpointDeleted) Validate() error {
	if err := checkID("trial_id", p.TrialID); err != nil {
		return err
	}
	if !checkpointNameRE.MatchString(p.Name) {
		return fieldErr("name", "want checkpoint_NNNNNN, got %q", p.Name)
	}
	return nil
}

func (p *SyncCompleted) Validate() error {
	if p.Files < 0 {
		return fieldErr("files", "must be >= 0, got %d", p.Files)
	}
	if p.Bytes < 0 {
		return fieldErr("bytes", "must be >= 0, got %d", p.Bytes)
	}
	return nil
}

func (p *SyncFailed) Validate() error {
	if err := checkNonEmpty("operation", p.Operation); err != nil {
		return err
	}
	return checkNonEmpty("error", p.Error)
}

func (t *Trainable) validate(prefix string) error {
	if len(t.Command) == 0 && t.Name == "" {
		return fieldErr(prefix+"name", "a trainable needs a registered name or a command")
	}
	for i, a := range t.Command {
		if i == 0 && a == "" {
			return fieldErr(prefix+"command", "the program must not be empty")
		}
	}
	for name, a := range t.Resources {
		if name == "" {
			return fieldErr(prefix+"resources", "a resource name must not be empty")
		}
		if a.Config == "" {
			if err := CheckResource(name, a.Value); err != nil {
				return fieldErr(prefix+"resources."+name, "%v", err)
			}
		}
	}
	return nil
}

// checkDirName rejects directory names that could escape the experiment
// directory.
func checkDirName(field, s string) error {
	if s == "" || s == "." || s == ".." || len(s) > 255 {
		return fieldErr(field, "%q is not a directory name", s)
	}
	for _, r := range s {
		if r == '/' || r == '\\' || r == 0 {
			return fieldErr(field, "%q must not contain '/', '\\' or NUL", s)
		}
	}
	return nil
}

// Validate checks the parts of a spec that every consumer relies on. The
// experiment file parser (internal/spec) checks more, with line numbers.
func (s *ExperimentSpec) Validate() error {
	if err := checkID("spec.name", s.Name); err != nil {
		return err
	}
	if err := s.Trainable.validate("spec.trainable."); err != nil {
		return err
	}
	if s.TuneConfig.NumSamples < -1 || s.TuneConfig.NumSamples == 0 {
		return fieldErr("spec.tune_config.num_samples", "must be >= 1 or -1, got %d", s.TuneConfig.NumSamples)
	}
	if s.TuneConfig.Mode != "" {
		if err := checkOneOf("spec.tune_config.mode", s.TuneConfig.Mode, "min", "max"); err != nil {
			return err
		}
	}
	if err := s.TuneConfig.checkObjectives(); err != nil {
		return err
	}
	if s.TuneConfig.MaxConcurrentTrials < 0 {
		return fieldErr("spec.tune_config.max_concurrent_trials", "must be >= 0, got %d", s.TuneConfig.MaxConcurrentTrials)
	}
	if s.RunConfig.FailureConfig.MaxFailures < -1 {
		return fieldErr("spec.run_config.failure_config.max_failures", "must be >= -1, got %d", s.RunConfig.FailureConfig.MaxFailures)
	}
	if ff := s.RunConfig.FailureConfig.FailFast; ff != FailFastOff && ff != FailFastOn && ff != FailFastRaise {
		return fieldErr("spec.run_config.failure_config.fail_fast", "must be false, true or \"raise\", got %q", string(ff))
	}
	return nil
}

func sortStrings(s []string) { sort.Strings(s) }
