package syncer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/state"
)

// submitLatestCheck queues, after a failed attempt of a trial that will
// be retried, a check that the retry finds the checkpoint it resumes from
// (the trial's latest) in the Object Store. Runners cannot read storage,
// so the syncer mends what it can:
//
//   - a staged copy that is missing or holds other bytes is staged again
//     from storage when the checkpoint was persisted (ckpt.Restage: the
//     runner's digest check accepts it for the original);
//   - one that was removed, or holds other bytes, and was never persisted
//     is gone everywhere: it is marked so (ckpt.MarkGone), and the runner
//     resuming from it fails with ckpt.ErrGone and the reason.
//
// A copy merely not found (a replica lagging, a bucket not answering) is
// left alone: it may be there.
func (w *writer) submitLatestCheck(ctx context.Context, t *state.Trial) {
	c := t.LatestCheckpoint()
	if c == nil {
		return
	}
	ref, object, persisted := *c, objectOf(t, *c), t.Persisted[c.Name]
	trial, prefix := t.ID, t.DirName+"/"+c.Name+"/"
	key := "latest/" + trial + "/" + c.Name
	if !w.claim(key) {
		return
	}
	w.ops.Submit(key, func(ctx context.Context) error {
		defer w.release(key)
		err := w.sync.Run(ctx, "check the staged copy of "+trial+"/"+ref.Name, func(ctx context.Context) error {
			return w.mendStaged(ctx, object, ref.Digest, prefix, persisted)
		})
		if err != nil {
			w.log.Error().Err(err).Str("trial", trial).Str("checkpoint", ref.Name).Msg("the checkpoint a retry resumes from may be missing")
		}
		return err
	})
}

// mendStaged makes object a usable copy of the checkpoint with digest
// want, or marks it gone (see submitLatestCheck).
func (w *writer) mendStaged(ctx context.Context, object, want, prefix string, persisted bool) error {
	obs, err := ckpt.Store(ctx, w.s.bus.JS, w.exp)
	if err != nil {
		return err
	}
	info, err := ckpt.Info(ctx, obs, object)
	var why string
	switch {
	case err == nil && (ckpt.Holds(info, want) || ckpt.IsGone(info)):
		return nil
	case err == nil:
		why = "its staged copy holds other bytes"
	case errors.Is(err, ckpt.ErrRemoved):
		why = "its staged copy was removed"
	case errors.Is(err, jetstream.ErrObjectNotFound):
		if !persisted {
			return nil // perhaps a replica lagging: not proof that it is gone
		}
		why = "its staged copy is not found"
	default:
		return err
	}
	if !persisted {
		w.log.Error().Str("object", object).Str("reason", why).Msg("a checkpoint a retry resumes from is gone everywhere")
		return ckpt.MarkGone(ctx, obs, object, why+" and it was never persisted to storage")
	}
	w.log.Warn().Str("object", object).Str("reason", why).Msg("staging the checkpoint again from storage")
	return w.restage(ctx, obs, object, want, prefix)
}

// restage stages the checkpoint persisted under prefix again as object.
func (w *writer) restage(ctx context.Context, obs jetstream.ObjectStore, object, want, prefix string) error {
	tmp, err := os.MkdirTemp(w.s.cfg.WorkDir, "restage-")
	if err != nil {
		return fmt.Errorf("restage %s: %w", object, err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "checkpoint")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("restage %s: %w", object, err)
	}
	if err := blobsync.SyncDown(ctx, w.bucket, prefix, dir, nil); err != nil {
		return fmt.Errorf("restage %s from storage: %w", object, err)
	}
	if _, err := ckpt.Restage(ctx, obs, object, dir, want); err != nil {
		return err
	}
	return nil
}
