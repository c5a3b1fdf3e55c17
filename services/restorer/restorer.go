package restorer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/ckpt/direct"
	"github.com/tunejet/tunejet/internal/metrics"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"

	"github.com/tunejet/tunejet/internal/settings"
)

// Config configures a restorer. The zero value is usable.
type Config struct {
	// Timeout bounds one restore. Default 10 minutes.
	Timeout time.Duration
}

// Service is a running restorer.
type Service struct {
	bus *bus.Bus
	cfg Config
	log zerolog.Logger
}

// New returns a restorer on b.
func New(b *bus.Bus, cfg Config) *Service {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	return &Service{bus: b, cfg: cfg, log: b.Log.With().Str("service", "restorer").Logger()}
}

// Run serves restore requests until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	if err := s.bus.Provision(ctx); err != nil {
		return err
	}
	stop, err := s.bus.Register(ctx, "restorer", "restores interrupted tunejet experiments from the log or a stored snapshot",
		bus.Endpoint{Subject: api.RestoreSubject, Handle: s.handler(false)},
		bus.Endpoint{Subject: api.CanRestoreSubject, Handle: s.handler(true)})
	if err != nil {
		return err
	}
	defer stop()
	<-ctx.Done()
	return nil
}

func (s *Service) handler(dry bool) bus.Handle {
	return func(ctx context.Context, req []byte) any {
		var r api.RestoreRequest
		if err := json.Unmarshal(req, &r); err != nil {
			reply := api.RestoreReply{Error: fmt.Sprintf("bad request: %v", err), Code: api.CodeBadRequest}
			s.log.Info().Err(err).Str("code", string(reply.Code)).Bool("dry", dry).Msg("cannot restore")
			return reply
		}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
		return s.Handle(rctx, r, dry)
	}
}

// Handle restores an experiment (or, dry, only says whether it can be).
// A refusal carries the code of its error (api.CodeOf).
func (s *Service) Handle(ctx context.Context, r api.RestoreRequest, dry bool) api.RestoreReply {
	rep, err := s.handle(ctx, r, dry)
	if err != nil {
		rep.OK, rep.Error, rep.Code = false, err.Error(), api.CodeOf(err)
		s.log.Info().Str("path", r.Path).Err(err).Str("code", string(rep.Code)).Bool("dry", dry).Msg("cannot restore")
		return rep
	}
	rep.OK = true
	return rep
}

func (s *Service) handle(ctx context.Context, r api.RestoreRequest, dry bool) (api.RestoreReply, error) {
	if !dry {
		defer prometheusTimer()()
	}
	storagePath, name, err := Split(r.Path)
	if err != nil {
		return api.RestoreReply{}, api.WithCode(api.CodeBadRequest, err)
	}
	start := time.Now()
	st, rep, err := s.read(ctx, r.Path, name)
	if err != nil {
		return rep, err
	}
	readTook := time.Since(start)
	if dry {
		return rep, nil
	}
	if err := s.validate(st, r, &rep); err != nil {
		return rep, err
	}
	if rep.Source == api.SourceLog && st.Status == state.ExperimentRunning {
		if err := s.notLed(ctx, name); err != nil {
			return rep, err
		}
	}
	mirror, err := mirrorOf(st, r, rep.Source)
	if err != nil {
		return rep, err
	}
	st.Spec.RunConfig.StoragePath, st.StoragePath = storagePath, storagePath
	if r.ParamSpace != nil {
		st.Spec.ParamSpace = r.ParamSpace
		restore.ReplaceRefs(st, r.ParamSpace)
	}
	if err := extend(st, r.NumSamples); err != nil {
		return rep, api.WithCode(api.CodeBadRequest, err)
	}
	restored, err := restore.Apply(st, r.Resume, restarter(st))
	if err != nil {
		return rep, api.WithCode(api.CodeBadRequest, err) // an unknown resume type
	}
	if err := s.reachCheckpoints(ctx, restored, r.Path); err != nil {
		return rep, err
	}
	if err := s.claimFolder(ctx, storagePath, st, &rep); err != nil {
		return rep, err
	}
	staging := time.Now()
	object, digest, err := restorestate.Stage(ctx, s.bus, restored, st.Run+1)
	if err != nil {
		return rep, err
	}
	ev := s.bus.Event(name, events.WriterRestorer, &events.ExperimentRestored{
		Resume: r.Resume, Source: rep.Source, Snapshot: rep.Snapshot, Object: object, Digest: digest, Mirror: mirror,
		NumSamples: r.NumSamples,
	})
	if rep.Seq, err = s.bus.Publish(ctx, ev); err != nil {
		return rep, err
	}
	s.log.Info().Str("experiment", name).Str("source", rep.Source).Str("read", rep.Read).Uint64("seq", rep.Seq).
		Str("trainable", restore.Describe(st.Spec.Trainable)).Str("trainable_from", rep.TrainableFrom).
		Dur("read_took", readTook).Dur("stage_took", time.Since(staging)).Dur("took", time.Since(start)).Msg("restored")
	return rep, nil
}

// extend sets the experiment's num_samples to n (0: keep it), refusing a
// count that would make fewer trials than it has created: a restore adds
// trials, it never takes any away. The restored run's experiment.started
// counts its trials from it, and the controller creates the new ones from
// the next index on, its search algorithm suggesting from every trial so
// far.
func extend(st *state.Experiment, n int) error {
	switch {
	case n == 0:
		return nil
	case n < -1:
		return fmt.Errorf("num_samples must be a count >= 1, or -1 to sample until stopped; got %d", n)
	}
	if n != -1 {
		space, err := search.ParseSpace(st.Spec.ParamSpace)
		if err != nil {
			return fmt.Errorf("param_space: %w", err)
		}
		if total := space.NumTrials(n); total < st.NextIndex {
			return fmt.Errorf("num_samples %d makes %d trials, and the experiment has created %d: a restore adds trials, it never removes any", n, total, st.NextIndex)
		}
	}
	st.Spec.TuneConfig.NumSamples = n
	return nil
}

// notLed refuses the restore of an experiment whose run a live controller
// still leads: the log holds no interruption or end of the run, and the
// controller renews its lease while the restorer watches it, for up to
// bus.LeaseTTL. A lease not renewed for that long is a dead controller's
// (killed without a word, as by kill -9): the restore goes ahead, and the
// controller that takes the lease over leads the restored run.
func (s *Service) notLed(ctx context.Context, exp string) error {
	leases, ok, err := s.bus.ExistingLeases(ctx)
	if err != nil || !ok {
		return err
	}
	holder, rev, err := leases.Holder(ctx, exp)
	if err != nil || holder == "" {
		return err
	}
	tick := time.NewTicker(leasePoll)
	defer tick.Stop()
	dead := time.NewTimer(bus.LeaseTTL)
	defer dead.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-dead.C:
			s.log.Info().Str("experiment", exp).Str("controller", holder).Dur("not_renewed_for", bus.LeaseTTL).
				Msg("the experiment's run was never interrupted, and its controller stopped renewing its lease: restoring it")
			return nil
		case <-tick.C:
		}
		h, r, err := leases.Holder(ctx, exp)
		if err != nil || h == "" {
			return err
		}
		if h != holder || r != rev {
			return api.WithCode(api.CodeRunning, fmt.Errorf("experiment %q is running: controller %s leads it and is alive; a restore would run its trials a second time beside it. Stop it first (tunejet stop %s, or Ctrl-C in the tunejet run that started it), or let it finish, then restore",
				exp, h, exp))
		}
	}
}

// claimFolder makes this deployment the owner of the experiment's folder
// in storage (storage.ClaimOwner, ClaimRestore): it is already, or nobody
// is, or the owner is gone and this restore takes the folder over, which
// it logs and says in rep; otherwise the restore is refused, naming the
// owner.
func (s *Service) claimFolder(ctx context.Context, storagePath string, st *state.Experiment, rep *api.RestoreReply) error {
	d, err := s.bus.Deployment(ctx)
	if err != nil {
		return err
	}
	me := storage.NewOwner(d.ID, d.Store, s.bus.EmbeddedStore != "", events.Seconds(st.Spec.RunConfig.SyncConfig.SyncPeriodS))
	took, err := storage.ClaimOwner(ctx, storagePath, st.Name, me, storage.ClaimRestore, embeddedGone)
	if errors.Is(err, storage.ErrOwned) {
		return api.WithCode(api.CodeOwned, err)
	}
	if err != nil {
		return err
	}
	if took != nil {
		rep.TookOver = took.Describe()
		s.log.Warn().Str("experiment", st.Name).Str("storage_path", storagePath).Str("old_owner", rep.TookOver).
			Msg("took the experiment's storage folder over from a deployment that is gone")
	}
	return nil
}

// embeddedGone reports whether no server runs the embedded store an
// owner names (decideClaim has checked it is one, on this host).
func embeddedGone(o storage.Owner) bool {
	dir := o.EmbeddedDir()
	return dir != "" && !bus.StoreInUse(dir)
}

// leasePoll is how often notLed reads the lease.
const leasePoll = 100 * time.Millisecond

// prometheusTimer observes a restore's duration when the returned func runs.
func prometheusTimer() func() {
	start := time.Now()
	return func() { metrics.RestoreSeconds.Observe(time.Since(start).Seconds()) }
}

// Split cuts an experiment directory (a path or URL) into its storage path
// and the experiment's name.
func Split(p string) (storagePath, name string, err error) {
	if storage.IsURL(p) {
		u, perr := url.Parse(p)
		if perr != nil {
			return "", "", fmt.Errorf("restore %q: %w", p, perr)
		}
		name = path.Base(strings.TrimSuffix(u.Path, "/"))
		u.Path = path.Dir(strings.TrimSuffix(u.Path, "/"))
		storagePath = u.String()
	} else {
		name, storagePath = filepath.Base(filepath.Clean(p)), filepath.Dir(filepath.Clean(p))
	}
	if err := events.ValidateID("experiment name", name); err != nil {
		return "", "", fmt.Errorf("restore %q: the path must end in the experiment's directory: %w", p, err)
	}
	return storagePath, name, nil
}

// read folds the experiment from the log if it holds it, else loads the
// newest snapshot in storage. From the log, the fold starts at the newest
// state already folded that belongs to this log — the stored snapshot or
// the state the last restore staged, whichever is newer — and folds only
// the events after it: the result is the fold of the whole log, at a cost
// that grows with the tail, not with the history.
func (s *Service) read(ctx context.Context, expPath, name string) (*state.Experiment, api.RestoreReply, error) {
	rep := api.RestoreReply{Experiment: name}
	last, err := s.bus.LastSeq(ctx, events.ExperimentSubjects(name))
	if err != nil {
		return nil, rep, err
	}
	var st *state.Experiment
	if last > 0 {
		rep.Source, rep.TrainableFrom = api.SourceLog, api.TrainableFromLog
		st, err = s.fromLog(ctx, expPath, name, last, &rep)
	} else {
		rep.Source, rep.Read, rep.TrainableFrom = api.SourceSnapshot, api.ReadSnapshot, api.TrainableFromStorage
		st, rep.Snapshot, rep.Skipped, err = s.snapshot(ctx, expPath)
		if errors.Is(err, fs.ErrNotExist) {
			err = api.WithCode(api.CodeNoState, fmt.Errorf("no experiment to restore at %s: the event log does not hold it and there is no experiment_state-*.json (this is expected if you are launching a new experiment)", expPath))
		}
		if st != nil {
			rep.ReadFrom, rep.ReadSeq = rep.Snapshot, st.LastSeq
		}
	}
	if err != nil {
		return nil, rep, err
	}
	if st.Spec == nil {
		return nil, rep, api.WithCode(api.CodeStateInvalid, fmt.Errorf("restore %s: the state holds no experiment spec", expPath))
	}
	rep.Counts = st.Counts()
	tr := st.Spec.Trainable
	rep.Trainable = &tr
	return st, rep, nil
}

// fromLog folds the experiment from the log, which holds it up to last,
// starting at the newest usable state (see read) and saying in rep where
// it started.
func (s *Service) fromLog(ctx context.Context, expPath, name string, last uint64, rep *api.RestoreReply) (*state.Experiment, error) {
	log := s.log.With().Str("experiment", name).Logger()
	// The last restore staged the whole state at its experiment.restored
	// event, and Fold replaces the state there: folding from that event on
	// gives what folding the whole log does.
	restored, err := s.bus.LastSeq(ctx, events.TypeSubjects(name, events.WriterRestorer, events.TypeExperimentRestored))
	if err != nil {
		return nil, err
	}
	st, from := state.New(name), uint64(0)
	rep.Read = api.ReadLog
	snap, key, why := s.snapshotOfLog(ctx, expPath, name, last)
	if snap != nil && restored > 0 && snap.LastSeq > restored && snap.RestoredSeq != restored {
		// Its writer could not load the last restore's state and folded on.
		snap, why = nil, fmt.Sprintf("the stored snapshot %s did not fold the restore at sequence %d", key, restored)
	}
	if snap != nil && snap.LastSeq >= restored {
		// The snapshot only shortens the fold: the code to run is the log's.
		if err := s.sameTrainable(ctx, snap, key, restored); err != nil {
			snap, why = nil, err.Error()
		}
	}
	switch {
	case snap != nil && snap.LastSeq >= restored:
		st, from = snap, snap.LastSeq+1
		rep.Read, rep.ReadFrom, rep.ReadSeq = api.ReadSnapshotLog, key, snap.LastSeq
	case restored > 0:
		from = restored
		rep.Read, rep.ReadFrom, rep.ReadSeq = api.ReadRestoredLog, "experiment.restored", restored
	}
	switch {
	case rep.Read == api.ReadLog:
		log.Info().Str("reason", why).Uint64("log_seq", last).Msg("folding the whole log")
	case why != "":
		log.Info().Str("reason", why).Msg("not starting from the stored snapshot")
	}
	n := 0
	var ferr error
	err = s.bus.ReplayFrom(ctx, events.ExperimentSubjects(name), from, func(ev *events.Event) {
		if ferr != nil {
			return
		}
		n++
		st, _, ferr = state.Fold(ctx, st, ev, restorestate.Loader(s.bus, st.Name))
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		return nil, err
	}
	rep.Folded = n
	log.Info().Str("read", rep.Read).Str("from", rep.ReadFrom).Uint64("from_seq", rep.ReadSeq).Int("events", n).Uint64("log_seq", last).Msg("read the experiment")
	return st, nil
}

// sameTrainable says why a stored snapshot of this log is not used when
// its trainable is not the log's — the state the last restore (at
// sequence restored) staged, or before any restore the first
// experiment.submitted — or the log's cannot be read. The file may have
// been edited, its checksum recomputed: what it names is never run.
func (s *Service) sameTrainable(ctx context.Context, snap *state.Experiment, key string, restored uint64) error {
	if snap.Spec == nil {
		return fmt.Errorf("the stored snapshot %s holds no experiment spec", key)
	}
	var tr *events.Trainable
	var err error
	if restored > 0 {
		tr, err = s.restoredTrainable(ctx, snap.Name, restored)
	} else {
		tr, err = s.submittedTrainable(ctx, snap.Name)
	}
	if err != nil {
		return fmt.Errorf("cannot read the log's trainable to check the stored snapshot %s against: %w", key, err)
	}
	got := snap.Spec.Trainable
	if got.Name != tr.Name || got.Dir != tr.Dir || !slices.Equal(got.Command, tr.Command) {
		s.log.Warn().Str("experiment", snap.Name).Str("snapshot", key).Str("stored", restore.Describe(got)).Str("log", restore.Describe(*tr)).
			Msg("the stored snapshot names another trainable than the log: it was edited, or is not of this log")
		return fmt.Errorf("the stored snapshot %s names another trainable than the log (%s, the log %s)", key, restore.Describe(got), restore.Describe(*tr))
	}
	return nil
}

// restoredTrainable is the trainable of the state the experiment.restored
// at sequence seq staged.
func (s *Service) restoredTrainable(ctx context.Context, exp string, seq uint64) (*events.Trainable, error) {
	m, err := s.bus.RawEvent(ctx, seq)
	if err != nil {
		return nil, err
	}
	ev, err := events.Decode(m.Subject, m.Header, m.Data)
	if err != nil {
		return nil, fmt.Errorf("event %d: %w", seq, err)
	}
	r, ok := ev.Data.(*events.ExperimentRestored)
	if !ok || ev.Experiment != exp {
		return nil, fmt.Errorf("event %d is not the experiment.restored of %s", seq, exp)
	}
	spec, err := restorestate.LoadSpec(ctx, s.bus, exp, r)
	if err != nil {
		return nil, err
	}
	return &spec.Trainable, nil
}

// submittedTrainable is the trainable of the experiment's first
// experiment.submitted, the one a fold keeps.
func (s *Service) submittedTrainable(ctx context.Context, exp string) (*events.Trainable, error) {
	var tr *events.Trainable
	err := s.bus.ReplayFrom(ctx, events.TypeSubjects(exp, events.WriterClient, events.TypeExperimentSubmitted), 0, func(ev *events.Event) {
		if p, ok := ev.Data.(*events.ExperimentSubmitted); ok && tr == nil {
			tr = &p.Spec.Trainable
		}
	})
	if err != nil {
		return nil, err
	}
	if tr == nil {
		return nil, fmt.Errorf("the log holds no experiment.submitted of %s", exp)
	}
	return tr, nil
}

// snapshotLookup bounds reading a snapshot that would only shorten a
// fold of the log.
const snapshotLookup = 30 * time.Second

// snapshotOfLog loads the newest snapshot in storage if it belongs to this
// log (the log holds, at the snapshot's sequence, the event it folded
// last); otherwise it says why not.
func (s *Service) snapshotOfLog(ctx context.Context, expPath, name string, last uint64) (*state.Experiment, string, string) {
	// The log alone is enough: storage that hangs only costs the shortcut.
	sctx, cancel := context.WithTimeout(ctx, snapshotLookup)
	defer cancel()
	st, key, _, err := s.snapshot(sctx, expPath) // a skipped file is logged; the log is the state
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", "no experiment_state-*.json in storage"
	}
	if err != nil {
		return nil, key, fmt.Sprintf("the stored snapshot is unreadable: %v", err)
	}
	why, err := restorestate.OfThisLog(ctx, s.bus, st, name, last)
	if err != nil {
		return nil, key, fmt.Sprintf("cannot check the stored snapshot %s against the log: %v", key, err)
	}
	if why != "" {
		return nil, key, fmt.Sprintf("the stored snapshot %s: %s", key, why)
	}
	return st, key, ""
}

// snapshot loads the newest readable experiment_state-*.json of an
// experiment dir (storage.LoadNewestState) and says which newer ones it
// skipped as damaged, and why, in the log and in skipped; the error wraps
// fs.ErrNotExist when there is none.
func (s *Service) snapshot(ctx context.Context, expPath string) (st *state.Experiment, key string, skipped []string, err error) {
	b, err := storage.OpenBucket(ctx, expPath)
	if err != nil {
		return nil, "", nil, err
	}
	defer b.Close()
	st, key, skips, err := storage.LoadNewestState(ctx, b)
	for _, sk := range skips {
		s.log.Warn().Str("path", expPath).Str("skipped", sk.Key).Str("reason", sk.Err.Error()).Str("snapshot", key).
			Msg("skipped a damaged state file; reading an older one")
		skipped = append(skipped, sk.String())
	}
	if errors.Is(err, state.ErrCorrupt) {
		return nil, key, nil, api.WithCode(api.CodeStateInvalid, fmt.Errorf("%s: %w", storage.Join(expPath, key), err))
	}
	return st, key, skipped, err
}

// validate checks the request against the state and decides what the
// restore runs. From the log, it is the log's trainable; the request's
// must be the same. From a file in storage, it is the request's, checked
// against the stored one; with none, the stored one only when the request
// trusts it — otherwise the restore is refused, naming it (rep.Trainable).
func (s *Service) validate(st *state.Experiment, r api.RestoreRequest, rep *api.RestoreReply) error {
	fromStorage := rep.TrainableFrom == api.TrainableFromStorage
	if r.Trainable == nil && fromStorage && !r.TrustStoredTrainable {
		return api.WithCode(api.CodeTrainableRequired, fmt.Errorf("%w (%s, as the event log does not hold the experiment), and a restore never runs code named by a file in storage: pass the experiment's trainable (tunejet restore %s EXPERIMENT_FILE, or tune.Restore(ctx, path, trainable)), or, if you trust the file, run the one it names with --trust-stored-trainable (tune.WithTrustStoredTrainable): %s",
			restore.ErrTrainableRequired, rep.Snapshot, r.Path, restore.Describe(st.Spec.Trainable)))
	}
	if err := Check(st.Spec, r.Trainable, r.ParamSpace); err != nil {
		return err
	}
	switch {
	case r.Trainable != nil && fromStorage:
		st.Spec.Trainable, rep.TrainableFrom = *r.Trainable, api.TrainableFromCaller
	case fromStorage:
		s.log.Warn().Str("path", r.Path).Str("snapshot", rep.Snapshot).Str("trainable", restore.Describe(st.Spec.Trainable)).
			Msg("running the trainable the state file names, as the request trusts it")
	}
	tr := st.Spec.Trainable
	rep.Trainable = &tr
	return nil
}

// mirrorOf decides where and with which commands the restored run
// mirrors its folder, sets that in st's spec, and returns what
// experiment.restored records (nil: the run keeps the mirror it had). The
// caller's settings (r.Mirror) win. Without them, a restore from a state
// file does not mirror: the file's upload_dir and commands are never used,
// as anyone who can write the storage folder can edit them; a restore
// from the log keeps the log's (experiment.submitted's, or an earlier
// restore's).
func mirrorOf(st *state.Experiment, r api.RestoreRequest, source string) (*events.Mirror, error) {
	var m events.Mirror
	switch {
	case r.Mirror != nil:
		m = *r.Mirror
	case source == api.SourceSnapshot:
	default:
		return nil, nil
	}
	if m.UploadDir == "" {
		m = events.Mirror{} // no mirror: a syncer or exclude alone mean nothing
	}
	if cs := m.Syncer; cs != nil {
		c := blobsync.CommandClient{SyncUpTemplate: cs.SyncUp, SyncDownTemplate: cs.SyncDown, DeleteTemplate: cs.Delete, ExcludeTemplate: cs.ExcludeTemplate}
		if err := c.Validate(); err != nil {
			return nil, api.WithCode(api.CodeBadRequest, fmt.Errorf("restore %s: mirror.syncer: %w", r.Path, err))
		}
	}
	m.ApplyTo(&st.Spec.RunConfig.SyncConfig)
	return &m, nil
}

// Check refuses what a restore request may not change in an experiment
// of spec, with the refusal's code: a trainable other than the
// experiment's (api.CodeTrainableDiffers), a param space that does not
// parse (api.CodeBadRequest) or whose keys are not the experiment's
// (api.CodeParamSpaceDiffers). nil arguments are not checked. tune checks
// the same against a stored snapshot before it asks.
func Check(spec *events.ExperimentSpec, trainable *events.Trainable, paramSpace map[string]any) error {
	if trainable != nil {
		if err := restore.CheckTrainable(spec.Trainable, *trainable); err != nil {
			return api.WithCode(api.CodeTrainableDiffers, err)
		}
	}
	if paramSpace == nil {
		return nil
	}
	if _, err := search.ParseSpace(paramSpace); err != nil {
		return api.WithCode(api.CodeBadRequest, settings.Prefix("param_space", err))
	}
	return api.WithCode(api.CodeParamSpaceDiffers, restore.CheckParamSpace(spec.ParamSpace, paramSpace))
}

// restarter gives a restarted trial a new 8-hex id (as Ray's RESTART does)
// and a new directory.
func restarter(st *state.Experiment) restore.Restarter {
	return func(old *state.Trial) *state.Trial {
		var b [4]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		name := st.Spec.Trainable.Name + "_" + id
		return restore.NewTrial(old, id, st.Spec.Trainable.Name, search.TrialDirName(name, old.Tag, time.Now()))
	}
}

// reachCheckpoints makes sure every trial that will run again finds its
// latest checkpoint in the Object Store: one the store lost is staged
// again from storage, and the trial's reference updated.
func (s *Service) reachCheckpoints(ctx context.Context, st *state.Experiment, expPath string) error {
	obs, err := s.bus.Checkpoints(ctx, st.Name)
	if err != nil {
		return err
	}
	for _, t := range st.TrialList() {
		c := t.LatestCheckpoint()
		if t.Finished() || t.Scheduled { // not to run again (a held PAUSED trial will)
			continue
		}
		if err := checkNames(t, c); err != nil {
			return api.WithCode(api.CodeStateInvalid, err)
		}
		if c == nil || direct.Written(c) {
			// One in storage: a runner that reads storage copies it from
			// there, the syncer stages it for one that cannot.
			continue
		}
		object := c.Object
		if object == "" {
			object = ckpt.LegacyObjectName(t.ID, c.Name)
		}
		if _, err := obs.GetInfo(ctx, object); err == nil {
			continue
		} else if !errors.Is(err, ckpt.ErrObjectNotFound) {
			return err
		}
		if !t.Persisted[c.Name] {
			// The only copy: make sure it is not merely a replica lagging.
			if _, err := ckpt.Info(ctx, obs, object); err == nil {
				continue
			}
			return api.WithCode(api.CodeCheckpointLost, fmt.Errorf("restore trial %s: its latest checkpoint %s is neither in the Object Store nor persisted in storage", t.ID, c.Name))
		}
		staged, err := s.restage(ctx, obs, expPath, t, c.Name, object)
		if err != nil {
			return api.WithCode(api.CodeCheckpointLost, fmt.Errorf("restore trial %s: its latest checkpoint %s is gone from the Object Store and could not be read from storage: %w", t.ID, c.Name, err))
		}
		c.Object, c.Size, c.Digest = object, staged.Size, staged.Digest
	}
	return nil
}

// checkpointName is what every checkpoint is named (the events check the
// same).
var checkpointName = regexp.MustCompile(`^checkpoint_[0-9]{6,}$`)

// checkNames refuses a trial that will run again whose folder or latest
// checkpoint is named like a path: they become local paths (here, on
// runners, in the syncer's stage), and a state file from storage may name
// anything.
func checkNames(t *state.Trial, c *events.CheckpointRef) error {
	if d := t.DirName; d == "" || d == "." || d == ".." || strings.ContainsAny(d, "/\\\x00") {
		return fmt.Errorf("restore trial %s: its folder %q is not a directory name: the state was edited", t.ID, d)
	}
	if c != nil && !checkpointName.MatchString(c.Name) {
		return fmt.Errorf("restore trial %s: its latest checkpoint %q is not named checkpoint_NNNNNN: the state was edited", t.ID, c.Name)
	}
	return nil
}

func (s *Service) restage(ctx context.Context, obs ckpt.Objects, expPath string, t *state.Trial, name, object string) (ckpt.Staged, error) {
	b, err := storage.OpenBucket(ctx, expPath)
	if err != nil {
		return ckpt.Staged{}, err
	}
	defer b.Close()
	tmp, err := os.MkdirTemp("", "tunejet-restore-")
	if err != nil {
		return ckpt.Staged{}, err
	}
	defer func() { _ = os.RemoveAll(tmp) }() // a temporary copy; the restore does not depend on its removal
	dir := filepath.Join(tmp, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ckpt.Staged{}, err
	}
	if err := blobsync.SyncDown(ctx, b, t.DirName+"/"+name+"/", dir, nil); err != nil {
		return ckpt.Staged{}, err
	}
	return ckpt.Stage(ctx, obs, object, dir)
}
