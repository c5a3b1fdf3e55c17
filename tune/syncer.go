package tune

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/storage"
)

// Syncer copies an experiment's folder to and from storage tunejet does
// not open itself (Ray's ray.tune.syncer.Syncer). remote is
// <SyncConfig.UploadDir>/<name>, or below it for Delete; exclude holds
// SyncConfig.Exclude (fnmatch patterns of relative paths, such as
// "*/checkpoint_*"). Each call is one attempt: tunejet bounds it by
// sync_timeout (its context ends) and retries it.
type Syncer interface {
	// SyncUp copies localDir, but for excluded paths, to remote.
	SyncUp(ctx context.Context, localDir, remote string, exclude []string) error
	// SyncDown copies remote, but for excluded paths, into localDir.
	SyncDown(ctx context.Context, remote, localDir string, exclude []string) error
	// Delete removes remote (a dropped checkpoint's folder).
	Delete(ctx context.Context, remote string) error
}

// CommandSyncer is a Syncer of shell templates, as an experiment file's
// run_config.sync_config.syncer gives it (Ray's CommandBasedClient).
type CommandSyncer = events.CommandSyncer

// WithSyncer mirrors each experiment of the embedded stack with a
// SyncConfig.UploadDir to it with s, instead of the experiment's command
// syncer or a gocloud bucket; a Restore with an UploadDir brings a
// missing experiment folder back with s's SyncDown. On a deployment
// (WithNATS) the syncer service decides, and s serves only Restore.
func WithSyncer(s Syncer) Option {
	return func(t *Tuner) error {
		if s == nil {
			return errors.New("WithSyncer: nil Syncer")
		}
		t.syncer = s
		return nil
	}
}

// WithSyncConfig sets the experiment's SyncConfig alone (Ray's
// RunConfig.sync_config). For Restore, its UploadDir and syncer say where
// to bring a missing experiment folder back from.
func WithSyncConfig(c SyncConfig) Option {
	return func(t *Tuner) error { t.spec.RunConfig.SyncConfig = c; return nil }
}

// syncDown brings the experiment folder at path back from
// <upload_dir>/<name> when the caller gave an upload_dir and path holds no
// experiment_state-*.json: the caller's Syncer (WithSyncer), else the
// caller's command syncer's sync_down, else gocloud. The commands come
// from the caller, never from storage.
func (t *Tuner) syncDown(ctx context.Context, path string) error {
	sc := t.spec.RunConfig.SyncConfig
	if sc.UploadDir == "" {
		return nil
	}
	if _, _, err := loadStored(ctx, path); !errors.Is(err, fs.ErrNotExist) {
		return nil // there is a state (or a problem the restore reports)
	}
	local, err := storage.LocalPath(path)
	if err != nil || storage.IsURL(local) {
		return fmt.Errorf("restore %s from upload_dir %s: the experiment folder must be a local folder: %w", path, sc.UploadDir, err)
	}
	name := filepath.Base(local)
	remote := strings.TrimRight(sc.UploadDir, "/") + "/" + name
	var client blobsync.Client
	switch {
	case t.syncer != nil:
		client = t.syncer
	case sc.Syncer != nil:
		if sc.Syncer.SyncDown == "" {
			return fmt.Errorf("restore %s from upload_dir %s: run_config.sync_config.syncer has no sync_down command", path, sc.UploadDir)
		}
		c := blobsync.CommandClient{SyncUpTemplate: sc.Syncer.SyncUp, SyncDownTemplate: sc.Syncer.SyncDown, DeleteTemplate: sc.Syncer.Delete, ExcludeTemplate: sc.Syncer.ExcludeTemplate}
		if err := c.Validate(); err != nil {
			return fmt.Errorf("restore %s: run_config.sync_config.syncer: %w", path, err)
		}
		client = c
	default:
		b, err := storage.OpenBucket(ctx, sc.UploadDir)
		if err != nil {
			return fmt.Errorf("restore %s from upload_dir: %w", path, err)
		}
		defer b.Close()
		client, remote = blobsync.BucketClient{Bucket: b}, name
	}
	s, err := blobsync.New(blobsync.Config{SyncTimeout: events.Seconds(sc.SyncTimeoutS)}, t.log)
	if err != nil {
		return err
	}
	t.log.Info().Str("from", remote).Str("to", local).Msg("restore: bringing the experiment folder back from upload_dir")
	if err := s.SyncDown(ctx, client, remote, local, sc.Exclude); err != nil {
		return fmt.Errorf("restore %s: sync_down from %s: %w", path, remote, err)
	}
	return nil
}
