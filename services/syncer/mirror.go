package syncer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/storage"
)

// mirror copies the experiment's folder in storage to
// <upload_dir>/<name> with a blobsync.Client (Ray ≤ 2.6's upload_dir):
// after a sync of storage at most every sync_period (Throttle), forced at
// the end, each copy bounded by sync_timeout and retried (Syncer.Run), on
// its own queue so a slow command never holds up the writer.
type mirror struct {
	client  blobsync.Client
	local   string // <storage_path>/<name>
	remote  string // <upload_dir>/<name>, as the client understands it
	exclude []string
	sync    *blobsync.Syncer
	every   *blobsync.Throttle
	ops     *blobsync.Queue
	tell    announcer
	close   func()
}

// mirrorKey is the queue key of a sync_up: submissions while one waits
// are coalesced.
const mirrorKey = "sync_up"

// takeMirror takes the mirror settings ev carries, when it is newer than
// the event they were taken from, and says whether it did. They come only
// from the log, as the client and the restorer wrote them: the
// experiment.submitted event's, then each experiment.restored's that
// carries them (the restore's caller's; a restore from a state file
// always carries them, empty when the caller gave none). A stored state
// file's upload_dir and commands are never used: anyone who can write the
// storage folder can edit them.
func (w *writer) takeMirror(ev *events.Event) bool {
	var m events.Mirror
	switch p := ev.Data.(type) {
	case *events.ExperimentSubmitted:
		if w.mirrorCfg != nil {
			return false // a fold keeps the first submission's spec
		}
		m = events.MirrorOf(p.Spec.RunConfig.SyncConfig)
	case *events.ExperimentRestored:
		if p.Mirror == nil {
			return false
		}
		m = *p.Mirror
	default:
		return false
	}
	if ev.Seq != 0 && ev.Seq <= w.mirrorSeq {
		return false
	}
	w.mirrorCfg, w.mirrorSeq = &m, ev.Seq
	return true
}

// restartMirror replaces the mirror with one of the settings taken last
// (a restore changed them while the writer ran): a sync_up of the old one
// still running is stopped, and the new one copies everything at the next
// sync of storage.
func (w *writer) restartMirror(ctx context.Context) {
	if w.sync == nil {
		return // not open yet: run makes the mirror
	}
	w.mirror.stop()
	m, err := w.newMirror(ctx)
	if err != nil {
		w.tell.failure(ctx, "mirror to upload_dir", err, 1)
	}
	w.mirror = m
}

// newMirror returns the experiment's mirror, or nil when it has none.
// upload_dir, exclude and the syncer's commands are those takeMirror took
// from the log. The client is the service's (Config.Client) if set, else
// the command syncer, else a gocloud bucket.
func (w *writer) newMirror(ctx context.Context) (*mirror, error) {
	if w.mirrorCfg == nil {
		if w.syncSpec().UploadDir != "" {
			w.log.Warn().Str("upload_dir", w.syncSpec().UploadDir).Msg("upload_dir comes from a stored state file, not from a client or a restore's caller: not mirroring")
		}
		return nil, nil
	}
	sc := *w.mirrorCfg
	if sc.UploadDir == "" {
		return nil, nil
	}
	base, err := storage.LocalPath(w.storagePath)
	if err != nil {
		return nil, fmt.Errorf("mirror to %s: storage_path must be a folder: %w", sc.UploadDir, err)
	}
	m := &mirror{
		local:   filepath.Join(base, w.exp),
		remote:  strings.TrimRight(sc.UploadDir, "/") + "/" + w.exp,
		exclude: sc.Exclude,
		sync:    w.sync,
		every:   blobsync.NewThrottle(w.sync.Config().SyncPeriod),
		tell:    w.tell,
		close:   func() {},
	}
	switch cs := sc.Syncer; {
	case w.s.cfg.Client != nil:
		m.client = w.s.cfg.Client
	case cs != nil:
		c := blobsync.CommandClient{SyncUpTemplate: cs.SyncUp, SyncDownTemplate: cs.SyncDown, DeleteTemplate: cs.Delete, ExcludeTemplate: cs.ExcludeTemplate}
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("mirror to %s: %w", sc.UploadDir, err)
		}
		m.client = c
	default:
		b, err := storage.OpenBucket(ctx, sc.UploadDir)
		if err != nil {
			return nil, fmt.Errorf("mirror to %s: %w", sc.UploadDir, err)
		}
		m.client, m.remote, m.close = blobsync.BucketClient{Bucket: b}, w.exp, func() { _ = b.Close() }
	}
	m.ops = blobsync.NewQueue(context.WithoutCancel(ctx), w.log.With().Str("upload_dir", sc.UploadDir).Logger())
	w.log.Info().Str("from", m.local).Str("to", m.remote).Strs("exclude", m.exclude).Msg("mirroring the experiment's folder")
	return m, nil
}

// up queues a sync_up when one is due (force: at once).
func (m *mirror) up(ctx context.Context, force bool) {
	if m == nil {
		return
	}
	if force {
		m.every.Reset()
	}
	if !m.every.Due(time.Now()) {
		return
	}
	m.every.Mark(time.Now())
	m.ops.Submit(mirrorKey, func(qctx context.Context) error {
		err := m.sync.SyncUp(qctx, m.client, m.local, m.remote, m.exclude)
		if err != nil {
			m.every.Reset() // try again at the next sync of storage
			m.tell.failure(ctx, "sync_up "+m.remote, err, m.sync.Config().MaxRetries+1)
		}
		return err
	})
}

// delete queues the removal of rel (a dropped checkpoint's folder) under
// the remote.
func (m *mirror) delete(ctx context.Context, rel string) {
	if m == nil {
		return
	}
	target := m.remote + "/" + rel
	m.ops.Submit("delete "+rel, func(qctx context.Context) error {
		err := m.sync.Delete(qctx, m.client, target)
		if err != nil {
			m.tell.failure(ctx, "delete "+target, err, m.sync.Config().MaxRetries+1)
		}
		return err
	})
}

// finish runs a last sync_up and waits for the queue; on shutdown (ctx
// done) it waits at most one sync_timeout.
func (m *mirror) finish(ctx context.Context) error {
	if m == nil {
		return nil
	}
	m.up(ctx, true)
	fctx := context.WithoutCancel(ctx)
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(fctx, m.sync.Config().SyncTimeout)
		defer cancel()
	}
	err := m.ops.Flush(fctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("mirror to %s: the last sync_up is still running at shutdown: %w", m.remote, err)
	}
	return err
}

// stop ends the queue (a running command is killed) and closes the bucket.
func (m *mirror) stop() {
	if m == nil {
		return
	}
	m.ops.Close()
	m.close()
}
