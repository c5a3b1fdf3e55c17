package syncer

import (
	"reflect"
	"strings"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/ckpt/direct"
	"github.com/tunejet/tunejet/internal/state"
)

// job is one thing storage needs because of an event. plan decides the
// jobs; the writer runs them (see do).
type job struct {
	kind  jobKind
	trial string // the trial's id, for a trial's job

	at        time.Time              // appendFailure: when the failure happened
	ckpt      *events.CheckpointRef  // persist, deleteCheckpoint: the checkpoint
	object    string                 // spare: the staged copy to keep
	copies    []stagedCopy           // checkResumable: the kept checkpoints, newest first
	artifacts *events.TrialArtifacts // copyArtifacts: the staged archive
}

// jobKind is what a job does.
type jobKind int

const (
	// snapshot: the fold changed, so the next sync writes a snapshot (and
	// acks the log up to it: nothing is acked before a durable snapshot
	// covers it).
	snapshot jobKind = iota + 1
	// syncNow: sync at once, not on the next period.
	syncNow
	// writeParams: the trial's params.json goes with the next sync.
	writeParams
	// appendResult: stage the trial's newest result as a result.json line
	// and a progress.csv row.
	appendResult
	// appendFailure: stage the trial's newest failure in error.txt.
	appendFailure
	// persist: copy a checkpoint from the Object Store into storage.
	persist
	// spare: the trial's latest checkpoint is object; its staged copy is
	// kept after it is persisted, since retries resume from it.
	spare
	// checkResumable: make sure a retry finds a staged checkpoint to resume
	// from (see persister.checkResumable).
	checkResumable
	// copyArtifacts: copy a staged artifact archive into the trial folder.
	copyArtifacts
	// uploadTrial: the trial ended; upload its files without waiting for
	// the next sync.
	uploadTrial
	// deleteCheckpoint: delete a dropped checkpoint from storage, now that
	// a durable snapshot no longer refers to it (see deletions).
	deleteCheckpoint
)

// stagedCopy is a kept checkpoint's staged copy in the Object Store.
type stagedCopy struct {
	ref       events.CheckpointRef
	object    string
	persisted bool // storage holds the checkpoint
}

// plan decides what ev requires of storage, given the state before it
// (prev, and before, the event's trial as it was: the fold changes trials
// in place) and after it (st). It is called only for an event that
// changed the fold, reads nothing but its arguments, and changes nothing.
func plan(prev, st *state.Experiment, before *state.Trial, ev *events.Event) []job {
	jobs := make([]job, 0, 4) // enough for any event but a restore
	if _, ok := ev.Data.(*events.ExperimentRestored); ok {
		jobs = restoredJobs(prev, st)
	}
	if _, ok := ev.Data.(*events.SyncCompleted); !ok {
		jobs = append(jobs, job{kind: snapshot})
	}
	t := st.Trials[ev.Trial()]
	switch p := ev.Data.(type) {
	case *events.TrialCreated:
		jobs = append(jobs, job{kind: writeParams, trial: p.TrialID})
	case *events.TrialReported:
		jobs = append(jobs, job{kind: appendResult, trial: p.TrialID})
	case *events.TrialCheckpointed:
		// A checkpoint carries the result it was reported with (the fold
		// takes both at once), so its row is written here.
		jobs = append(jobs, job{kind: appendResult, trial: p.TrialID})
		jobs = append(jobs, spareLatest(t)...)
		if !t.Persisted[p.Checkpoint.Name] {
			jobs = append(jobs, job{kind: persist, trial: p.TrialID, ckpt: &p.Checkpoint})
		}
	case *events.TrialStarted:
		// A retry may have resumed from an older checkpoint than the latest.
		jobs = append(jobs, spareLatest(t)...)
		if p.StageRestore {
			jobs = append(jobs, stageRestoreJobs(st, t, p)...)
		}
	case *events.TrialScheduled:
		jobs = append(jobs, exploitJobs(st, before, t, p)...)
	case *events.TrialArtifacts:
		jobs = append(jobs, job{kind: copyArtifacts, trial: p.TrialID, artifacts: p})
	case *events.ExperimentInterrupted:
		jobs = append(jobs, job{kind: syncNow})
	}
	if t == nil {
		return jobs
	}
	if before != nil && t.NumFailures > before.NumFailures {
		if !t.Finished() && len(t.Checkpoints) > 0 {
			jobs = append(jobs, job{kind: checkResumable, trial: t.ID, copies: keptNewestFirst(t)})
		}
		jobs = append(jobs, job{kind: appendFailure, trial: t.ID, at: ev.Time})
	}
	if t.Finished() && (before == nil || !before.Finished()) {
		jobs = append(jobs, job{kind: uploadTrial, trial: t.ID})
	}
	return jobs
}

// exploitJobs are what a PBT exploit's work requires: the trial's new
// config in params.json (Ray writes it at every start), and the donor's
// checkpoint staged for the runner that resumes from it (its staged copy
// may have gone once storage held it).
func exploitJobs(st *state.Experiment, before, t *state.Trial, p *events.TrialScheduled) []job {
	x := p.Exploit
	if x == nil || t == nil {
		return nil
	}
	var jobs []job
	if before == nil || !reflect.DeepEqual(before.Config, t.Config) {
		jobs = append(jobs, job{kind: writeParams, trial: t.ID})
	}
	if donor := st.Trials[x.Source]; donor != nil && !direct.Written(&x.Checkpoint) {
		// One in storage is staged only for a runner that cannot read
		// storage, when its start asks (stageRestoreJobs).
		jobs = append(jobs, job{kind: checkResumable, trial: donor.ID, copies: []stagedCopy{
			{ref: x.Checkpoint, object: objectOf(donor, x.Checkpoint), persisted: donor.Persisted[x.Checkpoint.Name]},
		}})
	}
	return jobs
}

// restoredJobs are what a restored state, which replaced prev, requires:
// trials it created (restart_errored's new trials, which no trial.created
// event announces) or gave another config (re-specified object
// references) get their params.json, and every trial's latest checkpoint
// is spared.
func restoredJobs(prev, st *state.Experiment) []job {
	var jobs []job
	for _, t := range st.TrialList() {
		if old := prev.Trials[t.ID]; old == nil || old.DirName != t.DirName || !reflect.DeepEqual(old.Config, t.Config) {
			jobs = append(jobs, job{kind: writeParams, trial: t.ID})
		}
	}
	return append(jobs, spareAll(st)...)
}

// spareAll spares every trial's latest checkpoint.
func spareAll(st *state.Experiment) []job {
	var jobs []job
	for _, t := range st.TrialList() {
		jobs = append(jobs, spareLatest(t)...)
	}
	return jobs
}

// spareLatest spares the trial's latest checkpoint, if it has one.
func spareLatest(t *state.Trial) []job {
	c := t.LatestCheckpoint()
	if c == nil {
		return nil
	}
	return []job{{kind: spare, trial: t.ID, object: objectOf(t, *c)}}
}

// keptNewestFirst are the trial's kept staged checkpoints, newest first:
// the order a runner tries them in to resume. Checkpoints in storage have
// no staged copy to check (stageRestoreJobs stages one on request).
func keptNewestFirst(t *state.Trial) []stagedCopy {
	copies := make([]stagedCopy, 0, len(t.Checkpoints))
	for i := len(t.Checkpoints) - 1; i >= 0; i-- {
		c := t.Checkpoints[i]
		if !direct.Written(&c) {
			copies = append(copies, stagedCopy{c, objectOf(t, c), t.Persisted[c.Name]})
		}
	}
	return copies
}

// stageRestoreJobs stage in the Object Store the checkpoint in storage
// that an attempt resumes from on a runner that cannot read storage
// (trial.started's stage_restore): the trial's own, or the PBT donor's
// ("<donor>/<name>").
func stageRestoreJobs(st *state.Experiment, t *state.Trial, p *events.TrialStarted) []job {
	if t == nil {
		return nil
	}
	owner, name := t, p.RestoredFrom
	if donor, n, ok := strings.Cut(p.RestoredFrom, "/"); ok {
		owner, name = st.Trials[donor], n
	}
	var ref *events.CheckpointRef
	if r := t.ResumeFrom; r != nil && r.Checkpoint.Name == name && owner != nil && r.Source == owner.ID {
		ref = &r.Checkpoint
	} else if owner != nil {
		for i := range owner.Checkpoints {
			if owner.Checkpoints[i].Name == name {
				ref = &owner.Checkpoints[i]
			}
		}
	}
	if ref == nil || !direct.Written(ref) {
		return nil
	}
	return []job{{kind: checkResumable, trial: owner.ID, copies: []stagedCopy{{ref: *ref, object: direct.StorageCopyObject(ref), persisted: true}}}}
}

// objectOf is the staged object of a trial's checkpoint.
func objectOf(t *state.Trial, c events.CheckpointRef) string {
	if direct.Written(&c) {
		return direct.StorageCopyObject(&c)
	}
	if c.Object != "" {
		return c.Object
	}
	return ckpt.LegacyObjectName(t.ID, c.Name)
}

// persistKey names the persistence of one checkpoint's staged copy: two
// attempts' checkpoints of one name are other bytes (a retry that resumed
// from an older checkpoint makes the names again).
func persistKey(t *state.Trial, c events.CheckpointRef) string {
	return "checkpoint/" + objectOf(t, c)
}

// deletions are the dropped checkpoints a durable snapshot lets go, by
// trial: pushed out by retention and persisted, unless busy says their
// persistence is queued or running (a later sync deletes them).
func deletions(st *state.Experiment, busy func(key string) bool) []job {
	var jobs []job
	for _, t := range st.TrialList() {
		for _, c := range t.Dropped {
			if t.Persisted[c.Name] && !busy(persistKey(t, c)) {
				jobs = append(jobs, job{kind: deleteCheckpoint, trial: t.ID, ckpt: &c})
			}
		}
	}
	return jobs
}
