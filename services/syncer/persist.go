package syncer

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/metrics"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// submitCheckpoint queues the persistence of a checkpoint: copied from the
// Object Store into <trial_dir>/<name>/ and checked against its digest,
// then announced; the trial's staged copies that storage holds are then
// removed, except its latest (see removeStagedOf).
func (w *writer) submitCheckpoint(ctx context.Context, t *state.Trial, c events.CheckpointRef) {
	object := objectOf(t, c)
	trial, dir, path := t.ID, t.DirName, w.checkpointPath(t, c.Name)
	key := persistKey(t, c)
	w.mu.Lock()
	if !slices.Contains(w.staged[trial], object) {
		w.staged[trial] = append(w.staged[trial], object) // kept until known persisted
	}
	copied, abandoned := w.persistedObjects[object], w.unpersistable[key] != ""
	w.mu.Unlock()
	if copied || abandoned || !w.claim(key) {
		return // copied already (its announcement is on its way), given up on, or queued
	}
	op := "persist " + trial + "/" + c.Name
	w.ops.Submit(key, func(ctx context.Context) error {
		defer w.release(key)
		var lasting error // a failure trying again at once cannot mend
		err := w.sync.Run(ctx, op, func(ctx context.Context) error {
			lasting = nil
			err := w.copyArchive(ctx, object, c.Digest, dir+"/"+c.Name+"/")
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
			w.persistFailed(ctx, key, op, err, lasting != nil)
			return err
		}
		// The staged copy may go only once the log says storage holds it.
		ev := &events.CheckpointPersisted{TrialID: trial, Name: c.Name, Path: path, Size: c.Size, Digest: c.Digest}
		id := strings.TrimPrefix(c.Digest, "sha256:")
		id = trial + "." + c.Name + ".persisted." + id[:min(16, len(id))]
		if err := w.announceOnce(ctx, id, ev); err != nil {
			return err
		}
		w.mu.Lock()
		w.persistedObjects[object] = true
		w.mu.Unlock()
		w.removeStagedOf(ctx, trial)
		return nil
	})
}

// giveUpAfter is how many times the persistence of a checkpoint may fail
// in a way trying again at once cannot mend (its staged copy is other
// bytes than its event names, or marked gone) before the syncer stops
// trying: a replica that had not applied the newest copy may have answered
// the first times. Other failures (storage or the Object Store not
// answering) are tried again as long as the experiment runs.
const giveUpAfter = 3

// persistFailed announces a failed persistence and, once it has failed
// for good giveUpAfter times, gives the checkpoint up: it is not
// persisted, the syncer stops trying (until it restarts), and the final
// state no longer waits for it.
func (w *writer) persistFailed(ctx context.Context, key, op string, err error, lasting bool) {
	w.mu.Lock()
	if lasting {
		w.persistFailures[key]++
	}
	gaveUp := lasting && w.persistFailures[key] >= giveUpAfter
	if gaveUp {
		w.unpersistable[key] = err.Error()
	}
	w.mu.Unlock()
	if !gaveUp {
		w.announceFailure(ctx, op, err, w.sync.Config().MaxRetries+1)
		return
	}
	metrics.SyncFailures.WithLabelValues(w.exp).Inc()
	w.log.Error().Err(err).Str("operation", op).Msg("the checkpoint cannot be persisted; gave up on it")
	w.announce(ctx, &events.SyncFailed{Operation: op, Error: fmt.Sprintf("gave up after %d tries, the checkpoint is not persisted: %v", giveUpAfter, err), Attempt: giveUpAfter})
}

// spare records object as the trial's latest staged checkpoint, which
// removeStagedOf keeps.
func (w *writer) spare(trial, object string) {
	w.mu.Lock()
	w.latest[trial] = object
	w.mu.Unlock()
}

// removeStagedOf removes the trial's staged copies that this syncer put
// into storage, except the trial's latest checkpoint, whatever order the
// copies were persisted in: an older checkpoint persisted again after a
// newer one must not take the newer one's copy with it.
func (w *writer) removeStagedOf(ctx context.Context, trial string) {
	w.mu.Lock()
	var done, keep []string
	for _, o := range w.staged[trial] {
		if w.persistedObjects[o] && o != w.latest[trial] {
			done = append(done, o)
		} else {
			keep = append(keep, o)
		}
	}
	w.staged[trial] = keep
	w.mu.Unlock()
	w.removeStaged(ctx, done)
}

// submitArtifacts queues the copy of staged artifacts into the trial dir;
// until it succeeds the archive stays in w.artifacts and each sync
// submits it again.
func (w *writer) submitArtifacts(ctx context.Context, t *state.Trial, p *events.TrialArtifacts) {
	dir := t.DirName
	w.mu.Lock()
	w.artifacts[p.Object] = artifactJob{trial: t, p: p}
	w.mu.Unlock()
	key := "artifacts/" + p.Object
	if !w.claim(key) {
		return
	}
	w.ops.Submit(key, func(ctx context.Context) error {
		defer w.release(key)
		err := w.sync.Run(ctx, "sync artifacts of "+p.TrialID, func(ctx context.Context) error {
			return w.copyArchive(ctx, p.Object, p.Digest, dir+"/")
		})
		if err != nil {
			w.announceFailure(ctx, "sync artifacts of "+p.TrialID, err, w.sync.Config().MaxRetries+1)
			return err
		}
		w.mu.Lock()
		delete(w.artifacts, p.Object)
		w.mu.Unlock()
		w.removeStaged(ctx, []string{p.Object})
		return nil
	})
}

// artifactJob is a staged artifact archive not yet in storage.
type artifactJob struct {
	trial *state.Trial
	p     *events.TrialArtifacts
}

// resubmit queues again what earlier attempts failed to persist: kept
// checkpoints the fold does not know as persisted, and artifact archives
// not copied yet.
func (w *writer) resubmit(ctx context.Context) {
	for _, t := range w.st.TrialList() {
		for _, c := range t.Checkpoints {
			if !t.Persisted[c.Name] {
				w.submitCheckpoint(ctx, t, c)
			}
		}
	}
	w.mu.Lock()
	jobs := make([]artifactJob, 0, len(w.artifacts))
	for _, j := range w.artifacts {
		jobs = append(jobs, j)
	}
	w.mu.Unlock()
	for _, j := range jobs {
		w.submitArtifacts(ctx, j.trial, j.p)
	}
}

// complete reports whether storage holds every kept checkpoint (but those
// given up on) and every staged artifact archive.
func (w *writer) complete() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.st.TrialList() {
		for _, c := range t.Checkpoints {
			if !t.Persisted[c.Name] && w.unpersistable[persistKey(t, c)] == "" {
				return false
			}
		}
	}
	return len(w.artifacts) == 0
}

// copyArchive streams a staged archive into storage under prefix,
// verifying its digest. Symlinks and folders have no place in a bucket and
// are skipped; an empty checkpoint stores nothing (its name is in the
// state).
//
// The bytes go from the Object Store straight into the storage writers,
// hashed once (by nats.go's Get, see ckpt.Walk). A file's writer is closed
// (on a bucket: its last part uploaded) while the next file streams, up to
// parallelCloses at once; copyArchive returns when every one is closed.
func (w *writer) copyArchive(ctx context.Context, object, digest, prefix string) error {
	obs, err := ckpt.Store(ctx, w.s.bus.JS, w.exp)
	if err != nil {
		return err
	}
	r, err := ckpt.Open(ctx, obs, object)
	if err != nil {
		return fmt.Errorf("read staged %s: %w", object, err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	closes := newCloser(parallelCloses)
	err = ckpt.Walk(r, digest, func(hdr *tar.Header, rel string, body io.Reader) error {
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		if err := closes.failed(); err != nil {
			return err
		}
		bw, err := w.bucket.NewWriter(ctx, prefix+rel, nil)
		if err != nil {
			return err
		}
		if _, err := io.Copy(bw, body); err != nil {
			bw.Close()
			return err
		}
		closes.close(bw)
		return nil
	})
	if err != nil {
		cancel() // a writer still closing publishes nothing
		closes.wait()
		return err
	}
	return closes.wait()
}

// parallelCloses bounds the storage writers of one archive closing at once.
const parallelCloses = 4

// closer closes writers in the background, a bounded number at once, and
// keeps the first error.
type closer struct {
	slots chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	err   error
}

func newCloser(n int) *closer { return &closer{slots: make(chan struct{}, n)} }

// close closes c in the background, waiting first for a free slot.
func (c *closer) close(wc io.Closer) {
	c.slots <- struct{}{}
	c.wg.Go(func() {
		defer func() { <-c.slots }()
		if err := wc.Close(); err != nil {
			c.mu.Lock()
			if c.err == nil {
				c.err = err
			}
			c.mu.Unlock()
		}
	})
}

// failed is the first error of a close so far.
func (c *closer) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// wait waits for every close and returns the first error.
func (c *closer) wait() error {
	c.wg.Wait()
	return c.failed()
}

// removeStaged deletes staged Object Store copies that storage now holds.
func (w *writer) removeStaged(ctx context.Context, objects []string) {
	if len(objects) == 0 {
		return
	}
	obs, err := ckpt.Store(ctx, w.s.bus.JS, w.exp)
	if err != nil {
		return
	}
	for _, o := range objects {
		if err := obs.Delete(ctx, o); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			w.log.Warn().Err(err).Str("object", o).Msg("remove a staged copy")
		}
	}
}

// checkpointPath is where a checkpoint lives in storage, as users see it.
func (w *writer) checkpointPath(t *state.Trial, name string) string {
	return storage.Join(w.st.StoragePath, w.exp, t.DirName, name)
}

// claim marks a persistence job as queued; false if it already is.
func (w *writer) claim(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inflight[key] {
		return false
	}
	w.inflight[key] = true
	return true
}

func (w *writer) release(key string) {
	w.mu.Lock()
	delete(w.inflight, key)
	w.mu.Unlock()
}

// busy reports whether a persistence job is queued or running.
func (w *writer) busy(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inflight[key]
}
