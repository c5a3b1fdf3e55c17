package runner

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt"
)

// artifactLog remembers what was staged of the trial directory.
type artifactLog struct {
	last  time.Time            // when files were last staged
	seen  map[string]fileStamp // what each file looked like then
	count int                  // archives staged by this attempt
}

type fileStamp struct {
	size  int64
	mtime time.Time
}

// syncArtifacts stages the files the trainable wrote or changed in its
// trial directory since the last staging (SyncConfig.sync_artifacts):
// throttled by sync_period unless forced (on a checkpoint with
// sync_artifacts_on_checkpoint, and at the end of the attempt).
func (a *attempt) syncArtifacts(ctx context.Context, force bool) error {
	pol := a.work.Artifacts
	if pol == nil {
		return nil
	}
	a.mu.Lock()
	now := time.Now()
	due := force || a.art.last.IsZero() || now.Sub(a.art.last) >= time.Duration(pol.PeriodS*float64(time.Second))
	if !due {
		a.mu.Unlock()
		return nil
	}
	a.art.last = now
	files, stamps := a.changedFiles()
	a.art.count++
	n := a.art.count
	a.mu.Unlock()
	if len(files) == 0 {
		return nil
	}
	obs, err := a.s.store(ctx, a.exp)
	if err != nil {
		return err
	}
	object := fmt.Sprintf("%s/artifacts_%d_%06d", a.work.TrialID, a.num, n)
	staged, err := ckpt.StageFiles(ctx, obs, object, a.dir, files)
	if err != nil {
		return fmt.Errorf("stage artifacts: %w", err)
	}
	ev := a.s.bus.Event(a.exp, events.WriterRunner, &events.TrialArtifacts{
		TrialID: a.work.TrialID, Attempt: a.num, Object: object, Files: len(files), Size: staged.Size, Digest: staged.Digest,
	})
	if _, err := a.s.bus.Publish(ctx, ev); err != nil {
		return err
	}
	a.mu.Lock()
	for k, v := range stamps {
		a.art.seen[k] = v
	}
	a.mu.Unlock()
	return nil
}

// changedFiles lists the regular files under the trial directory that are
// new or changed since the last staging. Caller holds a.mu.
func (a *attempt) changedFiles() ([]string, map[string]fileStamp) {
	if a.art.seen == nil {
		a.art.seen = map[string]fileStamp{}
	}
	var files []string
	stamps := map[string]fileStamp{}
	_ = filepath.WalkDir(a.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, err := filepath.Rel(a.dir, p)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		st := fileStamp{size: info.Size(), mtime: info.ModTime()}
		if a.art.seen[rel] != st {
			files = append(files, rel)
			stamps[rel] = st
		}
		return nil
	})
	return files, stamps
}
