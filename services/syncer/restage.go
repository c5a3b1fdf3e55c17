package syncer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/ckpt/direct"
)

// checkResumable queues, after a failed attempt of a trial that will
// be retried, a check that the retry finds a checkpoint to resume from in
// the Object Store. Runners cannot read storage, so the syncer mends what
// it can, going through checks — the trial's kept checkpoints, newest
// first — until one is usable (a runner resumes from the newest usable
// one):
//
//   - a staged copy that was removed (only a syncer removes one, once
//     storage holds it), is missing or holds other bytes is staged again
//     from storage when the checkpoint was persisted (ckpt.Restage: the
//     runner's digest check accepts it for the original);
//   - one that holds other bytes and was never persisted is gone
//     everywhere: it is marked so (ckpt.MarkGone), and a runner
//     skips it, or, when no older one is usable, fails with ckpt.ErrGone
//     and the reason.
//
// A copy merely not found (a replica lagging, a bucket not answering, or
// an event that lied about it) is left alone: it may be there, and the
// older ones are checked too.
func (p *persister) checkResumable(ctx context.Context, dir, trial string, checks []stagedCopy) {
	if len(checks) == 0 {
		return
	}
	key := "latest/" + trial + "/" + checks[0].ref.Name
	if !p.claim(key) {
		return
	}
	p.ops.Submit(key, func(ctx context.Context) error {
		defer p.release(key)
		for _, c := range checks {
			var usable bool
			err := p.sync.Run(ctx, "check the staged copy of "+trial+"/"+c.ref.Name, func(ctx context.Context) (err error) {
				usable, err = p.mendStaged(ctx, c, dir+"/"+c.ref.Name+"/")
				return err
			})
			if err != nil {
				p.log.Error().Err(err).Str("trial", trial).Str("checkpoint", c.ref.Name).Msg("the checkpoint a retry resumes from may be missing")
				return err
			}
			if usable {
				return nil
			}
		}
		return nil
	})
}

// mendStaged makes object a usable copy of the checkpoint with digest
// want, or marks it gone (see checkResumable); it reports whether a
// usable copy is there now.
func (p *persister) mendStaged(ctx context.Context, c stagedCopy, prefix string) (bool, error) {
	object, want, persisted := c.object, c.ref.Digest, c.persisted
	obs, err := p.objectStore(ctx)
	if err != nil {
		return false, err
	}
	info, err := ckpt.Info(ctx, obs, object)
	var why string
	switch {
	case err == nil && ckpt.Holds(info, want):
		return true, nil
	case err == nil && ckpt.IsGone(info):
		return false, nil
	case err == nil:
		why = "its staged copy holds other bytes"
	case errors.Is(err, ckpt.ErrRemoved):
		// Only a syncer removes a staged copy, once storage holds it; the
		// log may not have told this one yet.
		why, persisted = "its staged copy was removed", true
	case errors.Is(err, ckpt.ErrObjectNotFound):
		if !persisted {
			return false, nil // perhaps a replica lagging: not proof that it is gone
		}
		why = "its staged copy is not found"
	default:
		return false, err
	}
	if !persisted {
		p.log.Error().Str("object", object).Str("reason", why).Msg("a checkpoint a retry may resume from is gone everywhere")
		return false, ckpt.MarkGone(ctx, obs, object, why+" and it was never persisted to storage")
	}
	if direct.Written(&c.ref) {
		p.log.Info().Str("object", object).Str("location", c.ref.Location).Msg("staging a checkpoint in storage for a runner that cannot read storage")
		return p.stageDirect(ctx, obs, object, &c.ref)
	}
	p.log.Warn().Str("object", object).Str("reason", why).Msg("staging the checkpoint again from storage")
	return true, p.restage(ctx, obs, object, want, prefix)
}

// stageDirect stages the checkpoint in storage ref as object, checked
// against its manifest on the way. A folder missing, incomplete or changed
// since its event is marked gone: the runner's next attempt resumes from
// the checkpoint before.
func (p *persister) stageDirect(ctx context.Context, obs ckpt.Objects, object string, ref *events.CheckpointRef) (bool, error) {
	tmp, err := os.MkdirTemp(p.workDir, "restage-")
	if err != nil {
		return false, fmt.Errorf("stage %s: %w", object, err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	dir := filepath.Join(tmp, "checkpoint")
	err = direct.ReadBucket(ctx, p.bucket, ref.Location, ref.Digest, dir)
	if errors.Is(err, ckpt.ErrDigestMismatch) || errors.Is(err, direct.ErrIncomplete) || errors.Is(err, ckpt.ErrUnsafeEntry) {
		p.log.Error().Err(err).Str("location", ref.Location).Msg("a checkpoint in storage a runner resumes from is damaged or missing")
		return false, ckpt.MarkGone(ctx, obs, object, "its folder in storage is damaged or missing: "+err.Error())
	}
	if err != nil {
		return false, fmt.Errorf("stage %s from storage: %w", object, err)
	}
	if _, err := ckpt.Restage(ctx, obs, object, dir, ref.Digest); err != nil {
		return false, err
	}
	return true, nil
}

// restage stages the checkpoint persisted under prefix again as object.
func (p *persister) restage(ctx context.Context, obs ckpt.Objects, object, want, prefix string) error {
	tmp, err := os.MkdirTemp(p.workDir, "restage-")
	if err != nil {
		return fmt.Errorf("restage %s: %w", object, err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	dir := filepath.Join(tmp, "checkpoint")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("restage %s: %w", object, err)
	}
	if err := blobsync.SyncDown(ctx, p.bucket, prefix, dir, nil); err != nil {
		return fmt.Errorf("restage %s from storage: %w", object, err)
	}
	if _, err := ckpt.Restage(ctx, obs, object, dir, want); err != nil {
		return err
	}
	return nil
}
