package runner

import (
	"context"
	"os"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/internal/bus"
)

// register keeps this runner's entry in the registry alive until ctx ends,
// then removes it.
// The registry is the controller's to create: a runner that starts first
// waits for it.
func (s *Service) register(ctx context.Context) {
	started := time.Now().UTC()
	var kv jetstream.KeyValue
	put := func(ctx context.Context) {
		if kv == nil {
			found, ok, err := s.bus.ExistingRunners(ctx)
			if err != nil || !ok {
				return
			}
			kv = found
		}
		info := bus.RunnerInfo{Name: s.cfg.Name, Hostname: s.hostname, PID: os.Getpid(), Slots: s.cfg.Slots, Started: started, Trials: s.running()}
		if err := bus.PutRunner(ctx, kv, info); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("renew registry entry")
		}
	}
	put(ctx)
	t := time.NewTicker(bus.RunnerTTL / 4)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			put(ctx)
		case <-ctx.Done():
			if kv != nil {
				dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_ = kv.Delete(dctx, s.cfg.Name)
				cancel()
			}
			return
		}
	}
}

func (s *Service) track(a *attempt) func() {
	key := a.exp + "/" + a.work.TrialID
	s.mu.Lock()
	s.active[key] = bus.RunnerTrial{Experiment: a.exp, TrialID: a.work.TrialID, Attempt: a.num}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.active, key)
		s.mu.Unlock()
	}
}

func (s *Service) running() []bus.RunnerTrial {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]bus.RunnerTrial, 0, len(s.active))
	for _, t := range s.active {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Experiment+out[i].TrialID < out[j].Experiment+out[j].TrialID })
	return out
}
