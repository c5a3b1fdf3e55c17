package syncer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
)

// Config configures a syncer. The zero value is usable.
type Config struct {
	// Period is how often a changed experiment's state snapshot is
	// written. Default 1s.
	Period time.Duration
}

// Service is a running syncer.
type Service struct {
	bus *bus.Bus
	cfg Config
	log zerolog.Logger

	mu   sync.Mutex
	exps map[string]bool
	wg   sync.WaitGroup
}

// New returns a syncer on b.
func New(b *bus.Bus, cfg Config) *Service {
	if cfg.Period <= 0 {
		cfg.Period = time.Second
	}
	return &Service{bus: b, cfg: cfg, log: b.Log.With().Str("service", "syncer").Logger(), exps: map[string]bool{}}
}

// Run follows started experiments until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	if err := s.bus.Provision(ctx); err != nil {
		return err
	}
	filter := events.TypeSubjects("*", events.WriterController, events.TypeExperimentStarted)
	err := s.bus.Watch(ctx, filter, 0, bus.Handler{Event: func(ev *events.Event) { s.follow(ctx, ev.Experiment) }})
	s.wg.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (s *Service) follow(ctx context.Context, exp string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exps[exp] {
		return
	}
	s.exps[exp] = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		w := newWriter(s, exp)
		if err := w.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error().Err(err).Str("experiment", exp).Msg("syncing stopped")
		}
		s.mu.Lock()
		delete(s.exps, exp)
		s.mu.Unlock()
	}()
}
