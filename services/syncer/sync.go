package syncer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/metrics"
	"github.com/tunejet/tunejet/internal/storage"
)

// syncUp makes storage reflect the fold: new params.json files, the
// changed result files, then the snapshot; then it deletes the checkpoints
// retention dropped (no durable snapshot refers to them any more), acks
// the log up to the snapshot and announces it. A sync that fails even
// after its retries is announced and tried again on the next period.
func (w *writer) syncUp(ctx context.Context) error {
	if w.st.Session == "" {
		return nil
	}
	start := time.Now()
	name := storage.StateFileName(w.st.Session)
	snap, err := w.st.Snapshot()
	if err != nil {
		w.log.Error().Err(err).Msg("snapshot")
		return err
	}
	uploads, err := w.files.uploads(w.st, w.files.params, w.files.changed)
	if err != nil {
		return err
	}
	var bytes atomic.Int64
	err = w.sync.Run(ctx, "sync up experiment "+w.exp, func(ctx context.Context) error {
		n, err := w.upload(ctx, uploads)
		bytes.Store(n)
		if err != nil {
			return err // the snapshot is written only after everything it counts
		}
		bytes.Add(int64(len(snap)))
		return storage.WriteAtomic(ctx, w.bucket, name, snap)
	})
	if err != nil {
		w.tell.failure(ctx, "sync up experiment "+w.exp, err, w.sync.Config().MaxRetries+1)
		return err
	}
	seq := w.st.LastSeq
	w.files.synced()
	w.dirty = false
	w.deleteDropped(ctx)
	if w.lastMsg != nil {
		if err := w.lastMsg.Ack(ctx); err != nil {
			w.log.Warn().Err(err).Msg("ack synced events")
		}
	}
	w.tell.announce(ctx, &events.SyncCompleted{Seq: seq, Snapshot: name, Files: len(uploads) + 1, Bytes: bytes.Load(), DurationS: time.Since(start).Seconds()})
	w.files.forgetFinished(w.st)
	w.mirror.up(ctx, false)
	if last, err := w.s.bus.LastSeq(ctx, events.ExperimentSubjects(w.exp)); err == nil && last >= seq {
		metrics.SyncLag.WithLabelValues(w.exp).Set(float64(last - seq))
	}
	return nil
}

// uploadFinished uploads the result files (and params.json, if still
// pending) of the trials that ended, and drops their staging: their files
// are final, so storage need not wait for the next sync, and the final
// sync at the end of the experiment has only the last trials left to
// write. One attempt, bounded by the sync timeout: what fails stays
// staged and goes with the next sync. The snapshot is left to the sync;
// files ahead of it are cut back to it if a syncer resumes from it (see
// staging.filesOf).
func (w *writer) uploadFinished(ctx context.Context) {
	ids := w.files.finished
	w.files.finished = nil
	params, changed := map[string]bool{}, map[string]bool{}
	for _, id := range ids {
		if t := w.st.Trials[id]; t == nil || !t.Finished() {
			continue // brought back by a restore
		}
		if w.files.params[id] {
			params[id] = true
		}
		if w.files.changed[id] && w.files.trials[id] != nil {
			changed[id] = true
		}
	}
	if len(params)+len(changed) == 0 {
		return
	}
	uploads, err := w.files.uploads(w.st, params, changed)
	if err != nil {
		w.log.Warn().Err(err).Msg("stage the files of a finished trial; the next sync writes them")
		return
	}
	uctx, cancel := context.WithTimeout(ctx, w.sync.Config().SyncTimeout)
	defer cancel()
	if _, err := w.upload(uctx, uploads); err != nil {
		w.log.Warn().Err(err).Msg("upload the files of finished trials; the next sync writes them")
		return
	}
	for id := range params {
		delete(w.files.params, id)
	}
	for id := range changed {
		delete(w.files.changed, id)
		w.files.drop(id)
	}
}

// upload writes every upload's content to storage under its key,
// uploadConcurrency at once, and returns how many bytes it wrote.
func (w *writer) upload(ctx context.Context, uploads map[string]func() ([]byte, error)) (int64, error) {
	var bytes atomic.Int64
	err := parallel(ctx, uploadConcurrency, uploads, func(ctx context.Context, key string, data func() ([]byte, error)) error {
		b, err := data()
		if err != nil {
			return err
		}
		bytes.Add(int64(len(b)))
		return storage.WriteAtomic(ctx, w.bucket, key, b)
	})
	return bytes.Load(), err
}

// deleteDropped removes from storage the persisted checkpoints retention
// dropped, now that the snapshot just written no longer refers to them.
func (w *writer) deleteDropped(ctx context.Context) {
	for _, j := range deletions(w.st, w.store.busy) {
		t, c := w.st.Trials[j.trial], *j.ckpt
		err := w.sync.Run(ctx, "delete "+c.Name, func(ctx context.Context) error {
			if err := blobsync.Delete(ctx, w.bucket, t.DirName+"/"+c.Name+"/"); err != nil {
				return err
			}
			return w.removeLocalDir(t.DirName + "/" + c.Name)
		})
		if err != nil {
			w.log.Error().Err(err).Str("trial", t.ID).Str("checkpoint", c.Name).Msg("delete a dropped checkpoint; will retry")
			continue
		}
		w.mirror.delete(ctx, t.DirName+"/"+c.Name)
		_ = w.tell.once(ctx, t.ID+"."+c.Name+".deleted", &events.CheckpointDeleted{TrialID: t.ID, Name: c.Name, Reason: "num_to_keep"})
	}
}

// removeLocalDir removes a folder a delete left empty on a filesystem
// storage path (buckets have no folders).
func (w *writer) removeLocalDir(rel string) error {
	root, err := storage.LocalPath(w.storagePath)
	if err != nil || storage.IsURL(root) {
		return nil
	}
	dir := (&storage.Dir{Root: filepath.Join(root, w.exp)})
	p, err := dir.Path(rel)
	if err != nil {
		return err
	}
	return os.RemoveAll(p)
}

// uploadConcurrency is how many files a sync uploads at once.
const uploadConcurrency = 16

// parallel runs fn for every item, at most n at a time, and returns the
// first error.
func parallel[T any](ctx context.Context, n int, items map[string]T, fn func(context.Context, string, T) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for key, item := range items {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, key, item); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}
