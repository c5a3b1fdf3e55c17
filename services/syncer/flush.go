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
	for id := range w.changed {
		if err := w.files[id].flush(); err != nil {
			return err
		}
	}
	uploads := w.uploads()
	var bytes atomic.Int64
	err = w.sync.Run(ctx, "sync up experiment "+w.exp, func(ctx context.Context) error {
		bytes.Store(0)
		if err := parallel(ctx, uploadConcurrency, uploads, func(ctx context.Context, key string, data func() ([]byte, error)) error {
			b, err := data()
			if err != nil {
				return err
			}
			bytes.Add(int64(len(b)))
			return storage.WriteAtomic(ctx, w.bucket, key, b)
		}); err != nil {
			return err // the snapshot is written only after everything it counts
		}
		bytes.Add(int64(len(snap)))
		return storage.WriteAtomic(ctx, w.bucket, name, snap)
	})
	if err != nil {
		w.announceFailure(ctx, "sync up experiment "+w.exp, err, w.sync.Config().MaxRetries+1)
		return err
	}
	seq := w.st.LastSeq
	w.params, w.changed, w.dirty = map[string]bool{}, map[string]bool{}, false
	w.deleteDropped(ctx)
	if w.lastMsg != nil {
		if err := w.lastMsg.Ack(); err != nil {
			w.log.Warn().Err(err).Msg("ack synced events")
		}
	}
	w.announce(ctx, &events.SyncCompleted{Seq: seq, Snapshot: name, Files: len(uploads) + 1, Bytes: bytes.Load(), DurationS: time.Since(start).Seconds()})
	w.forgetFinished()
	if last, err := w.s.bus.LastSeq(ctx, events.ExperimentSubjects(w.exp)); err == nil && last >= seq {
		metrics.SyncLag.WithLabelValues(w.exp).Set(float64(last - seq))
	}
	return nil
}

// uploads lists what this sync writes besides the snapshot, by key; the
// content is read when the upload runs, so a retry reads it again.
func (w *writer) uploads() map[string]func() ([]byte, error) {
	return w.uploadsOf(w.params, w.changed)
}

// uploadsOf is uploads for the trials in params (params.json) and changed
// (result files).
func (w *writer) uploadsOf(params, changed map[string]bool) map[string]func() ([]byte, error) {
	out := map[string]func() ([]byte, error){}
	for id := range params {
		t := w.st.Trials[id]
		out[t.DirName+"/"+storage.ParamsFile] = func() ([]byte, error) { return storage.Params(t.Config) }
	}
	for id := range changed {
		t, f := w.st.Trials[id], w.files[id]
		for _, name := range storage.ResultFiles {
			path := filepath.Join(f.dir, name)
			if info, err := os.Stat(path); err != nil || info.Size() == 0 {
				continue
			}
			out[t.DirName+"/"+name] = func() ([]byte, error) { return os.ReadFile(path) }
		}
	}
	return out
}

// deleteDropped removes from storage the persisted checkpoints retention
// dropped, now that the snapshot just written no longer refers to them.
func (w *writer) deleteDropped(ctx context.Context) {
	for _, j := range deletions(w.st, w.busy) {
		t, c := w.st.Trials[j.trial], j.ckpt
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
		_ = w.announceOnce(ctx, t.ID+"."+c.Name+".deleted", &events.CheckpointDeleted{TrialID: t.ID, Name: c.Name, Reason: "num_to_keep"})
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

// forgetFinished drops the staging of trials that have ended and are synced.
func (w *writer) forgetFinished() {
	for id, f := range w.files {
		if t := w.st.Trials[id]; t != nil && t.Finished() {
			_ = f.close()
			_ = os.RemoveAll(f.dir)
			delete(w.files, id)
		}
	}
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

// announce publishes what the syncer did.
func (w *writer) announce(ctx context.Context, p events.Payload) { _ = w.announceOnce(ctx, "", p) }

// announceOnce publishes with a deterministic id (when not empty), so
// announcing the same thing twice stores it once. It returns the failure
// it logs, for callers that must not go on unless the log has the event.
func (w *writer) announceOnce(ctx context.Context, id string, p events.Payload) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ev := w.s.bus.Event(w.exp, events.WriterSyncer, p)
	if id != "" {
		ev.ID = w.exp + "." + id
	}
	if _, err := w.s.bus.Publish(actx, ev); err != nil {
		w.log.Warn().Err(err).Str("type", p.Type()).Msg("announce")
		return err
	}
	return nil
}

func (w *writer) announceFailure(ctx context.Context, op string, err error, attempt int) {
	metrics.SyncFailures.WithLabelValues(w.exp).Inc()
	w.log.Error().Err(err).Str("operation", op).Msg("sync failed; it will be tried again")
	w.announce(ctx, &events.SyncFailed{Operation: op, Error: err.Error(), Attempt: attempt})
}
