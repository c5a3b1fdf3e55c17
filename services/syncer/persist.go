package syncer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"gocloud.dev/blob"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// persister copies what runners stage in the experiment's Object Store —
// checkpoints and artifact archives — into storage, one job at a time on
// its queue (blobsync.Queue), and removes the staged copies storage holds.
// Its methods are called from the writer's goroutine; its jobs run on the
// queue's, and share the bookkeeping below under mu.
type persister struct {
	exp     string
	log     zerolog.Logger
	bus     *bus.Bus
	bucket  *blob.Bucket // the experiment's part of storage
	sync    *blobsync.Syncer
	ops     *blobsync.Queue
	tell    announcer
	workDir string // where checkpoints are downloaded to be staged again

	mu        sync.Mutex
	artifacts map[string]artifactJob // staged artifacts not yet in storage, by object
	inflight  map[string]bool        // jobs queued or running, by key
	// persisted are staged copies this syncer put into storage.
	persisted map[string]bool
	staged    map[string][]string // staged checkpoint objects by trial, not removed yet
	latest    map[string]string   // each trial's latest checkpoint object, never removed
	// pinned are the donors' staged copies that PBT exploits resume from
	// (state.Experiment.PinnedObjects), never removed while pinned.
	pinned map[string]bool
	// failures counts lasting failures by persistence key; unpersistable
	// holds why the syncer gave a checkpoint up.
	failures      map[string]int
	unpersistable map[string]string
}

func newPersister(w *writer, ops *blobsync.Queue) *persister {
	return &persister{
		exp: w.exp, log: w.log, bus: w.s.bus, bucket: w.bucket, sync: w.sync, ops: ops, tell: w.tell, workDir: w.s.cfg.WorkDir,
		artifacts: map[string]artifactJob{}, inflight: map[string]bool{}, persisted: map[string]bool{},
		staged: map[string][]string{}, latest: map[string]string{}, failures: map[string]int{}, unpersistable: map[string]string{},
	}
}

// checkpoint queues the persistence of a checkpoint of a storage path:
// copied from the Object Store into <trial_dir>/<name>/ and checked
// against its digest, then announced; the trial's staged copies that
// storage holds are then removed, except its latest (see removeStagedOf).
func (p *persister) checkpoint(ctx context.Context, storagePath string, t *state.Trial, c events.CheckpointRef) {
	object := objectOf(t, c)
	trial, dir := t.ID, t.DirName
	path := storage.Join(storagePath, p.exp, dir, c.Name)
	key := persistKey(t, c)
	p.mu.Lock()
	if !slices.Contains(p.staged[trial], object) {
		p.staged[trial] = append(p.staged[trial], object) // kept until known persisted
	}
	copied, abandoned := p.persisted[object], p.unpersistable[key] != ""
	p.mu.Unlock()
	if copied || abandoned || !p.claim(key) {
		return // copied already (its announcement is on its way), given up on, or queued
	}
	op := "persist " + trial + "/" + c.Name
	p.ops.Submit(key, func(ctx context.Context) error {
		defer p.release(key)
		if err := p.copyCheckpoint(ctx, key, op, object, c.Digest, dir+"/"+c.Name+"/"); err != nil {
			return err
		}
		// The staged copy may go only once the log says storage holds it.
		ev := &events.CheckpointPersisted{TrialID: trial, Name: c.Name, Path: path, Size: c.Size, Digest: c.Digest}
		id := strings.TrimPrefix(c.Digest, "sha256:")
		id = trial + "." + c.Name + ".persisted." + id[:min(16, len(id))]
		if err := p.tell.once(ctx, id, ev); err != nil {
			return err
		}
		p.mu.Lock()
		p.persisted[object] = true
		p.mu.Unlock()
		p.removeStagedOf(ctx, trial)
		return nil
	})
}

// copyCheckpoint copies a staged checkpoint into storage under prefix,
// retried by the syncer's policy; a failure is announced (see failed).
func (p *persister) copyCheckpoint(ctx context.Context, key, op, object, digest, prefix string) error {
	var lasting error // a failure trying again at once cannot mend
	err := p.sync.Run(ctx, op, func(ctx context.Context) error {
		lasting = nil
		err := p.copyArchive(ctx, object, digest, prefix, nil)
		if errors.Is(err, ckpt.ErrRemoved) {
			// Only a syncer removes a staged copy, after persisting it:
			// an earlier syncer did, and this one had not seen it yet.
			// A copy merely not found (a lagging replica, after
			// ckpt.Open looked again) is an error, and tried again.
			return nil
		}
		if errors.Is(err, ckpt.ErrDigestMismatch) || errors.Is(err, ckpt.ErrGone) {
			lasting = err
			return nil
		}
		return err
	})
	if err == nil {
		err = lasting
	}
	if err != nil {
		p.failed(ctx, key, op, err, lasting != nil)
	}
	return err
}

// giveUpAfter is how many times the persistence of a checkpoint may fail
// in a way trying again at once cannot mend (its staged copy is other
// bytes than its event names, or marked gone) before the syncer stops
// trying: a replica that had not applied the newest copy may have answered
// the first times. Other failures (storage or the Object Store not
// answering) are tried again as long as the experiment runs.
const giveUpAfter = 3

// failed announces a failed persistence and, once it has failed for good
// giveUpAfter times, gives the checkpoint up: it is not persisted, the
// syncer stops trying (until it restarts), and the final state no longer
// waits for it.
func (p *persister) failed(ctx context.Context, key, op string, err error, lasting bool) {
	p.mu.Lock()
	if lasting {
		p.failures[key]++
	}
	gaveUp := lasting && p.failures[key] >= giveUpAfter
	if gaveUp {
		p.unpersistable[key] = err.Error()
	}
	p.mu.Unlock()
	if gaveUp {
		p.tell.gaveUp(ctx, op, err, giveUpAfter)
		return
	}
	p.tell.failure(ctx, op, err, p.sync.Config().MaxRetries+1)
}

// spare records object as the trial's latest staged checkpoint, which
// removeStagedOf keeps.
func (p *persister) spare(trial, object string) {
	p.mu.Lock()
	p.latest[trial] = object
	p.mu.Unlock()
}

// pin sets the staged copies that exploits resume from: removeStagedOf
// keeps them.
func (p *persister) pin(objects []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(objects) == 0 && len(p.pinned) == 0 {
		return
	}
	p.pinned = make(map[string]bool, len(objects))
	for _, o := range objects {
		p.pinned[o] = true
	}
}

// removeStagedOf removes the trial's staged copies that this syncer put
// into storage, except the trial's latest checkpoint and the ones an
// exploit resumes another trial from, whatever order the copies were
// persisted in: an older checkpoint persisted again after a newer one must
// not take the newer one's copy with it.
func (p *persister) removeStagedOf(ctx context.Context, trial string) {
	p.mu.Lock()
	var done, keep []string
	for _, o := range p.staged[trial] {
		if p.persisted[o] && o != p.latest[trial] && !p.pinned[o] {
			done = append(done, o)
		} else {
			keep = append(keep, o)
		}
	}
	p.staged[trial] = keep
	p.mu.Unlock()
	p.removeStaged(ctx, done)
}

// artifactJob is a staged artifact archive not yet in storage, and the
// trial folder it goes to.
type artifactJob struct {
	dir string
	a   *events.TrialArtifacts
}

// trialFileNames are the trial folder's own files, which the syncer writes
// (result files grow in place on a file system): an artifact of the same
// name does not replace them.
var trialFileNames = map[string]bool{
	storage.ResultFile: true, storage.ProgressFile: true, storage.ErrorFile: true, storage.ParamsFile: true,
}

// copyArtifacts queues the copy of staged artifacts into the trial folder
// dir; until it succeeds the archive stays in p.artifacts and each sync
// submits it again (resubmit).
func (p *persister) copyArtifacts(ctx context.Context, dir string, a *events.TrialArtifacts) {
	p.mu.Lock()
	p.artifacts[a.Object] = artifactJob{dir: dir, a: a}
	p.mu.Unlock()
	key := "artifacts/" + a.Object
	if !p.claim(key) {
		return
	}
	op := "sync artifacts of " + a.TrialID
	p.ops.Submit(key, func(ctx context.Context) error {
		defer p.release(key)
		err := p.sync.Run(ctx, op, func(ctx context.Context) error {
			return p.copyArchive(ctx, a.Object, a.Digest, dir+"/", trialFileNames)
		})
		if err != nil {
			p.tell.failure(ctx, op, err, p.sync.Config().MaxRetries+1)
			return err
		}
		p.mu.Lock()
		delete(p.artifacts, a.Object)
		p.mu.Unlock()
		p.removeStaged(ctx, []string{a.Object})
		return nil
	})
}

// resubmit queues again what earlier attempts failed to persist: kept
// checkpoints the fold does not know as persisted, and artifact archives
// not copied yet.
func (p *persister) resubmit(ctx context.Context, st *state.Experiment) {
	for _, t := range st.TrialList() {
		for _, c := range t.Checkpoints {
			if !t.Persisted[c.Name] {
				p.checkpoint(ctx, st.StoragePath, t, c)
			}
		}
	}
	p.mu.Lock()
	jobs := make([]artifactJob, 0, len(p.artifacts))
	for _, j := range p.artifacts {
		jobs = append(jobs, j)
	}
	p.mu.Unlock()
	for _, j := range jobs {
		p.copyArtifacts(ctx, j.dir, j.a)
	}
}

// complete reports whether storage holds every kept checkpoint of st (but
// those given up on) and every staged artifact archive.
func (p *persister) complete(st *state.Experiment) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range st.TrialList() {
		for _, c := range t.Checkpoints {
			if !t.Persisted[c.Name] && p.unpersistable[persistKey(t, c)] == "" {
				return false
			}
		}
	}
	return len(p.artifacts) == 0
}

// flush waits for every job queued so far and returns their failures.
func (p *persister) flush(ctx context.Context) error { return p.ops.Flush(ctx) }

// claim marks a job as queued; false if it already is.
func (p *persister) claim(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight[key] {
		return false
	}
	p.inflight[key] = true
	return true
}

func (p *persister) release(key string) {
	p.mu.Lock()
	delete(p.inflight, key)
	p.mu.Unlock()
}

// busy reports whether a job is queued or running.
func (p *persister) busy(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight[key]
}
