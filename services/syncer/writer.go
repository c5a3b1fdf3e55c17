package syncer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"gocloud.dev/blob"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// writer keeps one experiment's storage in step with its events.
type writer struct {
	s   *Service
	exp string
	log zerolog.Logger
	st  *state.Experiment
	// spec and storagePath come from the log before anything is folded.
	spec        events.ExperimentSpec
	storagePath string

	root   *blob.Bucket // the storage bucket
	bucket *blob.Bucket // the experiment's part of it
	sync   *blobsync.Syncer
	ops    *blobsync.Queue // checkpoint and artifact persistence, in order
	stage  string          // local staging directory

	files   map[string]*trialFiles // by trial id, loaded lazily
	params  map[string]bool        // trials whose params.json is not written yet
	changed map[string]bool        // trials whose result files changed since the last sync
	dirty   bool                   // the state changed since the last snapshot
	lastMsg jetstream.Msg          // the last message folded, acked by a sync
	// finished are trials that ended since the last upload of their files.
	finished []string
	// line and row are reused for every result written.
	line, row []byte

	mu        sync.Mutex             // guards what follows, shared with the ops queue
	artifacts map[string]artifactJob // staged artifacts not yet in storage
	inflight  map[string]bool        // persistence jobs queued or running
	// persistedObjects are staged copies this syncer put into storage.
	persistedObjects map[string]bool
	staged           map[string][]string // staged checkpoint objects by trial, not removed yet
	latest           map[string]string   // each trial's latest checkpoint object, never removed
	// persistFailures counts lasting failures by persistence key;
	// unpersistable holds why the syncer gave a checkpoint up.
	persistFailures map[string]int
	unpersistable   map[string]string
}

func newWriter(s *Service, exp string) *writer {
	return &writer{
		s: s, exp: exp, st: state.New(exp), stage: filepath.Join(s.cfg.WorkDir, exp),
		files: map[string]*trialFiles{}, params: map[string]bool{}, changed: map[string]bool{},
		artifacts: map[string]artifactJob{}, inflight: map[string]bool{}, persistedObjects: map[string]bool{},
		staged: map[string][]string{}, latest: map[string]string{}, persistFailures: map[string]int{}, unpersistable: map[string]string{},
		log: s.log.With().Str("experiment", exp).Logger(),
	}
}

func (w *writer) run(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := w.open(ctx)
		if err == nil {
			break
		}
		w.announceFailure(ctx, "open storage", err, attempt)
		if w.root != nil {
			w.root.Close()
			w.root = nil
		}
		t := time.NewTimer(openBackoff(attempt, w.s.syncConfig(w.syncSpec()).SyncPeriod))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
	defer w.root.Close()
	defer w.closeFiles()
	w.ops = blobsync.NewQueue(context.WithoutCancel(ctx), w.log)
	defer w.ops.Close()
	msgs, errs, stop, err := w.follow(ctx)
	if err != nil {
		return err
	}
	defer func() { stop() }()
	period := w.s.syncConfig(w.syncSpec()).SyncPeriod
	tick := time.NewTicker(period)
	defer tick.Stop()
	upToDate := false
	for {
		select {
		case m := <-msgs:
			w.handle(ctx, m)
			upToDate = m.last
			if w.st.Done() && upToDate {
				w.final(ctx, msgs)
				return nil
			}
			if len(w.finished) > 0 && (upToDate || len(w.finished) >= uploadConcurrency) {
				w.uploadFinished(ctx)
			}
		case <-tick.C:
			if upToDate { // only then does the fold know what is persisted
				w.resubmit(ctx)
			}
			if w.dirty {
				_ = w.syncUp(ctx)
			}
		case err := <-errs:
			// The consumer is gone or refused (a lost node, a deleted
			// consumer): follow again from what the fold has, so an
			// experiment is never left without its syncer.
			w.log.Warn().Err(err).Msg("following the log again")
			stop()
			if msgs, errs, stop, err = w.follow(ctx); err != nil {
				return err
			}
		case <-ctx.Done():
			w.final(ctx, msgs)
			return ctx.Err()
		}
	}
}

// openBackoff is the wait before the next attempt: 1 s, doubling, at
// most limit, so a transient failure costs seconds and a lasting one is
// not retried faster than the sync period.
func openBackoff(attempt int, limit time.Duration) time.Duration {
	return min(time.Second<<min(attempt-1, 10), limit)
}

func (w *writer) syncSpec() events.SyncConfig { return w.spec.RunConfig.SyncConfig }

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
	filter := events.Prefix + "." + w.exp + ".*.experiment.*"
	err := w.s.bus.Replay(ctx, filter, func(ev *events.Event) {
		if p, ok := ev.Data.(*events.ExperimentStarted); ok {
			w.storagePath = p.StoragePath
		}
		if ferr == nil {
			st, _, ferr = state.Fold(ctx, st, ev, restore.Loader(w.s.bus.JS, w.exp))
		}
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		return err
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
	key, err := storage.NewestStateKey(ctx, w.bucket)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	data, err := storage.ReadAll(ctx, w.bucket, key)
	if err != nil {
		return err
	}
	st, err := state.Load(data)
	if err != nil {
		return fmt.Errorf("syncer: %s: %w", key, err)
	}
	last, err := w.s.bus.LastSeq(ctx, events.ExperimentSubjects(w.exp))
	if err != nil {
		return err
	}
	if !w.fromThisLog(ctx, st, last) {
		w.log.Warn().Str("snapshot", key).Uint64("snapshot_seq", st.LastSeq).Uint64("log_seq", last).Msg("the snapshot is not of this log; syncing from the start of the log")
		return nil
	}
	w.st = st
	w.do(ctx, spareAll(st))
	w.log.Info().Str("snapshot", key).Uint64("seq", st.LastSeq).Msg("resuming from the stored snapshot")
	return nil
}

// fromThisLog reports whether a snapshot reflects this log: the event at
// its sequence is the one it folded last (a new log after a lost one
// reuses sequences).
func (w *writer) fromThisLog(ctx context.Context, st *state.Experiment, last uint64) bool {
	if st.LastSeq == 0 || st.LastSeq > last {
		return false
	}
	m, err := w.s.bus.RawEvent(ctx, st.LastSeq)
	return err == nil && m.Header.Get(events.HeaderMsgID) == st.LastEventID
}

// follow consumes the log from what the fold has, retrying (1 s, doubling
// to 5 s) until it can or ctx is done. The consumer outlives ctx a little:
// on shutdown the writer first catches up with what is already in the log;
// stop ends it.
func (w *writer) follow(ctx context.Context) (msgs <-chan message, errs <-chan error, stop context.CancelFunc, err error) {
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		msgs, errs, err := w.consume(cctx)
		if err == nil {
			return msgs, errs, cancel, nil
		}
		cancel()
		w.log.Warn().Err(err).Int("attempt", attempt).Msg("cannot follow the log yet")
		t := time.NewTimer(openBackoff(attempt, 5*time.Second))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, nil, nil, err
		}
	}
}

// consume (re)creates the durable consumer from the sequence after the
// snapshot and streams its messages.
func (w *writer) consume(ctx context.Context) (<-chan message, <-chan error, error) {
	name := "sync_" + w.exp
	if err := w.s.bus.JS.DeleteConsumer(ctx, bus.StreamName, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, nil, fmt.Errorf("syncer: reset consumer %s: %w", name, err)
	}
	sc := w.s.syncConfig(w.syncSpec())
	cfg := jetstream.ConsumerConfig{
		Durable: name, Description: "syncer of experiment " + w.exp,
		FilterSubject: events.ExperimentSubjects(w.exp), AckPolicy: jetstream.AckAllPolicy,
		AckWait:       2*sc.SyncPeriod + time.Duration(sc.MaxRetries+1)*sc.SyncTimeout,
		MaxAckPending: -1, DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if w.st.LastSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, w.st.LastSeq+1
	}
	cons, err := w.s.bus.JS.CreateConsumer(ctx, bus.StreamName, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("syncer: consumer %s: %w", name, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, nil, fmt.Errorf("syncer: consumer %s: %w", name, err)
	}
	msgs, errs := make(chan message, 1024), make(chan error, 1)
	go func() {
		defer it.Stop()
		stop := context.AfterFunc(ctx, it.Stop)
		defer stop()
		for {
			m, err := it.Next()
			if errors.Is(err, jetstream.ErrNoHeartbeat) {
				// Not terminal: the iterator pulls again by itself.
				continue
			}
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					errs <- fmt.Errorf("syncer: consumer %s: %w", name, err)
				}
				return
			}
			// Decoded here, off the writer's goroutine, with the metadata
			// parsed once for both the sequence and the pending count.
			md, merr := m.Metadata()
			ev, derr := events.Decode(m.Subject(), m.Headers(), m.Data())
			if derr == nil && merr == nil {
				ev.Seq = md.Sequence.Stream
			}
			select {
			case msgs <- message{m: m, ev: ev, err: derr, last: merr == nil && md.NumPending == 0}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return msgs, errs, nil
}

// message is a consumed message and its decoded event.
type message struct {
	m   jetstream.Msg
	ev  *events.Event
	err error
	// last is true when no message of the consumer is left after m: a
	// completed state met while replaying may be followed by a restore.
	last bool
}

// handle folds one message and stages what it adds: result rows one by
// one, for results sent together too.
func (w *writer) handle(ctx context.Context, msg message) {
	w.lastMsg = msg.m
	if msg.err != nil {
		w.log.Debug().Err(msg.err).Str("subject", msg.m.Subject()).Msg("skipping a malformed message")
		return
	}
	for _, ev := range events.Split(msg.ev) {
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
	st, changed, err := state.Fold(ctx, w.st, ev, restore.Loader(w.s.bus.JS, w.exp))
	if err != nil {
		w.log.Error().Err(err).Msg("cannot load the restored state")
		return
	}
	w.st = st
	if changed {
		w.do(ctx, plan(prev, st, before, ev))
	}
}

// do runs an event's jobs in order. A job that fails is logged; the
// others still run.
func (w *writer) do(ctx context.Context, jobs []job) {
	for _, j := range jobs {
		if err := w.runJob(ctx, j); err != nil {
			w.log.Error().Err(err).Str("trial", j.trial).Msg("stage for storage")
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
		w.params[j.trial] = true
	case appendResult:
		return w.appendResult(ctx, t)
	case appendFailure:
		return w.appendFailure(ctx, t, j.at)
	case persist:
		w.submitCheckpoint(ctx, t, j.ckpt)
	case spare:
		w.spare(j.trial, j.object)
	case checkResumable:
		w.submitLatestCheck(ctx, t, j.copies)
	case copyArtifacts:
		w.submitArtifacts(ctx, t, j.artifacts)
	case uploadTrial:
		w.finished = append(w.finished, j.trial)
	}
	return nil
}

// final syncs everything at the end of the experiment or of the syncer:
// what is already in the log, the persistence queue (whose announcements
// then come back through the log), then the state, which clients take for
// "storage holds the experiment". A checkpoint that fails only holds it
// back until the syncer gives that checkpoint up. At the end of the
// experiment it goes on until storage has taken all of it but the
// checkpoints given up on; on shutdown it tries once (the next syncer
// resumes).
func (w *writer) final(ctx context.Context, msgs <-chan message) {
	for {
		w.catchUp(ctx, msgs)
		w.resubmit(ctx)
		if err := w.ops.Flush(context.WithoutCancel(ctx)); err != nil {
			w.log.Error().Err(err).Msg("persisting checkpoints and artifacts")
		}
		w.catchUp(ctx, msgs)
		err := w.syncUp(context.WithoutCancel(ctx))
		if (err == nil && w.complete()) || ctx.Err() != nil {
			break
		}
		t := time.NewTimer(w.sync.Config().SyncPeriod)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if w.st.Done() && !w.dirty {
		_ = os.RemoveAll(w.stage)
	}
}

// closeFiles closes the staged files still open.
func (w *writer) closeFiles() {
	for _, f := range w.files {
		_ = f.close()
	}
}

// catchUp folds every message already in the log.
func (w *writer) catchUp(ctx context.Context, msgs <-chan message) {
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
