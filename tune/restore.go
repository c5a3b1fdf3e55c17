package tune

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/clock"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/services/restorer"
)

// ResumeConfig says what a restore does with finished, unfinished and
// errored trials: Resume, Restart or Skip each (Ray's ResumeConfig).
type ResumeConfig = events.ResumeConfig

// Resume types.
const (
	Resume  = restore.Resume
	Restart = restore.Restart
	Skip    = restore.Skip
)

// ErrCannotRestore is matched by the error of every restore that finds
// nothing to restore or is refused, alongside the reason below.
var ErrCannotRestore = errors.New("cannot restore")

// Why a restore is refused. errors.Is matches one of them, and
// ErrCannotRestore, on the error of Restore or Fit and on Restorable.Err;
// the error's message is the restorer's.
var (
	// ErrBadRequest: the request is malformed: a path that does not end in
	// the experiment's directory, an unknown resume type, a param space
	// that does not parse.
	ErrBadRequest = api.ErrBadRequest
	// ErrNoState: there is nothing to restore at the path: the event log
	// does not hold the experiment and there is no experiment_state-*.json.
	ErrNoState = api.ErrNoState
	// ErrTrainableDiffers: the trainable given is another than the
	// experiment's (Ray's "Invalid `trainable` input" error); the error is
	// a *TrainableError.
	ErrTrainableDiffers = api.ErrTrainableDiffers
	// ErrTrainableRequired: the event log does not hold the experiment, so
	// its state comes from a file in storage, and no trainable was given:
	// a restore never runs code named by a file in storage, unless
	// WithTrustStoredTrainable says to. The error is a *TrainableError.
	ErrTrainableRequired = api.ErrTrainableRequired
	// ErrParamSpaceDiffers: the param space given has other keys than the
	// experiment's (Ray's "Invalid `param_space` input" error).
	ErrParamSpaceDiffers = api.ErrParamSpaceDiffers
	// ErrStateInvalid: the stored state does not decode, holds no
	// experiment spec, or was edited.
	ErrStateInvalid = api.ErrStateInvalid
	// ErrCheckpointLost: a trial to resume lost its latest checkpoint, in
	// the Object Store and in storage.
	ErrCheckpointLost = api.ErrCheckpointLost
	// ErrRunning: a live controller still runs the experiment (the log
	// holds no interruption or end of its run): stop it, or let it end,
	// then restore.
	ErrRunning = api.ErrRunning
	// ErrOwned: another deployment owns the experiment's storage folder
	// and is not gone (see docs/architecture.md, Storage ownership):
	// restore it from that deployment.
	ErrOwned = api.ErrOwned
)

// TrainableSpec names a trainable as an experiment file does: a command
// with the folder it runs in, or a registered name. Restore takes one as
// its trainable.
type TrainableSpec = events.Trainable

// TrainableError is a restore refused for its trainable. errors.Is
// matches ErrCannotRestore and ErrTrainableDiffers or
// ErrTrainableRequired.
type TrainableError struct {
	// Path is the experiment directory.
	Path string
	// Snapshot names the state file the state came from, when it came
	// from storage.
	Snapshot string
	// Stored is the trainable the experiment's state names.
	Stored TrainableSpec
	// Err says why, matching ErrTrainableDiffers or ErrTrainableRequired.
	Err error
}

func (e *TrainableError) Error() string {
	return fmt.Sprintf("%v %s: %v", ErrCannotRestore, e.Path, e.Err)
}

func (e *TrainableError) Unwrap() []error { return []error{ErrCannotRestore, e.Err} }

// refusal is the error of a restore of path refused with err: a
// *TrainableError when err is about the trainable.
func refusal(path string, err error, snapshot string, stored *TrainableSpec) error {
	if !errors.Is(err, ErrTrainableDiffers) && !errors.Is(err, ErrTrainableRequired) {
		return fmt.Errorf("%w %s: %w", ErrCannotRestore, path, err)
	}
	te := &TrainableError{Path: path, Snapshot: snapshot, Err: err}
	if stored != nil {
		te.Stored = *stored
	}
	return te
}

// replyError is the error of a refused restore.
func replyError(path string, rep api.RestoreReply) error {
	snapshot := ""
	if rep.Source == api.SourceSnapshot {
		snapshot = rep.Snapshot
	}
	return refusal(path, rep.Err(), snapshot, rep.Trainable)
}

// restoreOptions are the resume flags of Tuner.restore.
type restoreOptions struct {
	path                                        string
	unfinished, errored, restartErrored, custom bool
	config                                      ResumeConfig
	trustStored                                 bool
	numSamples                                  int // 0: the experiment's
}

func (o *restoreOptions) resumeConfig() ResumeConfig {
	if o.custom {
		return o.config
	}
	return restore.FromFlags(o.unfinished, o.errored, o.restartErrored)
}

// WithResumeUnfinished resumes (true, the default) or skips (false) the
// trials that had not finished.
func WithResumeUnfinished(on bool) Option {
	return func(t *Tuner) error { t.restoreOpts().unfinished = on; return nil }
}

// WithResumeErrored resumes errored trials from their latest checkpoint,
// with the same trial ids. It wins over WithRestartErrored.
func WithResumeErrored() Option {
	return func(t *Tuner) error { t.restoreOpts().errored = true; return nil }
}

// WithNumSamples sets the restored experiment's num_samples: a larger one
// adds trials to it, finished or interrupted, which the search algorithm
// suggests from every trial so far (-1 samples until stopped). It may not
// be below the trials the experiment has created.
func WithNumSamples(n int) Option {
	return func(t *Tuner) error {
		if n == 0 || n < -1 {
			return fmt.Errorf("num_samples on restore must be a count >= 1, or -1 to sample until stopped; got %d", n)
		}
		t.restoreOpts().numSamples = n
		return nil
	}
}

// WithRestartErrored restarts errored trials from scratch as new trials.
func WithRestartErrored() Option {
	return func(t *Tuner) error { t.restoreOpts().restartErrored = true; return nil }
}

// WithResumeConfig sets the resume types directly (Ray's _resume_config),
// overriding the flags.
func WithResumeConfig(c ResumeConfig) Option {
	return func(t *Tuner) error {
		o := t.restoreOpts()
		o.custom, o.config = true, c
		return nil
	}
}

// WithTrustStoredTrainable lets a Restore given no trainable run the one
// the experiment's state file names, when the event log does not hold the
// experiment and that file is all there is. Without it such a restore is
// refused (ErrTrainableRequired): anyone who can write the storage folder
// can edit that file. Fit prints the trainable (on the WithProgress
// writer, and in the log) before it runs.
func WithTrustStoredTrainable() Option {
	return func(t *Tuner) error { t.restoreOpts().trustStored = true; return nil }
}

func (t *Tuner) restoreOpts() *restoreOptions {
	if t.restore == nil {
		t.restore = &restoreOptions{unfinished: true}
	}
	return t.restore
}

// Restore returns a Tuner that continues the experiment at path — its
// directory in storage, <storage_path>/<name>, a local path or a URL —
// from the event log when it still holds it, else from its newest stored
// snapshot. trainable must be the one the experiment ran (a Go function of
// the same name, the same Command, the registered name, or a
// TrainableSpec); another is refused (ErrTrainableDiffers). Options may
// re-specify param_space (same keys) and set the resume flags; the NATS
// options say where to run. Fit continues the experiment; GetResults reads
// the stored results before that.
//
// What the restored run runs: from the log, the log's trainable; from a
// stored snapshot, trainable — the snapshot is a file anyone who can
// write the storage folder can edit, so the trainable it names is never
// run unless WithTrustStoredTrainable says so. With neither, Fit is
// refused with ErrTrainableRequired, naming the stored trainable.
//
// Where the restored run mirrors its folder (SyncConfig.UploadDir, its
// Syncer and Exclude): WithSyncConfig's, when it gives an UploadDir;
// otherwise, from the log, the mirror the experiment had, and from a
// stored snapshot none — the snapshot's commands are never run either.
func Restore(ctx context.Context, path string, trainable any, opts ...Option) (*Tuner, error) {
	var spec *TrainableSpec
	if ts, ok := trainable.(TrainableSpec); ok {
		spec, trainable = &ts, nil
	}
	t, err := newTuner(trainable, opts)
	if err != nil {
		return nil, err
	}
	if spec != nil {
		t.spec.Trainable = *spec
	}
	p, err := storage.Resolve(path, "")
	if err != nil {
		return nil, refusal(path, api.WithCode(api.CodeBadRequest, err), "", nil)
	}
	t.restoreOpts().path = p
	if err := t.reachBucket(ctx, p); err != nil {
		return nil, err
	}
	if err := t.syncDown(ctx, p); err != nil {
		return nil, err
	}
	if err := t.checkStored(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// reachBucket refuses, before anything reads it, an experiment in a
// bucket that cannot be written, naming why (storage.Reach): a restore
// reads its state from there, and its syncer writes there. On the embedded
// stack that syncer is this process, which probes the bucket itself; a
// deployment's syncer is asked before the restore (restoreAndWatch).
func (t *Tuner) reachBucket(ctx context.Context, expPath string) error {
	if !storage.IsBucket(expPath) || t.nats != nil {
		return nil
	}
	storagePath, name, err := restorer.Split(expPath)
	if err != nil {
		return refusal(expPath, api.WithCode(api.CodeBadRequest, err), "", nil)
	}
	return unlessPassing(t.log, storage.Reach(ctx, storagePath, name))
}

// checkStored validates the trainable and param_space against the stored
// snapshot, when there is one, so a mismatch fails at Restore as in Ray;
// the restorer checks again against the log.
func (t *Tuner) checkStored(ctx context.Context) error {
	st, key, err := loadStored(ctx, t.restore.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if errors.Is(err, ErrStateInvalid) {
		return refusal(t.restore.path, err, key, nil)
	}
	if err != nil {
		if storagePath, _, serr := restorer.Split(t.restore.path); serr == nil {
			return storage.Explain(storagePath, err) // one line for a bucket it cannot read
		}
		return err
	}
	var trainable *TrainableSpec
	if t.hasTrainable() {
		trainable = &t.spec.Trainable
	}
	if err := restorer.Check(st.Spec, trainable, t.spec.ParamSpace); err != nil {
		return refusal(t.restore.path, err, key, &st.Spec.Trainable)
	}
	return nil
}

func loadStored(ctx context.Context, path string) (*state.Experiment, string, error) {
	b, err := storage.OpenBucket(ctx, path)
	if err != nil {
		return nil, "", err
	}
	defer b.Close()
	// A damaged newer file skipped is the restorer's to report: it reads
	// the same one, and Fit prints what its reply says.
	st, key, _, err := storage.LoadNewestState(ctx, b)
	if errors.Is(err, state.ErrCorrupt) {
		return nil, key, api.WithCode(api.CodeStateInvalid, fmt.Errorf("%s: %w", storage.Join(path, key), err))
	}
	if err != nil {
		return nil, key, err
	}
	if st.Spec == nil {
		return nil, key, api.WithCode(api.CodeStateInvalid, fmt.Errorf("%s: the state holds no experiment spec", storage.Join(path, key)))
	}
	return st, key, nil
}

// hasTrainable reports whether Restore was given a trainable; without
// one, the log's is used, and a state from storage is refused unless
// trusted.
func (t *Tuner) hasTrainable() bool {
	return t.spec.Trainable.Name != "" || len(t.spec.Trainable.Command) > 0
}

// GetResults returns the results of the last Fit, or for a restored Tuner
// not fitted yet, the stored results.
func (t *Tuner) GetResults(ctx context.Context) (*ResultGrid, error) {
	if t.results != nil {
		return t.results, nil
	}
	if t.restore != nil {
		return LoadResults(ctx, t.restore.path)
	}
	return nil, errors.New("Can't return results as experiment has not been run, yet. Call `Tuner.Fit()` to run the experiment first.") //nolint:staticcheck // Ray's message, word for word
}

// Restorable says whether there is an experiment to restore at a path.
type Restorable struct {
	OK bool
	// Source is "log" or "snapshot"; Snapshot names the state file.
	Source, Snapshot string
	// Skipped names the newer state files passed over as damaged, each
	// with why: the state comes from an older one, Snapshot.
	Skipped []string
	// Counts are the trials by status.
	Counts map[string]int
	// Trainable is the trainable the state names, and TrainableFrom where
	// it comes from: "log", or "storage" when the state comes from a file
	// in storage — a restore then runs the trainable it is given, not
	// this one (see Restore).
	Trainable     *TrainableSpec
	TrainableFrom string
	// Reason says why not, when not OK, and Err is that refusal as an
	// error that errors.Is matches (ErrNoState, ...); nil when OK.
	Reason string
	Err    error
}

// CanRestore reports whether the experiment at path can be restored: there
// is state to restore in the event log or a stored snapshot (a marker file
// alone is not enough, unlike Ray). The NATS options say where to look.
func CanRestore(ctx context.Context, path string, opts ...Option) (Restorable, error) {
	t, err := NewTuner("", opts...)
	if err != nil {
		return Restorable{}, err
	}
	p, err := storage.Resolve(path, "")
	if err != nil {
		return Restorable{}, err
	}
	b, _, closeFn, err := t.connect(ctx, false) // asking needs no controller or runner
	if err != nil {
		return Restorable{}, err
	}
	defer func() { _ = closeFn() }() // only asked: nothing to lose
	rep, err := request(ctx, b, api.CanRestoreSubject, api.RestoreRequest{Path: p})
	if err != nil {
		return Restorable{}, err
	}
	r := Restorable{OK: rep.OK, Source: rep.Source, Snapshot: rep.Snapshot, Skipped: rep.Skipped, Counts: rep.Counts,
		Trainable: rep.Trainable, TrainableFrom: rep.TrainableFrom, Reason: rep.Error}
	if !rep.OK {
		r.Err = replyError(p, rep)
	}
	return r, nil
}

// restorerWait is how long a request waits for a restorer to appear.
const restorerWait = 15 * time.Second

// request asks the restorer.
func request(ctx context.Context, b *bus.Bus, subject string, r api.RestoreRequest) (api.RestoreReply, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	// A restorer that is starting (the embedded one, or a restarted one)
	// may not answer yet: try again for a while.
	deadline := time.Now().Add(restorerWait)
	var rep api.RestoreReply
	err := b.Request(rctx, subject, r, &rep)
	for errors.Is(err, bus.ErrNoResponders) && time.Now().Before(deadline) {
		_ = clock.Sleep(rctx, 100*time.Millisecond) // an ended rctx fails the next Request
		err = b.Request(rctx, subject, r, &rep)
	}
	if errors.Is(err, bus.ErrNoResponders) {
		return api.RestoreReply{}, fmt.Errorf("ask the restorer: no restorer is running on this deployment (start tunejet restorer): %w", err)
	}
	if err != nil {
		return api.RestoreReply{}, fmt.Errorf("ask the restorer: %w", err)
	}
	return rep, nil
}

// fitRestored asks the restorer to restore, then watches the restored run.
func (t *Tuner) fitRestored(ctx context.Context) (*ResultGrid, error) {
	b, stack, closeFn, err := t.connect(ctx, false)
	if err != nil {
		return nil, err
	}
	st, err := t.restoreAndWatch(ctx, b, stack)
	if cerr := closeFn(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return t.finish(st)
}

// restoreAndWatch asks the restorer, then starts the embedded controller
// and runner (stack nil on a deployment): the controller folds from the
// restored state, and the runner takes only the restored run's work.
func (t *Tuner) restoreAndWatch(ctx context.Context, b *bus.Bus, stack *Stack) (*state.Experiment, error) {
	req := api.RestoreRequest{Path: t.restore.path, Resume: t.restore.resumeConfig(), ParamSpace: t.spec.ParamSpace,
		NumSamples: t.restore.numSamples}
	if sc := t.spec.RunConfig.SyncConfig; sc.UploadDir != "" {
		// The restored run mirrors with the caller's settings: a state
		// file's are never used.
		m := events.MirrorOf(sc)
		req.Mirror = &m
	}
	if t.hasTrainable() {
		tr := t.spec.Trainable
		req.Trainable = &tr
	} else if t.restore.trustStored {
		tr, err := t.trustedStored(ctx, b)
		if err != nil {
			return nil, err
		}
		req.Trainable, req.TrustStoredTrainable = tr, true
	}
	if stack == nil && storage.IsBucket(t.restore.path) {
		storagePath, name, err := restorer.Split(t.restore.path)
		if err != nil {
			return nil, refusal(t.restore.path, api.WithCode(api.CodeBadRequest, err), "", nil)
		}
		if err := checkStorage(ctx, b, storage.SharedCheck{StoragePath: storagePath, Experiment: name}); err != nil {
			return nil, err
		}
	}
	if t.spec.ParamSpace != nil || len(t.objects) > 0 {
		_, name, err := restorer.Split(t.restore.path)
		if err != nil {
			return nil, refusal(t.restore.path, api.WithCode(api.CodeBadRequest, err), "", nil)
		}
		if err := uploadObjects(ctx, b, name, t.spec.ParamSpace, t.objects); err != nil {
			return nil, err
		}
	}
	rep, err := request(ctx, b, api.RestoreSubject, req)
	if err != nil {
		return nil, err
	}
	if !rep.OK {
		return nil, replyError(t.restore.path, rep)
	}
	t.tellRestored(rep)
	if stack != nil {
		stack.StartWorkers()
	}
	return t.watchFrom(ctx, b, rep.Experiment, rep.Seq)
}

// tellRestored warns, in the log and on the WithProgress writer, about
// what the restore did that the user should know: state files it skipped
// as unreadable, and a storage folder it took over from another
// deployment.
func (t *Tuner) tellRestored(rep api.RestoreReply) {
	for _, why := range rep.Skipped {
		t.log.Warn().Str("path", t.restore.path).Str("skipped", why).Str("snapshot", rep.Snapshot).Msg("skipped an unreadable state file; restoring from an older one")
		if t.progress != nil {
			fmt.Fprintf(t.progress, "Skipped %s\nRestoring from the newest readable state file, %s.\n", why, rep.Snapshot)
		}
	}
	if rep.TookOver != "" {
		t.log.Warn().Str("path", t.restore.path).Str("old_owner", rep.TookOver).Msg("took the storage folder over from a deployment that is gone")
		if t.progress != nil {
			fmt.Fprintf(t.progress, "Took %s over from its previous owner, %s, which is gone.\n", t.restore.path, rep.TookOver)
		}
	}
}

// trustedStored, for WithTrustStoredTrainable, asks the restorer which
// trainable the state names; when the state comes from a file in storage,
// it prints that trainable and returns it, to be passed as the caller's:
// the restore then runs what was printed, or is refused if the file
// changed since. From the log, it returns nil: the log's trainable runs.
func (t *Tuner) trustedStored(ctx context.Context, b *bus.Bus) (*TrainableSpec, error) {
	rep, err := request(ctx, b, api.CanRestoreSubject, api.RestoreRequest{Path: t.restore.path})
	if err != nil {
		return nil, err
	}
	if !rep.OK {
		return nil, replyError(t.restore.path, rep)
	}
	if rep.TrainableFrom != api.TrainableFromStorage || rep.Trainable == nil {
		return nil, nil
	}
	what := restore.Describe(*rep.Trainable)
	t.log.Warn().Str("path", t.restore.path).Str("snapshot", rep.Snapshot).Str("trainable", what).
		Msg("running the trainable the state file names, as trusted")
	if t.progress != nil {
		fmt.Fprintf(t.progress, "Restoring %s from %s, which the event log does not hold: running the trainable this file names, as trusted:\n  %s\n",
			t.restore.path, rep.Snapshot, what)
	}
	return rep.Trainable, nil
}
