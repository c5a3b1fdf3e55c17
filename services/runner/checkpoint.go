package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/ckpt/direct"
	"github.com/tunejet/tunejet/internal/clock"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/state"
)

// store returns the experiment's checkpoint bucket, opened once per runner.
func (s *Service) store(ctx context.Context, exp string) (ckpt.Objects, error) {
	s.mu.Lock()
	obs := s.stores[exp]
	s.mu.Unlock()
	if obs != nil {
		return obs, nil
	}
	obs, err := s.bus.Checkpoints(ctx, exp)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.stores[exp] = obs
	s.mu.Unlock()
	return obs, nil
}

// checkpoints folds the trial's lifecycle events (everything but its
// reports) and returns the checkpoints the fold keeps for it, newest first
// (a zombie attempt's checkpoint is never among them), and the trial's
// current attempt. After a PBT exploit, until the trial checkpoints again,
// it is the donor's checkpoint alone, and donor names the donor.
func (a *attempt) checkpoints(ctx context.Context) (refs []events.CheckpointRef, donor string, current int, err error) {
	if a.num == 1 && a.work.AttemptBase == 0 {
		if w := a.work.Checkpoint; w != nil {
			return []events.CheckpointRef{*w}, "", 0, nil
		}
		return nil, "", 0, nil // a first attempt has made no checkpoint yet
	}
	id := a.work.TrialID
	if a.s.hooks.historyRead != nil {
		a.s.hooks.historyRead(id)
	}
	filters := []string{events.TrialSubjects(a.exp, events.WriterController, id)}
	// trial.paused too: without it a pause request would cut off every
	// later checkpoint of the trial in this fold.
	for _, t := range []string{events.TypeTrialStarted, events.TypeTrialCheckpointed, events.TypeTrialFailed, events.TypeTrialCompleted, events.TypeTrialPaused} {
		filters = append(filters, events.Subject(a.exp, events.WriterRunner, t, id))
	}
	// From the newest restore, whose state replaces the history before it
	// (the one fold every reader uses).
	restored := events.TypeSubjects(a.exp, events.WriterRestorer, events.TypeExperimentRestored)
	from, err := a.s.bus.LastSeq(ctx, restored)
	if err != nil {
		return nil, "", 0, fmt.Errorf("read checkpoints of %s: %w", id, err)
	}
	filters = append(filters, restored)
	st, load := state.New(a.exp), restorestate.Loader(a.s.bus, a.exp)
	var ferr error
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err = a.s.bus.WatchSubjects(rctx, filters, from, bus.Handler{Event: func(ev *events.Event) {
		if ferr == nil {
			st, _, ferr = state.Fold(ctx, st, ev, load)
		}
	}, CaughtUp: cancel})
	if err != nil && !errors.Is(err, context.Canceled) || ferr != nil {
		return nil, "", 0, fmt.Errorf("read checkpoints of %s: %w", id, errors.Join(err, ferr))
	}
	var kept []events.CheckpointRef
	if t := st.Trials[id]; t != nil {
		if r := t.ResumeFrom; r != nil {
			return []events.CheckpointRef{r.Checkpoint}, r.Source, t.Attempt, nil
		}
		kept, current = t.Checkpoints, t.Attempt
	}
	// The work's own reference comes first when it is as new: after a
	// restore it may point at a copy the restorer staged again.
	if w := a.work.Checkpoint; w != nil && (len(kept) == 0 || w.Index >= kept[len(kept)-1].Index) {
		refs = append(refs, *w)
	}
	for i := len(kept) - 1; i >= 0; i-- {
		if len(refs) == 0 || kept[i].Name != refs[0].Name {
			refs = append(refs, kept[i])
		}
	}
	return refs, "", current, nil
}

// known returns what checkpoints would, read from the work instead of
// the trial's history, when the work says the controller had read every
// event a runner wrote about the trial up to fence, the last there is now
// (events.TrialScheduled.RunnerSeq): the work's checkpoint, or a PBT
// donor's, is then the newest kept, and its attempt base the last attempt
// started. A pause and resume, an exploit, or a retry on a quiet log skip
// the history's fold (tens of milliseconds once a trial has a few hundred
// checkpoints).
func (a *attempt) known(fence uint64) (refs []events.CheckpointRef, donor string, current int, ok bool) {
	w := a.work
	if w.RunnerSeq == 0 || w.RunnerSeq != fence {
		return nil, "", 0, false
	}
	switch {
	case w.Exploit != nil:
		return []events.CheckpointRef{w.Exploit.Checkpoint}, w.Exploit.Source, w.AttemptBase, true
	case w.Checkpoint != nil:
		return []events.CheckpointRef{*w.Checkpoint}, "", w.AttemptBase, true
	}
	return nil, "", w.AttemptBase, true
}

// resumePoint picks, from refs (newest first), the checkpoint this attempt
// resumes from: the newest whose staged copy is there and holds the bytes
// its event names. One whose copy is not found, holds other bytes or was
// marked gone everywhere is skipped, with a warning: a lie on the bus or a
// copy lost must cost the trial the iterations since the one before, not
// the trial. A copy removed after it was persisted is not skipped: the
// syncer stages it again, and the attempt fails and is retried until then.
// When every copy is unusable the newest is returned with usable false,
// and fetching it fails with the reason.
func (a *attempt) resumePoint(ctx context.Context, refs []events.CheckpointRef) (_ *events.CheckpointRef, usable bool, _ error) {
	a.stageRestore = false
	if len(refs) == 0 {
		return nil, true, nil
	}
	obs, err := a.s.store(ctx, a.exp)
	if err != nil {
		return nil, false, err
	}
	for i := range refs {
		ref := &refs[i]
		if direct.Written(ref) {
			usable, why, err := a.directUsable(ctx, obs, ref)
			if err != nil {
				return nil, false, err
			}
			if usable {
				return ref, true, nil
			}
			a.log.Warn().Str("checkpoint", ref.Name).Str("location", ref.Location).Str("reason", why).Msg("cannot resume from the checkpoint; trying the one before")
			continue
		}
		info, err := a.restaged(ctx, obs, a.objectOf(ref))
		var why string
		switch {
		case err == nil && ckpt.Holds(info, ref.Digest):
			return ref, true, nil
		case err == nil && ckpt.IsGone(info):
			why = "it is gone everywhere"
		case err == nil:
			why = "its staged copy holds other bytes than its event names"
		case errors.Is(err, ckpt.ErrObjectNotFound) && !errors.Is(err, ckpt.ErrRemoved):
			why = "its staged copy is not found"
		default:
			return ref, true, nil // as far as can be told: fetching it tells what is wrong
		}
		a.log.Warn().Str("checkpoint", ref.Name).Str("reason", why).Msg("cannot resume from the checkpoint; trying the one before")
	}
	if direct.Written(&refs[0]) {
		// As a staged copy marked gone everywhere: the trial ends with the
		// reason rather than retrying what cannot succeed.
		return nil, false, fmt.Errorf("resume trial %s: no checkpoint of it is usable (the newest, %s, is damaged or missing in storage): %w", a.work.TrialID, refs[0].Location, ckpt.ErrGone)
	}
	return &refs[0], false, nil
}

// localCopy is a checkpoint copied from storage into a local directory.
type localCopy struct {
	name, digest, dir string
}

// directUsable tells whether the attempt can resume from ref, a checkpoint
// in storage. A runner that reads storage copies it into the restore
// directory now, checking it against its manifest: a folder missing,
// incomplete or changed since its event is not usable (why says how). One
// that cannot read storage resumes from the copy the syncer stages
// (direct.StorageCopyObject): usable unless the syncer marked it gone.
func (a *attempt) directUsable(ctx context.Context, obs ckpt.Objects, ref *events.CheckpointRef) (usable bool, why string, err error) {
	if l := a.local; l != nil && l.name == ref.Name && l.digest == ref.Digest {
		return true, "", nil
	}
	if d := a.route.readsDirect(); d != nil {
		dir, err := a.restoreDir(ref)
		if err != nil {
			return false, "", err
		}
		a.local = nil
		err = d.Read(ctx, ref.Location, ref.Digest, dir)
		switch {
		case err == nil:
			a.local = &localCopy{name: ref.Name, digest: ref.Digest, dir: dir}
			return true, "", nil
		case errors.Is(err, ckpt.ErrDigestMismatch), errors.Is(err, direct.ErrIncomplete), errors.Is(err, ckpt.ErrUnsafeEntry),
			errors.Is(err, os.ErrNotExist):
			return false, "its folder in storage is not the one its event names: " + err.Error(), nil
		}
		return false, "", fmt.Errorf("resume trial %s: %w", a.work.TrialID, err)
	}
	info, err := ckpt.Info(ctx, obs, direct.StorageCopyObject(ref))
	switch {
	case err == nil && ckpt.IsGone(info):
		return false, "it is gone: " + info.Metadata["tunejet-gone"], nil
	case err == nil && !ckpt.Holds(info, ref.Digest):
		return false, "its staged copy holds other bytes than its event names", nil
	case err != nil && !errors.Is(err, ckpt.ErrObjectNotFound):
		return false, "", fmt.Errorf("resume trial %s: %w", a.work.TrialID, err)
	}
	// Staged already, or not yet: trial.started asks the syncer.
	a.stageRestore = err != nil
	return true, "", nil
}

// restoreDir is the local directory a checkpoint is restored into, with
// whatever an earlier try left there removed.
func (a *attempt) restoreDir(ref *events.CheckpointRef) (string, error) {
	dir := filepath.Join(a.s.cfg.WorkDir, a.exp, ".restore", fmt.Sprintf("%s-%d", a.work.TrialID, a.num), ref.Name)
	if err := os.RemoveAll(filepath.Dir(dir)); err != nil {
		return "", fmt.Errorf("resume trial %s: %w", a.work.TrialID, err)
	}
	return dir, nil
}

// prepareStorage learns how the experiment's checkpoints reach storage
// and removes what an interrupted direct write of the trial left there.
func (a *attempt) prepareStorage(ctx context.Context) error {
	r, err := a.s.routeOf(ctx, a.exp)
	if err != nil {
		return err
	}
	a.route = r
	if d := r.readsDirect(); d != nil {
		if err := d.CleanTemporary(ctx, a.work.DirName); err != nil {
			a.log.Warn().Err(err).Msg("cannot remove what an interrupted checkpoint write left in storage")
		}
	}
	return nil
}

// stagedCopyWait bounds the wait for the syncer to stage a checkpoint in
// storage for a runner that cannot read it.
const stagedCopyWait = 10 * time.Minute

// restageWait bounds the wait for the syncer to stage a persisted
// checkpoint again whose staged copy it removed.
const restageWait = 30 * time.Second

// restaged returns the staged copy's info, waiting while it is removed:
// only the syncer removes a copy, once storage holds it, and after a
// failed attempt it stages the one a retry resumes from again
// (services/syncer, submitLatestCheck). The work's heartbeats run
// meanwhile, so the wait spends no delivery.
func (a *attempt) restaged(ctx context.Context, obs ckpt.Objects, object string) (*ckpt.ObjectInfo, error) {
	info, err := ckpt.Info(ctx, obs, object)
	for wait, giveUp := 100*time.Millisecond, time.Now().Add(restageWait); errors.Is(err, ckpt.ErrRemoved) && time.Now().Before(giveUp); wait = min(2*wait, 2*time.Second) {
		a.log.Info().Str("object", object).Msg("the checkpoint's staged copy was removed; waiting for the syncer to stage it again")
		if clock.Sleep(ctx, wait) != nil {
			return nil, ctx.Err()
		}
		info, err = ckpt.Info(ctx, obs, object)
	}
	return info, err
}

// objectOf is the staged copy of ref.
func (a *attempt) objectOf(ref *events.CheckpointRef) string {
	if direct.Written(ref) {
		return direct.StorageCopyObject(ref)
	}
	if ref.Object != "" {
		return ref.Object
	}
	return ckpt.LegacyObjectName(a.work.TrialID, ref.Name)
}

// restore fetches the checkpoint to resume from into a local directory
// and returns it, or "" when the attempt starts fresh.
func (a *attempt) restore(ctx context.Context, ref *events.CheckpointRef) (string, error) {
	if ref == nil {
		return "", nil
	}
	if l := a.local; l != nil && l.name == ref.Name && l.digest == ref.Digest {
		return l.dir, nil // copied from storage by resumePoint
	}
	obs, err := a.s.store(ctx, a.exp)
	if err != nil {
		return "", err
	}
	dir, err := a.restoreDir(ref)
	if err != nil {
		return "", err
	}
	object := a.objectOf(ref)
	if direct.Written(ref) {
		if err := a.awaitStaged(ctx, obs, object); err != nil {
			return "", err
		}
	}
	if err := ckpt.Fetch(ctx, obs, object, ref.Digest, dir); err != nil {
		if direct.Written(ref) && errors.Is(err, ckpt.ErrGone) {
			// Not the trial's end: the next attempt resumes from the
			// checkpoint before (resumePoint skips one marked gone).
			return "", fmt.Errorf("resume trial %s from %s: the syncer could not stage it: %s", a.work.TrialID, ref.Location, err.Error())
		}
		return "", fmt.Errorf("resume trial %s: %w", a.work.TrialID, err)
	}
	return dir, nil
}

// awaitStaged waits for the syncer to stage a checkpoint in storage that
// this runner cannot read (asked by trial.started). The work's heartbeats
// run meanwhile.
func (a *attempt) awaitStaged(ctx context.Context, obs ckpt.Objects, object string) error {
	_, err := ckpt.Info(ctx, obs, object)
	for wait, giveUp := 100*time.Millisecond, time.Now().Add(stagedCopyWait); errors.Is(err, ckpt.ErrObjectNotFound) && time.Now().Before(giveUp); wait = min(2*wait, 2*time.Second) {
		a.log.Debug().Str("object", object).Msg("waiting for the syncer to stage the checkpoint from storage")
		if clock.Sleep(ctx, wait) != nil {
			return ctx.Err()
		}
		_, err = ckpt.Info(ctx, obs, object)
	}
	if err != nil {
		return fmt.Errorf("resume trial %s: the checkpoint was not staged from storage: %w", a.work.TrialID, err)
	}
	return nil
}

// stager stores an attempt's reported checkpoints in the bucket, each
// under a name of its own, and publishes trial.checkpointed for each.
type stager struct {
	attemptRef
	// scoreAttr is checkpoint_score_attribute: a checkpoint whose result
	// holds a value of it that is not a number is refused.
	scoreAttr string
	dirName   string // the trial's folder in storage
	route     *route // how checkpoints reach storage

	mu   sync.Mutex
	next int // index of the next checkpoint
}

// stage stores a reported checkpoint directory and publishes
// trial.checkpointed; it returns once both are durable.
func (st *stager) stage(ctx context.Context, dir string, result map[string]any) (string, error) {
	if attr := st.scoreAttr; attr != "" {
		if v := state.Lookup(result, attr); v != nil {
			if _, ok := toFloat(v); !ok {
				//nolint:staticcheck // Ray's own words, which users search for
				return "", fmt.Errorf("Unable to persist checkpoint for checkpoint_score_attribute: %s. This attribute must be numerical, got %T %v", attr, v, v)
			}
		}
	}
	st.mu.Lock()
	index := st.next
	st.next++
	st.mu.Unlock()
	name := ckpt.Name(index)
	direct, err := st.route.writesDirect(st.s.cfg.Name)
	if err != nil {
		return "", err
	}
	var ref events.CheckpointRef
	if direct {
		wctx, cancel := context.WithTimeout(ctx, st.route.timeout)
		ref, err = st.write(wctx, dir, name)
		cancel()
		if err != nil && st.route.mode != events.RouteStorage {
			// auto: storage that fails or hangs does not stop the trial.
			st.log.Warn().Err(err).Str("checkpoint", name).Msg("cannot write the checkpoint to storage; staging it in the Object Store instead")
			ref, err = st.stageObject(ctx, dir, name)
		}
	} else {
		ref, err = st.stageObject(ctx, dir, name)
	}
	if err != nil {
		return "", err
	}
	metrics := maps.Clone(result)
	metrics["checkpoint_dir_name"] = name
	iteration, _ := result["training_iteration"].(int)
	ref.Index, ref.Iteration, ref.Metrics = index, iteration, metrics
	if err := st.publish(ctx, &events.TrialCheckpointed{TrialID: st.trial, Attempt: st.num, Checkpoint: ref}); err != nil {
		return "", err
	}
	return name, nil
}

// write copies a checkpoint straight into its folder in storage
// (direct.Storage), complete when it returns.
func (st *stager) write(ctx context.Context, dir, name string) (events.CheckpointRef, error) {
	rel := st.dirName + "/" + name
	m, err := st.route.direct.Write(ctx, dir, rel, st.num)
	if err != nil {
		return events.CheckpointRef{}, err
	}
	return events.CheckpointRef{Name: name, Location: rel, Files: m.Inline(), Size: m.Size(), Digest: m.Digest()}, nil
}

// stageObject stores a checkpoint in the experiment's Object Store as the
// attempt's own object.
func (st *stager) stageObject(ctx context.Context, dir, name string) (events.CheckpointRef, error) {
	object := ckpt.AttemptObjectName(st.trial, st.num, name)
	// While the bucket is between leaders (a NATS node lost), the put is
	// tried again, whole, for as long as a publish would be.
	var staged ckpt.Staged
	for giveUp := time.Now().Add(bus.PublishRetryFor); ; {
		obs, err := st.s.store(ctx, st.exp)
		if err == nil {
			staged, err = ckpt.Stage(ctx, obs, object, dir)
		}
		if err == nil {
			break
		}
		if !bus.Retryable(err) || time.Now().After(giveUp) || clock.Sleep(ctx, 200*time.Millisecond) != nil {
			return events.CheckpointRef{}, err
		}
		st.log.Info().Err(err).Str("checkpoint", name).Msg("the checkpoint bucket did not answer; staging again")
	}
	return events.CheckpointRef{Name: name, Object: object, Size: staged.Size, Digest: staged.Digest}, nil
}
