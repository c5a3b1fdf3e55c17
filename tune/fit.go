package tune

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/clock"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// ErrInterrupted is returned by Fit when ctx ends before the experiment.
var ErrInterrupted = errors.New("experiment interrupted")

// ErrExists is returned when an experiment of the same name already exists.
var ErrExists = errors.New("experiment already exists")

// Why Fit (and Restore) refuse a bucket storage_path before anything is
// submitted: the syncer cannot write a probe object there. errors.Is
// matches one of them on the error, whose message is one line naming the
// storage path, the reason and the storage SDK's own words.
var (
	ErrNoCredentials = storage.ErrNoCredentials
	ErrAccessDenied  = storage.ErrAccessDenied
	ErrNoSuchBucket  = storage.ErrNoSuchBucket
	ErrUnreachable   = storage.ErrUnreachable
)

// TrialError is returned by Fit when a trial failed and fail_fast is
// "raise": it carries the trainable's error.
type TrialError struct {
	Experiment string
	Message    string
}

func (e *TrialError) Error() string {
	return fmt.Sprintf("experiment %q stopped by fail_fast: %s", e.Experiment, e.Message)
}

// Fit runs the experiment to its end and returns its results. A trial that
// fails does not make Fit fail; its error is in the results. An experiment
// the controller ends as invalid — a result without the experiment's
// metric fails Ray's strict metric check (EnvDisableStrictMetricChecking
// turns it off) — returns the results and an error wrapping
// ErrInvalidConfig.
func (t *Tuner) Fit(ctx context.Context) (*ResultGrid, error) {
	if t.restore != nil && t.restore.path != "" {
		return t.fitRestored(ctx)
	}
	s, err := t.Spec()
	if err != nil {
		return nil, err
	}
	if err := warmStart(ctx, &s); err != nil {
		return nil, err
	}
	if !t.newRun {
		if err := checkFresh(s); err != nil {
			return nil, err
		}
	}
	// The embedded workers of a new run wait until the old run has left
	// the log: a controller must not follow the old one.
	b, stack, closeFn, err := t.connect(ctx, !t.newRun)
	if err != nil {
		return nil, err
	}
	st, err := t.submitAndWatch(ctx, b, stack, s)
	if cerr := closeFn(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return t.finish(st)
}

// finish turns the final state into results and Fit's error.
func (t *Tuner) finish(st *state.Experiment) (*ResultGrid, error) {
	grid := newResultGrid(st, st.StoragePath)
	t.results = grid
	if st.EndReason == "fail_fast" && st.Error != "" {
		return grid, &TrialError{Experiment: st.Name, Message: st.Error}
	}
	if st.EndReason == "invalid" {
		return grid, fmt.Errorf("%w: %s", ErrInvalidConfig, st.Error)
	}
	return grid, nil
}

// checkFresh refuses to start over an experiment that already has state.
func checkFresh(s Spec) error {
	if storage.IsURL(s.RunConfig.StoragePath) {
		return nil
	}
	dir, err := storage.Open(s.RunConfig.StoragePath, s.Name)
	if err != nil {
		return err
	}
	if name, err := dir.NewestState(); err == nil {
		return fmt.Errorf("%w: %s has state (%s): resume it with `tunejet run --resume auto FILE` or `tunejet restore %s` (tune.Restore in Go), or choose another name", ErrExists, dir.Root, name, dir.Root)
	}
	return nil
}

// connect returns a bus to submit on: a deployment's, or an embedded stack
// (returned too, nil for a deployment) whose controller and runner start
// only when startWorkers says so.
func (t *Tuner) connect(ctx context.Context, startWorkers bool) (*bus.Bus, *Stack, func() error, error) {
	if t.nats != nil {
		b, closeFn, err := t.dial(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := b.Provision(ctx); err != nil {
			_ = closeFn()
			return nil, nil, nil, err
		}
		return b, nil, closeFn, nil
	}
	fns := map[string]Trainable{}
	if t.fn != nil {
		fns[t.spec.Trainable.Name] = t.fn
	}
	stack, err := StartStack(ctx, StackConfig{StoreDir: t.storeDir, Slots: t.slots, Capacity: t.capacity, Trainables: fns, Log: t.log, Hold: !startWorkers, Syncer: t.syncer})
	if err != nil {
		return nil, nil, nil, err
	}
	b := *stack.bus
	b.Source = "tunejet/client/" + hostname()
	return &b, stack, stack.Close, nil
}

// dial connects to the deployment WithNATS names.
func (t *Tuner) dial(ctx context.Context) (*bus.Bus, func() error, error) {
	b, err := bus.Dial(ctx, t.nats.connectOptions(), "tunejet/client/"+hostname(), t.log)
	if err != nil {
		return nil, nil, err
	}
	return b, b.StartDrain, nil
}

func hostname() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}

// submitAndWatch publishes the experiment and folds its events until it
// completes, drawing progress if asked. stack is the embedded one, whose
// workers it starts, or nil.
func (t *Tuner) submitAndWatch(ctx context.Context, b *bus.Bus, stack *Stack, s Spec) (*state.Experiment, error) {
	last, err := b.LastSeq(ctx, events.TypeSubjects(s.Name, events.WriterClient, events.TypeExperimentSubmitted))
	if err != nil {
		return nil, err
	}
	if last != 0 && !t.newRun {
		return nil, fmt.Errorf("%w: the event log already holds an experiment named %q: resume it with `tunejet run --resume auto FILE` or `tunejet restore %s`, or choose another name", ErrExists, s.Name, storage.Join(s.RunConfig.StoragePath, s.Name))
	}
	if last != 0 {
		if err := forgetEnded(ctx, b, s.Name, stack == nil); err != nil {
			return nil, err
		}
	}
	if stack != nil {
		stack.StartWorkers()
	}
	answered, err := claimFolder(ctx, b, s)
	if err != nil {
		return nil, err
	}
	if answered { // else no syncer answers the check either: the first sync checks
		if err := checkShared(ctx, b, s); err != nil {
			return nil, err
		}
	}
	if err := uploadObjects(ctx, b, s.Name, s.ParamSpace, t.objects); err != nil {
		return nil, err
	}
	ev := b.Event(s.Name, events.WriterClient, &events.ExperimentSubmitted{Spec: s})
	ev.ID = s.Name + ".submitted"
	if last != 0 { // a new run: its id must differ from the forgotten one's
		ev.ID = fmt.Sprintf("%s.submitted.after%d", s.Name, last)
	}
	seq, err := b.Publish(ctx, ev)
	if err != nil {
		return nil, err
	}
	return t.watchFrom(ctx, b, s.Name, seq)
}

// forgetEnded removes experiment name's old run from the log, for
// WithNewRun. A run that is live is refused with ErrExists: one whose
// controller holds the lease, and on a deployment one that has neither
// completed nor been interrupted (a controller may take it over). On the
// embedded stack, which holds its store alone, any other run has ended.
func forgetEnded(ctx context.Context, b *bus.Bus, name string, deployment bool) error {
	live := func(why any) error {
		return fmt.Errorf("%w: a run of %q is live (%v): wait for it to end, stop it (Ctrl-C its tunejet run, or tunejet stop %s), or choose another name", ErrExists, name, why, name)
	}
	if deployment {
		old, err := restorestate.Logged(ctx, b, name)
		if err != nil {
			return err
		}
		if !old.Done() && old.Status != state.ExperimentInterrupted {
			return live(old.Status)
		}
	}
	if _, err := b.Forget(ctx, name); errors.Is(err, bus.ErrLeaseHeld) {
		return live(err)
	} else if err != nil {
		return err
	}
	return nil
}

// claimFolder has the deployment's syncer make this deployment the
// owner of the experiment's folder in storage before anything is
// submitted, or refuse, naming the deployment that owns it
// (storage.ClaimOwner): two deployments must never write one folder. The
// syncer does it because a client may hold no storage credentials. With
// no syncer answering, or storage failing, the experiment is submitted
// and the syncer claims the folder when it first opens it; without a
// storage path, the deployment chooses the folder and its syncer claims
// it the same way. answered says whether a syncer answered.
func claimFolder(ctx context.Context, b *bus.Bus, s Spec) (answered bool, err error) {
	if s.RunConfig.StoragePath == "" {
		return true, nil // nothing to ask; checkShared has nothing to check either
	}
	me := storage.NewOwner("", "", b.EmbeddedStore != "", events.Seconds(s.RunConfig.SyncConfig.SyncPeriodS))
	req := storage.ClaimRequest{StoragePath: s.RunConfig.StoragePath, Experiment: s.Name, Host: me.Host, PID: me.PID, Embedded: me.Embedded, RenewEveryS: me.RenewEveryS}
	var r storage.ClaimReply
	if answered, err := askSyncer(ctx, b, storage.ClaimSubject, req, &r, 5*time.Second); err != nil || !answered {
		return answered, err
	}
	if r.Owned {
		return true, fmt.Errorf("%w: %s", storage.ErrOwned, strings.TrimPrefix(r.Error, storage.ErrOwned.Error()+": "))
	}
	if r.Error != "" {
		// Storage failing, not owned by another: the experiment never
		// waits for storage, and the syncer claims the folder when it
		// first opens it (and writes nothing there if another owns it).
		// Not a warning: the storage check that follows names a failure
		// that will not pass, and the syncer one that may.
		b.Log.Debug().Str("storage_path", s.RunConfig.StoragePath).Str("error", r.Error).
			Msg("the syncer could not claim the experiment's folder yet; submitting, and it claims it when it opens storage")
	}
	return true, nil
}

// sharedCheckWait bounds how long a client waits for a syncer to answer
// (its storage check or claim) before it submits without one.
const sharedCheckWait = 10 * time.Second

// askSyncer asks a syncer on subject, each try bounded by wait, again
// while none answers, for up to sharedCheckWait; answered is false when
// none did (logged).
func askSyncer(ctx context.Context, b *bus.Bus, subject string, req, reply any, wait time.Duration) (answered bool, err error) {
	for giveUp := time.Now().Add(sharedCheckWait); ; {
		rctx, cancel := context.WithTimeout(ctx, wait)
		err := b.Request(rctx, subject, req, reply)
		cancel()
		if errors.Is(err, bus.ErrBadReply) {
			return false, fmt.Errorf("the syncer's answer: %w", err)
		}
		if err == nil {
			return true, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if time.Now().After(giveUp) {
			b.Log.Warn().Err(err).Str("subject", subject).Msg("no syncer answered; submitting, and the first sync checks the storage")
			return false, nil
		}
		if clock.Sleep(ctx, 200*time.Millisecond) != nil {
			return false, ctx.Err()
		}
	}
}

// checkShared refuses, before anything is submitted, storage the syncer
// cannot write to. For a path on a file system it is one the syncer does
// not see (Ray's "Unable to set up cluster storage"): the client writes the
// experiment's marker with a token, and a syncer says whether it reads the
// same token at the same path. For a bucket, the syncer writes and deletes
// a probe object (storage.Reach) and the error names why it could not: no
// credentials, access denied, no such bucket, unreachable endpoint. With no
// syncer answering, the experiment is submitted and the first sync checks
// the storage again.
func checkShared(ctx context.Context, b *bus.Bus, s Spec) error {
	path := s.RunConfig.StoragePath
	if path == "" {
		return nil // the controller's default; its deployment decides where that is
	}
	token, err := storage.WriteToken(path, s.Name)
	if err != nil {
		return err
	}
	return checkStorage(ctx, b, storage.SharedCheck{StoragePath: path, Experiment: s.Name, Token: token})
}

// checkStorage asks a syncer the storage check req and returns its
// refusal; nil when it sees the storage, or when none answers within
// sharedCheckWait.
func checkStorage(ctx context.Context, b *bus.Bus, req storage.SharedCheck) error {
	// A probe of a bucket takes up to storage.ReachTimeout.
	wait := 2 * time.Second
	if req.Token == "" {
		wait += storage.ReachTimeout
	}
	var r storage.SharedCheckReply
	if answered, err := askSyncer(ctx, b, storage.SharedCheckSubject, req, &r, wait); err != nil || !answered {
		return err
	}
	return unlessPassing(b.Log, r.Err(req.StoragePath))
}

// unlessPassing is err, but nil for a bucket that failed the probe for
// none of the reasons storage.Reach names (a server error, a slow-down):
// such a failure may pass, and the syncer tries again, so the experiment is
// submitted, with a warning.
func unlessPassing(log zerolog.Logger, err error) error {
	var re *storage.ReachError
	if errors.As(err, &re) && re.Reason == nil {
		log.Warn().Err(err).Msg("the storage check failed for a reason that may pass; going on, and the syncer tries again")
		return nil
	}
	return err
}

// ErrNoExperiment is returned by Watch when the event log holds no
// experiment of that name.
var ErrNoExperiment = errors.New("no such experiment in the event log")

// ExperimentState is an experiment as Watch saw it last.
type ExperimentState struct {
	Name string
	// Status is PENDING, RUNNING, INTERRUPTED or COMPLETED.
	Status string
	// EndReason says why the experiment ended, and Error what failed, if
	// anything did.
	EndReason, Error string
	// Counts are the trials by status.
	Counts map[string]int
	// Results are the trials' results.
	Results *ResultGrid
}

func newExperimentState(st *state.Experiment) *ExperimentState {
	return &ExperimentState{Name: st.Name, Status: st.Status, EndReason: st.EndReason, Error: st.Error,
		Counts: st.Counts(), Results: newResultGrid(st, st.StoragePath)}
}

// Watch follows the experiment name on the deployment WithNATS names
// until it completes or is interrupted and the syncer has written its
// final state (WithSyncWait bounds that wait), drawing the status table on
// the WithProgress writer as it goes. When ctx ends first it returns
// ErrInterrupted: the experiment keeps running. It returns the state it
// saw last, also with an error.
func Watch(ctx context.Context, name string, opts ...Option) (*ExperimentState, error) {
	t, err := NewTuner(nil, opts...)
	if err != nil {
		return nil, err
	}
	if t.nats == nil {
		return nil, fmt.Errorf("%w: Watch needs WithNATS: the embedded stack lives only while Fit runs", ErrInvalidConfig)
	}
	if err := events.ValidateID("experiment name", name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	b, closeFn, err := t.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = closeFn() }()
	if last, err := b.LastSeq(ctx, events.ExperimentSubjects(name)); err != nil {
		return nil, err
	} else if last == 0 {
		return nil, fmt.Errorf("%w: %q", ErrNoExperiment, name)
	}
	st, err := t.watchFrom(ctx, b, name, 0)
	if st == nil {
		return nil, err
	}
	return newExperimentState(st), err
}

// watchFrom folds an experiment's events from a log sequence until it
// completes or is interrupted and the syncer has written the final state,
// drawing the status table as it goes. A restored run is watched from its
// experiment.restored event, which carries the state it starts from.
func (t *Tuner) watchFrom(ctx context.Context, b *bus.Bus, name string, from uint64) (*state.Experiment, error) {
	var mu sync.Mutex
	st := state.New(name)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var table *statusTable
	if t.progress != nil {
		table = newStatusTable(t.progress, t.verbose)
		table.registry, table.reporter = b, t.reporter
		stop := table.run(wctx, func(f func(*state.Experiment)) { mu.Lock(); defer mu.Unlock(); f(st) })
		defer stop()
	}
	rel, err := t.startRelay(ctx, b, name, from, cancel) // nil without WithDriver
	if err != nil {
		return st, err
	}
	defer rel.stop()
	var endSeq, synced uint64
	var giveUp *time.Timer
	var shareErr error
	var foldErr error
	err = b.Watch(wctx, events.ExperimentSubjects(name), from, bus.Handler{Event: func(ev *events.Event) {
		mu.Lock()
		defer mu.Unlock()
		next, _, ferr := state.Fold(wctx, st, ev, restorestate.Loader(b, st.Name))
		if ferr != nil {
			foldErr = ferr
			cancel()
			return
		}
		st = next
		// A sync of the log before from (an old run of the name) says
		// nothing of this run.
		if p, ok := ev.Data.(*events.SyncCompleted); ok && p.Seq >= from {
			if synced == 0 && shareErr == nil {
				// The first sync wrote the storage marker: a local storage
				// path must show it here, or the syncer writes elsewhere.
				if shareErr = storage.CheckShared(st.StoragePath, name); shareErr != nil {
					cancel()
				}
			}
			synced = max(synced, p.Seq)
		}
		if endSeq == 0 && (st.Done() || st.Status == state.ExperimentInterrupted) {
			endSeq = ev.Seq
			giveUp = time.AfterFunc(t.syncWait, cancel)
		}
		if endSeq != 0 && synced >= endSeq {
			cancel()
		}
	}})
	mu.Lock()
	defer mu.Unlock()
	if giveUp != nil {
		giveUp.Stop()
	}
	if shareErr != nil {
		return st, shareErr
	}
	if foldErr != nil {
		return st, foldErr
	}
	if rerr := rel.failed(); rerr != nil {
		return st, rerr
	}
	if endSeq != 0 && synced < endSeq {
		b.Log.Warn().Str("experiment", name).Dur("waited", t.syncWait).Msg("the syncer did not confirm the final state; storage may lag behind")
	}
	if st.Done() {
		if table != nil {
			table.final(st)
		}
		return st, rel.wait(ctx, endSeq)
	}
	if ctx.Err() != nil || st.Status == state.ExperimentInterrupted {
		if table != nil {
			table.final(st) // the last table, as Ray prints it when interrupted
		}
		return st, fmt.Errorf("%w: %s", ErrInterrupted, name)
	}
	return st, err
}

// pollEvery is how often the status table is redrawn.
const pollEvery = time.Second
