package runner

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt"
)

// artifactSyncer stages the files the trainable writes in its trial
// directory (SyncConfig.sync_artifacts) as archives in the bucket, and
// publishes trial.artifacts for each.
type artifactSyncer struct {
	attemptRef
	dir    string
	policy *events.ArtifactSync // nil: artifacts are not synced
	// dirName is the trial's folder in storage, and route how its
	// checkpoints reach it: artifacts take the same way (written there
	// straight when the runner writes checkpoints there).
	dirName string
	route   *route

	mu    sync.Mutex
	last  time.Time            // when files were last staged
	seen  map[string]fileStamp // what each file looked like then
	count int                  // archives staged by this attempt
}

type fileStamp struct {
	size  int64
	mtime time.Time
}

// onCheckpoint reports whether a checkpoint forces a sync
// (sync_artifacts_on_checkpoint).
func (y *artifactSyncer) onCheckpoint() bool { return y.policy != nil && y.policy.OnCheckpoint }

// sync stages the files written or changed in the trial directory since
// the last staging: throttled by sync_period unless forced (on a
// checkpoint with sync_artifacts_on_checkpoint, and at the end of the
// attempt).
func (y *artifactSyncer) sync(ctx context.Context, force bool) error {
	if y.policy == nil {
		return nil
	}
	y.mu.Lock()
	now := time.Now()
	due := force || y.last.IsZero() || now.Sub(y.last) >= time.Duration(y.policy.PeriodS*float64(time.Second))
	if !due {
		y.mu.Unlock()
		return nil
	}
	y.last = now
	files, stamps := y.changedFiles()
	y.count++
	n := y.count
	y.mu.Unlock()
	if len(files) == 0 {
		return nil
	}
	if y.writeDirect(ctx, files) {
		y.remember(stamps)
		return nil
	}
	obs, err := y.s.store(ctx, y.exp)
	if err != nil {
		return err
	}
	object := fmt.Sprintf("%s/artifacts_%d_%06d", y.trial, y.num, n)
	staged, err := ckpt.StageFiles(ctx, obs, object, y.dir, files)
	if err != nil {
		return fmt.Errorf("stage artifacts: %w", err)
	}
	if err := y.publish(ctx, &events.TrialArtifacts{
		TrialID: y.trial, Attempt: y.num, Object: object, Files: len(files), Size: staged.Size, Digest: staged.Digest,
	}); err != nil {
		return err
	}
	y.remember(stamps)
	return nil
}

// writeDirect writes files straight into the trial's folder in storage
// when the runner writes its checkpoints there, and reports whether it
// did; when it cannot, or the write fails, they are staged instead (no
// event names artifacts written straight: the syncer has nothing to copy).
func (y *artifactSyncer) writeDirect(ctx context.Context, files []string) bool {
	if direct, err := y.route.writesDirect(y.s.cfg.Name); err != nil || !direct || y.dirName == "" {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, y.route.timeout)
	defer cancel()
	if err := y.route.direct.WriteFiles(wctx, y.dir, files, y.dirName); err != nil {
		y.log.Warn().Err(err).Int("files", len(files)).Msg("cannot write artifacts to storage; staging them in the Object Store instead")
		return false
	}
	return true
}

// remember records the files as synced as they were.
func (y *artifactSyncer) remember(stamps map[string]fileStamp) {
	y.mu.Lock()
	defer y.mu.Unlock()
	for k, v := range stamps {
		y.seen[k] = v
	}
}

// changedFiles lists the regular files under the trial directory that are
// new or changed since the last staging. Caller holds y.mu.
func (y *artifactSyncer) changedFiles() ([]string, map[string]fileStamp) {
	if y.seen == nil {
		y.seen = map[string]fileStamp{}
	}
	var files []string
	stamps := map[string]fileStamp{}
	_ = filepath.WalkDir(y.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, err := filepath.Rel(y.dir, p)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		st := fileStamp{size: info.Size(), mtime: info.ModTime()}
		if y.seen[rel] != st {
			files = append(files, rel)
			stamps[rel] = st
		}
		return nil
	})
	return files, stamps
}
