package syncer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/clock"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// openRetrying opens the experiment's storage (see open), trying again
// until it succeeds or ctx is done. Each failed attempt is announced
// (sync.failed) and logged once, at warn, with the attempt and the wait
// before the next: storage that cannot be reached (no credentials, a
// bucket gone) costs one line per back-off step, and none once the
// service stops.
func (w *writer) openRetrying(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := w.open(ctx)
		if err == nil {
			return nil
		}
		if w.root != nil {
			_ = w.root.Close()
			w.root = nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errForgotten) {
			return err
		}
		next := openBackoff(attempt, w.s.syncConfig(w.syncSpec()).SyncPeriod)
		w.log.Warn().Err(storage.Explain(w.storagePath, err)).Int("attempt", attempt).Dur("next_try_in", next).
			Msg("cannot open the experiment's storage; trying again (`tunejet forget " + w.exp + "` removes the experiment from the event log)")
		w.tell.announceFailure(ctx, "open storage", err, attempt)
		if clock.Sleep(ctx, next) != nil {
			return ctx.Err()
		}
	}
}

// errForgotten is open's error when the log holds no event of the
// experiment: it started (the writer follows only started experiments),
// and was removed from the log since (tunejet forget).
var errForgotten = errors.New("the experiment is no longer in the event log")

// openBackoff is the wait before the next attempt: 1 s, doubling, at
// most limit, so a transient failure costs seconds and a lasting one is
// not retried faster than the sync period.
func openBackoff(attempt int, limit time.Duration) time.Duration {
	return min(time.Second<<min(attempt-1, 10), limit)
}

// open finds the experiment's storage, its newest durable snapshot, and
// writes the storage marker.
func (w *writer) open(ctx context.Context) error {
	if err := w.readStart(ctx); err != nil {
		return err
	}
	var err error
	if w.root, err = storage.OpenBucket(ctx, w.storagePath); err != nil {
		return err
	}
	w.bucket = storage.ExperimentBucket(w.root, w.exp)
	if err := w.claim(ctx); err != nil {
		return err
	}
	if err := w.loadSnapshot(ctx); err != nil {
		return err
	}
	w.sync, err = blobsync.New(w.s.syncConfig(w.syncSpec()), w.log)
	if err != nil {
		return err
	}
	if storage.CheckMarker(ctx, w.bucket) != nil {
		if err := w.sync.Run(ctx, "write "+storage.MarkerFile, func(ctx context.Context) error {
			return storage.WriteMarker(ctx, w.bucket)
		}); err != nil {
			return err
		}
	}
	return nil
}

// readStart reads the experiment's spec and its storage (from its latest
// start) from the log.
func (w *writer) readStart(ctx context.Context) error {
	st := state.New(w.exp)
	var ferr error
	seen := 0
	filter := events.Prefix + "." + w.exp + ".*.experiment.*"
	err := w.s.bus.Replay(ctx, filter, func(ev *events.Event) {
		seen++
		switch p := ev.Data.(type) {
		case *events.ExperimentStarted:
			w.storagePath = p.StoragePath
		case *events.ExperimentSubmitted, *events.ExperimentRestored:
			w.takeMirror(ev)
		}
		if ferr == nil {
			st, _, ferr = state.Fold(ctx, st, ev, restorestate.Loader(w.s.bus, w.exp))
		}
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	if seen == 0 {
		return errForgotten
	}
	if st.Spec == nil || w.storagePath == "" {
		return fmt.Errorf("syncer: experiment %q has not started", w.exp)
	}
	w.spec = *st.Spec
	return nil
}

// loadSnapshot resumes from the newest snapshot in storage, unless it is
// ahead of the log (the log was lost and the experiment submitted anew).
func (w *writer) loadSnapshot(ctx context.Context) error {
	st, key, skipped, err := storage.LoadNewestState(ctx, w.bucket)
	for _, sk := range skipped {
		w.log.Warn().Str("skipped", sk.Key).Str("reason", sk.Err.Error()).Str("snapshot", key).
			Msg("skipped a damaged state file; resuming from an older one, whose events are written again once")
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil && key == "" {
		return fmt.Errorf("syncer: %w", err)
	}
	if err != nil {
		return fmt.Errorf("syncer: %s: %w", key, err)
	}
	last, err := w.s.bus.LastSeq(ctx, events.ExperimentSubjects(w.exp))
	if err != nil {
		return err
	}
	why, err := restorestate.OfThisLog(ctx, w.s.bus, st, w.exp, last)
	if err != nil {
		return fmt.Errorf("syncer: %s: %w", key, err)
	}
	if why != "" {
		w.log.Warn().Str("snapshot", key).Str("reason", why).Uint64("snapshot_seq", st.LastSeq).Uint64("log_seq", last).Msg("the snapshot is not of this log; syncing from the start of the log")
		return nil
	}
	w.st = st
	w.log.Info().Str("snapshot", key).Uint64("seq", st.LastSeq).Msg("resuming from the stored snapshot")
	return nil
}

// claim renews this deployment's claim on the experiment's folder, or
// makes it if nobody owns it (storage.ClaimRenew), in one attempt bounded
// by sync_timeout. It fails, naming the owner, when another deployment
// owns the folder: this syncer then writes nothing there.
func (w *writer) claim(ctx context.Context) error {
	cfg := w.s.syncConfig(w.syncSpec())
	cctx, cancel := context.WithTimeout(ctx, cfg.SyncTimeout)
	defer cancel()
	d, err := w.s.bus.Deployment(cctx)
	if err != nil {
		return err
	}
	me := storage.NewOwner(d.ID, d.Store, w.s.bus.EmbeddedStore != "", cfg.SyncPeriod)
	if _, err := storage.ClaimOwner(cctx, w.storagePath, w.exp, me, storage.ClaimRenew, nil); err != nil {
		return fmt.Errorf("syncer: claim the experiment's folder: %w", err)
	}
	return nil
}
