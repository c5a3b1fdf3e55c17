package tune

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/session"
	"github.com/tunejet/tunejet/services/controller"
	"github.com/tunejet/tunejet/services/restorer"
	"github.com/tunejet/tunejet/services/runner"
	"github.com/tunejet/tunejet/services/syncer"
)

// StackConfig configures the embedded stack: a nats-server with JetStream
// and the controller, a runner and the syncer in this process.
type StackConfig struct {
	// StoreDir holds JetStream's data. Default ~/.tunejet/jetstream.
	StoreDir string
	// Slots is the runner's CPUs when Capacity sets none (its former
	// name, kept).
	Slots int
	// Capacity is what the runner has: CPUs (default Slots, else the
	// number of CPUs), GPUs, memory and custom resources.
	Capacity RunnerCapacity
	// Trainables are the Go trainables the runner can run.
	Trainables map[string]Trainable
	// Log receives the services' logs.
	Log zerolog.Logger
	// Listen opens a TCP listener on 127.0.0.1, on a free port, so that
	// clients in this process or another reach the stack with NATSOptions;
	// without it the server is reachable only by the stack's own Fit.
	Listen bool
	// Hold starts the stack without its controller and runner until
	// StartWorkers. A restore asks the restorer first, so the controller
	// then starts from the restored state instead of replaying the whole
	// log up to it, and the runner takes no work of the interrupted run
	// (redelivered from before the restore) while the restorer reads it.
	Hold bool
	// Syncer, when set, mirrors each experiment with an upload_dir
	// (WithSyncer).
	Syncer Syncer
}

// Stack is a running embedded stack.
type Stack struct {
	emb *bus.Embedded
	bus *bus.Bus // the client's (Fit's)
	// services are the services' buses, each on its own connection, as
	// in a deployment, so no connection's read loop carries everyone's
	// deliveries.
	services []*bus.Bus
	log      zerolog.Logger

	stopFront context.CancelFunc // controller and runner
	frontCtx  context.Context
	workers   func() // starts the controller and the runner
	once      sync.Once
	stopSync  context.CancelFunc // syncer, stopped last so it sees everything
	front     sync.WaitGroup
	back      sync.WaitGroup
	errMu     sync.Mutex
	err       error
}

// StartStack starts the embedded stack.
func StartStack(ctx context.Context, cfg StackConfig) (*Stack, error) {
	emb, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: cfg.StoreDir, Listen: cfg.Listen, Port: -1})
	if errors.Is(err, bus.ErrStoreInUse) {
		return nil, fmt.Errorf("%w; another tunejet runs on this store: wait for it to end, or give this one its own store dir (--store-dir, tune.WithStoreDir)", err)
	}
	if err != nil {
		return nil, err
	}
	s := &Stack{emb: emb, log: cfg.Log}
	if s.bus, err = emb.Dial("tunejet-embedded", "tunejet/embedded", cfg.Log); err != nil {
		emb.Shutdown()
		return nil, err
	}
	s.bus.EmbeddedStore = emb.StoreDir
	if err := s.bus.Provision(ctx); err != nil {
		_ = s.Close() // the error that stopped the start is the one to return
		return nil, err
	}
	fns := map[string]session.Func{}
	for k, v := range cfg.Trainables {
		fns[k] = v
	}
	buses := map[string]*bus.Bus{}
	for _, name := range []string{"controller", "runner", "syncer", "restorer"} {
		if buses[name], err = s.service(name); err != nil {
			_ = s.Close() // the error that stopped the start is the one to return
			return nil, err
		}
	}
	frontCtx, stopFront := context.WithCancel(context.WithoutCancel(ctx))
	syncCtx, stopSync := context.WithCancel(context.WithoutCancel(ctx))
	s.stopFront, s.stopSync, s.frontCtx = stopFront, stopSync, frontCtx
	s.workers = func() {
		s.start(frontCtx, &s.front, "controller", controller.New(buses["controller"], controller.Config{InterruptOnShutdown: true}).Run)
		s.start(frontCtx, &s.front, "runner", runner.New(buses["runner"], runner.Config{
			Slots: cfg.Slots, CPUs: cfg.Capacity.CPUs, GPUs: cfg.Capacity.GPUs, GPUIDs: cfg.Capacity.GPUIDs,
			Memory: cfg.Capacity.Memory, Resources: cfg.Capacity.Custom, Trainables: fns,
		}).Run)
	}
	if !cfg.Hold {
		s.StartWorkers()
	}
	s.start(syncCtx, &s.back, "syncer", syncer.New(buses["syncer"], syncer.Config{Client: cfg.Syncer}).Run)
	s.start(frontCtx, &s.front, "restorer", restorer.New(buses["restorer"], restorer.Config{}).Run)
	return s, nil
}

// StartWorkers starts the stack's controller and runner, once.
func (s *Stack) StartWorkers() { s.once.Do(s.workers) }

// service gives a service its own in-process connection and CloudEvents
// source.
func (s *Stack) service(name string) (*bus.Bus, error) {
	b, err := s.emb.Dial("tunejet-embedded-"+name, "tunejet/embedded/"+name, s.log)
	if err != nil {
		return nil, err
	}
	s.services = append(s.services, b)
	b.Replicas, b.EmbeddedStore = s.bus.Replicas, s.bus.EmbeddedStore
	return b, nil
}

func (s *Stack) start(ctx context.Context, wg *sync.WaitGroup, name string, run func(context.Context) error) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.errMu.Lock()
			s.err = errors.Join(s.err, fmt.Errorf("%s: %w", name, err))
			s.errMu.Unlock()
		}
	}()
}

// NATSOptions reach the stack's server, for WithNATS, when it listens
// (StackConfig.Listen); without a listener URL is empty.
func (s *Stack) NATSOptions() NATSOptions {
	return NATSOptions{URL: s.emb.URL()}
}

// drainWait bounds the drain of each connection when a stack closes.
const drainWait = 5 * time.Second

// Close stops the services — the controller and runner first, then the
// syncer once it has written what they published — and the server.
func (s *Stack) Close() error {
	if s.stopFront != nil {
		s.stopFront()
		s.front.Wait()
		s.stopSync()
		s.back.Wait()
	}
	for _, b := range s.services {
		_ = b.Drain(drainWait)
	}
	if s.bus != nil {
		_ = s.bus.Drain(drainWait)
	}
	s.emb.Shutdown()
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}
