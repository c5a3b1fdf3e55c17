package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/metrics"
	"github.com/tunejet/tunejet/internal/session"
	"github.com/tunejet/tunejet/internal/storage"
)

// Config configures a runner. The zero value is usable.
type Config struct {
	// Name identifies the runner in events and names its work directory.
	// Default "<hostname>-<pid>-<4 hex>".
	Name string
	// CPUs is how many CPUs the runner's trials may hold at once (each
	// holds its trainable.resources cpu, default 1). Default Slots, else
	// runtime.NumCPU().
	CPUs float64
	// Slots is the former name of CPUs, kept: a runner with n slots and
	// no CPUs set has n CPUs.
	Slots int
	// GPUs is how many GPUs the runner has, numbered 0..GPUs-1 unless
	// GPUIDs names them; DetectGPUs finds them (FindGPUs). Default 0.
	GPUs int
	// GPUIDs are the device ids of the runner's GPUs, as
	// CUDA_VISIBLE_DEVICES names them; when set, GPUs is their number.
	GPUIDs []string
	// Memory is the bytes of memory the runner's trials may hold at once;
	// 0: trials that ask for memory do not fit.
	Memory float64
	// Resources are custom resources by name, and how much of each the
	// runner has.
	Resources map[string]float64
	// WorkDir holds the local trial directories (the trainables' working
	// directories). Default <tmp>/tunejet-runner/<Name>.
	WorkDir string
	// Trainables are the Go trainables this runner can run, by name.
	Trainables map[string]session.Func
	// StopGrace is how long a stopped or preempted trainable may take to end
	// (and take a last checkpoint) before it is killed (commands) or
	// abandoned (Go functions). Default 5s.
	StopGrace time.Duration
	// CountPreemption counts a trial handed back because this runner was
	// stopped (SIGTERM) against max_failures. Default false, as in Ray
	// (RAY_TRAIN_COUNT_PREEMPTION_AS_FAILURE).
	CountPreemption bool
	// WorkerIdle is how long a warm worker (a command trainable's fork
	// server, events.Trainable.ForkServer) is kept without trials before
	// it is stopped. Default 60s.
	WorkerIdle time.Duration
	// ReachStorage tells whether this runner can write an experiment's
	// storage itself, once per experiment (checkpoints then go straight
	// to it). Default storage.Reach.
	ReachStorage func(ctx context.Context, storagePath, experiment string) error
}

func (c *Config) setDefaults() {
	host, _ := os.Hostname()
	if c.Name == "" {
		var b [2]byte
		_, _ = rand.Read(b[:])
		c.Name = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if c.CPUs <= 0 {
		c.CPUs = float64(c.Slots)
		if c.Slots <= 0 {
			c.CPUs = numCPU()
		}
	}
	if len(c.GPUIDs) == 0 && c.GPUs > 0 {
		for i := range c.GPUs {
			c.GPUIDs = append(c.GPUIDs, strconv.Itoa(i))
		}
	}
	if c.WorkDir == "" {
		c.WorkDir = filepath.Join(os.TempDir(), "tunejet-runner", c.Name)
	}
	if c.StopGrace <= 0 {
		c.StopGrace = 5 * time.Second
	}
	if c.WorkerIdle <= 0 {
		c.WorkerIdle = 60 * time.Second
	}
	if c.ReachStorage == nil {
		c.ReachStorage = storage.Reach
	}
}

// Service is a running runner.
type Service struct {
	bus      *bus.Bus
	cfg      Config
	log      zerolog.Logger
	hostname string
	pool     *pool         // the capacity the running attempts hold
	changed  chan struct{} // the running attempts changed: rewrite the registry entry

	mu     sync.Mutex
	pulls  map[string]context.CancelFunc // experiment → its pull loop
	runs   map[string]int                // experiment → the run being pulled
	stores map[string]ckpt.Objects       // experiment → its checkpoint bucket
	warm   map[string]*warmSet           // experiment → the warm workers of the run pulled
	active map[string]bus.RunnerTrial    // running attempts, for the registry
	routes routes                        // experiment → how its checkpoints reach storage
	wg     sync.WaitGroup

	python *pythonSDK // the tunejet Python package, for Python trials without one

	hooks testHooks
}

// testHooks let a test of this package force the orders of events that
// races otherwise decide. Nil hooks do nothing.
type testHooks struct {
	// admit gets the shape admit is about to hold, once the gate has read
	// the experiment's work, and returns the shape to hold instead.
	admit func(ctx context.Context, exp string, shape events.Resources) events.Resources
	// took is told of each delivery of trial work, before it is fitted.
	took func(exp string, work *events.TrialScheduled)
	// forked runs when a warm worker has forked pid, before the attempt
	// waits for its end.
	forked func(w *warmWorker, pid int)
	// pulling is told when the runner starts pulling a run's work.
	pulling func(exp string, run int)
	// historyRead is told when an attempt folds its trial's history to
	// find where to resume.
	historyRead func(trial string)
	// idle runs when admit, after a fetch that found no work, is about to
	// wait for some.
	idle func(g *gate)
	// idlePoll, when set, replaces idlePoll.
	idlePoll time.Duration
}

// New returns a runner on b.
func New(b *bus.Bus, cfg Config) *Service {
	cfg.setDefaults()
	host, _ := os.Hostname()
	log := b.Log.With().Str("service", "runner").Str("runner", cfg.Name).Logger()
	return &Service{
		bus: b, cfg: cfg, hostname: host, log: log,
		python: newPythonSDK(filepath.Join(cfg.WorkDir, ".python-sdk"), log),
		pulls:  map[string]context.CancelFunc{}, runs: map[string]int{}, stores: map[string]ckpt.Objects{},
		warm: map[string]*warmSet{}, active: map[string]bus.RunnerTrial{}, changed: make(chan struct{}, 1),
	}
}

// Run pulls and runs trial work until ctx is done, then waits for the
// running trials to be handed back.
func (s *Service) Run(ctx context.Context) error {
	if err := s.bus.Provision(ctx); err != nil {
		return err
	}
	if len(s.cfg.GPUIDs) == 0 && s.cfg.GPUs == DetectGPUs {
		s.cfg.GPUIDs = FindGPUs(ctx)
	}
	s.cfg.GPUs = len(s.cfg.GPUIDs)
	s.pool = newPool(s.cfg.capacity(), s.cfg.GPUIDs)
	unregister, err := s.bus.Register(ctx, "runner", "Run trials pulled from every running experiment")
	if err != nil {
		return err
	}
	defer unregister()
	s.log.Info().Str("capacity", s.pool.total.String()).Strs("gpu_ids", s.cfg.GPUIDs).Msg("runner started")
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.register(ctx) }()
	filter := events.Prefix + ".*." + string(events.WriterController) + ".experiment.*"
	err = s.bus.Watch(ctx, filter, 0, s.experimentsHandler(ctx))
	s.wg.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// experimentsHandler hands the experiments' starts and ends to
// onExperiment. The log is replayed from its start, where a run may have
// ended since, or been replaced by a restored run whose work consumer
// has the same name: a pull started for it would only be cancelled again,
// and could fetch the restored run's work meanwhile. So until the watch
// has caught up only each experiment's last start or end is kept; then
// the runs still going start their pulls, and later events go straight
// to onExperiment.
func (s *Service) experimentsHandler(ctx context.Context) bus.Handler {
	caught := false
	last := map[string]*events.Event{}
	var order []string
	return bus.Handler{
		Event: func(ev *events.Event) {
			if caught {
				s.onExperiment(ctx, ev)
				return
			}
			switch ev.Data.(type) {
			case *events.ExperimentStarted, *events.ExperimentCompleted, *events.ExperimentInterrupted:
				if _, ok := last[ev.Experiment]; !ok {
					order = append(order, ev.Experiment)
				}
				last[ev.Experiment] = ev
			}
		},
		CaughtUp: func() {
			caught = true
			for _, exp := range order {
				if _, started := last[exp].Data.(*events.ExperimentStarted); started {
					s.onExperiment(ctx, last[exp])
				}
			}
			last, order = nil, nil
		},
	}
}

// onExperiment starts pulling an experiment's work when it starts and
// stops when it ends.
func (s *Service) onExperiment(ctx context.Context, ev *events.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp := ev.Experiment
	switch p := ev.Data.(type) {
	case *events.ExperimentStarted:
		if _, ok := s.pulls[exp]; ok && s.runs[exp] >= p.Run {
			return
		}
		if cancel, ok := s.pulls[exp]; ok { // a restored run has a new work consumer
			cancel()
		}
		if s.hooks.pulling != nil {
			s.hooks.pulling(exp, p.Run)
		}
		pctx, cancel := context.WithCancel(ctx)
		s.pulls[exp], s.runs[exp] = cancel, p.Run
		ws := newWarmSet(s, exp)
		s.warm[exp] = ws
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.pull(withWarmSet(pctx, ws), exp)
			ws.close() // its attempts have ended
			s.mu.Lock()
			if s.warm[exp] == ws {
				delete(s.warm, exp)
				metrics.WarmWorkers.DeleteLabelValues(exp) // no stale count of workers gone
				metrics.WarmWorkerRSS.DeleteLabelValues(exp)
			}
			s.mu.Unlock()
		}()
	case *events.ExperimentCompleted, *events.ExperimentInterrupted:
		if cancel, ok := s.pulls[exp]; ok {
			cancel()
			delete(s.pulls, exp)
		}
	}
}

// pull runs the experiment's work, a piece whenever the free capacity
// holds whatever piece may come (see gate), each attempt holding its shape
// of the capacity while it runs and settling its work by what it returns.
func (s *Service) pull(ctx context.Context, exp string) {
	g := newGate(exp)
	gctx, stop := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); s.watchGate(gctx, g) }()
	defer func() { stop(); <-watched }()
	c := bus.Consumer{Name: bus.WorkConsumerName(exp), Existing: true, Admit: s.admit(g), NoWait: true}
	err := s.bus.Consume(ctx, c, func(ctx context.Context, d *bus.Delivery) error {
		if work, ok := eventData[*events.TrialScheduled](d.Event, d.Malformed); ok {
			if s.hooks.took != nil {
				s.hooks.took(exp, work)
			}
			h, err := s.fit(ctx, exp, d, work)
			if err != nil {
				return err
			}
			ctx = session.WithResources(ctx, h.resources())
		}
		return s.runAttempt(ctx, exp, d)
	})
	if err != nil && ctx.Err() == nil {
		s.log.Error().Err(err).Str("experiment", exp).Msg("taking trial work stopped")
	}
}
