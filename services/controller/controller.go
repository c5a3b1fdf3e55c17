package controller

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
)

// Config configures a controller. The zero value is usable.
type Config struct {
	// StoragePath is the storage used by experiments that name none.
	// Default ~/tunejet_results.
	StoragePath string
	// MaxPending caps in-flight trials when an experiment sets no
	// max_concurrent_trials. Default DefaultMaxPending.
	MaxPending int
	// Tick is how often each experiment is reconciled even without new
	// events (time budgets). Default 200ms.
	Tick time.Duration
	// InterruptOnShutdown publishes experiment.interrupted for running
	// experiments when the controller stops (the embedded stack does; a
	// deployed controller leaves them to its successor).
	InterruptOnShutdown bool
}

func (c *Config) setDefaults() {
	if c.MaxPending <= 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.Tick <= 0 {
		c.Tick = 200 * time.Millisecond
	}
}

// Service is a running controller.
type Service struct {
	bus *bus.Bus
	cfg Config
	log zerolog.Logger

	loops bus.Loops // one reconcile loop per followed experiment
	live  liveRunners

	// livenessHeld, in tests, holds the liveness watch back until it is
	// closed.
	livenessHeld <-chan struct{}
}

// New returns a controller on b.
func New(b *bus.Bus, cfg Config) *Service {
	cfg.setDefaults()
	return &Service{bus: b, cfg: cfg, log: b.Log.With().Str("service", "controller").Logger()}
}

// Run follows submitted experiments until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	// Stopped while it sets up is stopped, not failed.
	stopped := func(err error) error {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := s.bus.Provision(ctx); err != nil {
		return stopped(err)
	}
	if err := s.bus.ProvisionBuckets(ctx); err != nil {
		return stopped(err)
	}
	unregister, err := s.bus.Register(ctx, "controller", "Decide and schedule trials of submitted experiments")
	if err != nil {
		return stopped(err)
	}
	defer unregister()
	lctx, stopLiveness := context.WithCancel(ctx)
	livenessDone := make(chan struct{})
	go func() {
		defer close(livenessDone)
		if s.livenessHeld != nil {
			select {
			case <-s.livenessHeld:
			case <-lctx.Done():
				return
			}
		}
		if err := newLivenessWatcher(s).run(lctx); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error().Err(err).Msg("liveness watch ended; dead runners are noticed by the heartbeat timeout only")
			if !s.live.read() { // schedule without the registry rather than not at all
				s.live.set(map[string]*watchedRunner{})
			}
		}
	}()
	defer func() { stopLiveness(); <-livenessDone }()
	filters := []string{
		events.TypeSubjects("*", events.WriterClient, events.TypeExperimentSubmitted),
		events.TypeSubjects("*", events.WriterRestorer, events.TypeExperimentRestored),
	}
	err = s.bus.WatchSubjects(ctx, filters, 0, bus.Handler{
		Event:   func(ev *events.Event) { s.follow(ctx, ev.Experiment) },
		Invalid: s.deadLetter(ctx),
	})
	s.loops.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (s *Service) deadLetter(ctx context.Context) func(m bus.Raw, err error) {
	return func(m bus.Raw, err error) { s.bus.DeadLetter(ctx, m.Subject, m.Sequence, m.Header, m.Data, err) }
}

// follow starts the reconcile loop of an experiment, once.
func (s *Service) follow(ctx context.Context, exp string) {
	s.loops.Start(ctx, exp, "experiment loop ended", s.log, newReconciler(s, exp).run)
}

func randomSeed() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.LittleEndian.Uint64(b[:]) >> 1)
}

func randomPrefix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])[:5]
}
