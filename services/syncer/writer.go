package syncer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"gocloud.dev/blob"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/clock"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/tboard"
)

// writer keeps one experiment's storage in step with its events: it
// folds each event, asks plan what the event requires, and runs those
// jobs on its executors — the local staging of result files (staging),
// the persistence of staged checkpoints and artifacts (persister), and
// the sync that uploads the staged files and the snapshot (syncUp).
type writer struct {
	s   *Service
	exp string
	log zerolog.Logger
	st  *state.Experiment
	// spec and storagePath come from the log before anything is folded.
	spec        events.ExperimentSpec
	storagePath string
	// mirrorCfg is what the mirror copies to and with (takeMirror): nil
	// when the log holds no such settings (a restore from a state file
	// before they were recorded). mirrorSeq is the sequence of the event
	// it came from.
	mirrorCfg *events.Mirror
	mirrorSeq uint64

	root   *blob.Bucket // the storage bucket
	bucket *blob.Bucket // the experiment's part of it
	sync   *blobsync.Syncer
	tell   announcer

	files  *staging   // result files, written in place or staged until a sync uploads them
	store  *persister // checkpoints and artifacts, copied from the Object Store
	mirror *mirror    // copies the experiment's folder to upload_dir; nil without one

	dirty   bool          // the state changed since the last snapshot
	lastMsg *bus.Delivery // the last message folded, acked by a sync
}

func newWriter(s *Service, exp string) *writer {
	log := s.log.With().Str("experiment", exp).Logger()
	return &writer{s: s, exp: exp, st: state.New(exp), log: log, tell: announcer{bus: s.bus, exp: exp, log: log}}
}

func (w *writer) run(ctx context.Context) error {
	err := w.openRetrying(ctx)
	if errors.Is(err, errForgotten) {
		w.log.Info().Msg("the experiment was removed from the event log; no longer syncing it")
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = w.root.Close() }()
	w.files = newStaging(filepath.Join(w.s.cfg.WorkDir, w.exp), w.bucket, w.directDir())
	w.files.tensorboard = !w.spec.RunConfig.DisableTensorBoard
	defer w.files.close()
	ops := blobsync.NewQueue(context.WithoutCancel(ctx), w.log)
	defer ops.Close()
	w.store = newPersister(w, ops)
	if w.mirror, err = w.newMirror(ctx); err != nil {
		w.tell.failure(ctx, "mirror to upload_dir", err, 1)
	}
	defer w.mirror.stop()
	w.do(ctx, spareAll(w.st)) // the snapshot resumed from
	msgs, stop := w.follow(ctx)
	defer stop()
	tick := time.NewTicker(w.s.syncConfig(w.syncSpec()).SyncPeriod)
	defer tick.Stop()
	// Rows written in place are flushed once the log is read up to date,
	// and at most flushDelay after they were written while it is not.
	flush := time.NewTimer(flushDelay)
	flush.Stop()
	defer flush.Stop()
	flushArmed := false
	upToDate := false
	for {
		select {
		case m := <-msgs:
			w.handle(ctx, m)
			upToDate = m.Last
			if w.st.Done() && upToDate {
				w.final(ctx, msgs)
				return nil
			}
			if n := len(w.files.finished); n > 0 && (upToDate || n >= uploadConcurrency) {
				w.uploadFinished(ctx)
			}
			if len(w.files.unflushed) > 0 {
				if upToDate {
					w.flushWritten()
				} else if !flushArmed {
					flush.Reset(flushDelay)
					flushArmed = true
				}
			}
		case <-flush.C:
			flushArmed = false
			w.flushWritten()
		case <-tick.C:
			if err := w.claim(ctx); errors.Is(err, storage.ErrOwned) {
				w.tell.failure(ctx, "claim the experiment's folder", err, 1)
				continue // another deployment owns it: write nothing there
			} else if err != nil {
				// Storage failing: the sync below meets it too, and says so.
				w.log.Warn().Err(err).Msg("could not renew the claim on the experiment's folder")
			}
			if upToDate { // only then does the fold know what is persisted
				w.store.resubmit(ctx, w.st)
			}
			if w.dirty {
				_ = w.syncUp(ctx)
			}
		case <-ctx.Done():
			w.final(ctx, msgs)
			return ctx.Err()
		}
	}
}

func (w *writer) syncSpec() events.SyncConfig { return w.spec.RunConfig.SyncConfig }

// flushDelay bounds how long a row written in place waits in a buffer
// while the writer is behind the log (once it is up to date, rows are
// flushed at once): readers of storage see results within about a second.
const flushDelay = 200 * time.Millisecond

// directDir is the experiment's directory when storage is a file system
// (a local or NFS path, or a file:// URL), where result files are written
// in place as results arrive; nil for a bucket, which gets them whole with
// each sync.
func (w *writer) directDir() *storage.Dir {
	d, err := storage.Open(w.storagePath, w.exp)
	if err != nil {
		return nil
	}
	return d
}

// flushWritten flushes the rows written in place to storage.
func (w *writer) flushWritten() {
	if err := w.files.flushWritten(); err != nil {
		w.log.Warn().Err(err).Msg("flush result files; the next flush tries again")
	}
}

// handle folds one message and stages what it adds: result rows one by
// one, for results sent together too.
func (w *writer) handle(ctx context.Context, msg *bus.Delivery) {
	w.lastMsg = msg
	if msg.Malformed != nil {
		w.log.Debug().Err(msg.Malformed).Str("subject", msg.Subject).Msg("skipping a malformed message")
		return
	}
	for _, ev := range events.Split(msg.Event) {
		w.fold(ctx, ev)
	}
}

// fold applies one event and runs the jobs plan finds it requires.
func (w *writer) fold(ctx context.Context, ev *events.Event) {
	var before *state.Trial
	if t := w.st.Trials[ev.Trial()]; t != nil {
		cp := *t
		before = &cp
	}
	prev := w.st
	st, changed, err := state.Fold(ctx, w.st, ev, restorestate.Loader(w.s.bus, w.exp))
	if err != nil {
		w.log.Error().Err(err).Msg("cannot load the restored state")
		return
	}
	w.st = st
	if w.takeMirror(ev) {
		w.restartMirror(ctx)
	}
	if changed {
		w.store.pin(st.PinnedObjects())
		w.do(ctx, plan(prev, st, before, ev))
	}
}

// do runs jobs in order, each on its executor. A job that fails is
// logged; the others still run.
func (w *writer) do(ctx context.Context, jobs []job) {
	for _, j := range jobs {
		if err := w.runJob(ctx, j); err != nil {
			log := w.log.Error()
			if j.kind == writeParams {
				// A params.json not written in place stays pending and
				// goes with the next sync: nothing is lost. It happens
				// when a runner starting the trial cleans the trial's
				// folder of temporary files while it is written.
				log = w.log.Warn()
			}
			log.Err(err).Str("trial", j.trial).Msg("stage for storage")
		}
	}
}

func (w *writer) runJob(ctx context.Context, j job) error {
	t := w.st.Trials[j.trial]
	switch j.kind {
	case snapshot:
		w.dirty = true
	case syncNow:
		_ = w.syncUp(ctx)
	case writeParams:
		return w.files.writeParams(t)
	case appendResult:
		return w.files.appendResult(ctx, t)
	case appendFailure:
		return w.files.appendFailure(ctx, t, j.at)
	case uploadTrial:
		w.files.finished = append(w.files.finished, j.trial)
		return w.files.appendHParams(ctx, t, w.evaluatedParams(t), t.EndTime)
	case persist:
		w.store.checkpoint(ctx, w.st.StoragePath, t, *j.ckpt)
	case spare:
		w.store.spare(j.trial, j.object)
	case checkResumable:
		w.store.checkResumable(ctx, t.DirName, t.ID, j.copies)
	case copyArtifacts:
		w.store.copyArtifacts(ctx, t.DirName, j.artifacts)
	}
	return nil
}

// evaluatedParams are the trial's values of the experiment's search
// space's domains (Ray's trial.evaluated_params), for its hparams.
func (w *writer) evaluatedParams(t *state.Trial) map[string]any {
	if w.st.Spec == nil {
		return nil
	}
	space, err := search.ParseSpace(w.st.Spec.ParamSpace)
	if err != nil {
		w.log.Warn().Err(err).Str("trial", t.ID).Msg("the param space does not parse; no hparams in the trial's event file")
		return nil
	}
	return tboard.EvaluatedParams(space, t.Config)
}

// final syncs everything at the end of the experiment or of the syncer:
// what is already in the log, the persistence queue (whose announcements
// then come back through the log), then the state, which clients take for
// "storage holds the experiment". A checkpoint that fails only holds it
// back until the syncer gives that checkpoint up. At the end of the
// experiment it goes on until storage has taken all of it but the
// checkpoints given up on; on shutdown it tries once (the next syncer
// resumes).
func (w *writer) final(ctx context.Context, msgs <-chan *bus.Delivery) {
	for {
		w.catchUp(ctx, msgs)
		w.store.resubmit(ctx, w.st)
		if err := w.store.flush(context.WithoutCancel(ctx)); err != nil {
			w.log.Error().Err(err).Msg("persisting checkpoints and artifacts")
		}
		w.catchUp(ctx, msgs)
		err := w.syncUp(context.WithoutCancel(ctx))
		if (err == nil && w.store.complete(w.st)) || ctx.Err() != nil {
			break
		}
		_ = clock.Sleep(ctx, w.sync.Config().SyncPeriod) // an ended ctx ends the loop on its next pass
	}
	if err := w.mirror.finish(ctx); err != nil {
		w.log.Error().Err(err).Msg("mirror to upload_dir")
	}
	if w.st.Done() && !w.dirty {
		_ = os.RemoveAll(w.files.dir)
	}
}

// catchUp folds every message already in the log.
func (w *writer) catchUp(ctx context.Context, msgs <-chan *bus.Delivery) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), catchUpTimeout)
	defer cancel()
	target, err := w.s.bus.LastSeq(cctx, events.ExperimentSubjects(w.exp))
	if err != nil {
		w.log.Warn().Err(err).Msg("final catch-up")
	}
	for w.st.LastSeq < target {
		select {
		case m := <-msgs:
			w.handle(ctx, m)
		case <-cctx.Done():
			w.log.Warn().Uint64("at", w.st.LastSeq).Uint64("target", target).Msg("final catch-up timed out")
			return
		}
	}
}

// catchUpTimeout bounds the final catch-up on shutdown.
const catchUpTimeout = 10 * time.Second
