package runner

import (
	"context"
	"os"
	"sort"
	"time"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/session"
)

// register keeps this runner's entry in the registry alive until ctx ends,
// then removes it. The entry is rewritten at once when an attempt starts or
// ends, so it names the work of every running attempt.
// The registry is the controller's to create: a runner that starts first
// waits for it.
//
// While it is registered the runner answers liveness requests: a
// controller that finds nobody answering (the connection closed: the
// process died) hands the entry's work to other runners at once.
func (s *Service) register(ctx context.Context) {
	if stop, err := s.bus.AnswerLiveness(s.cfg.Name); err != nil {
		s.log.Warn().Err(err).Msg("cannot answer liveness requests; only the heartbeat timeout will notice this runner's death")
	} else {
		defer stop() // after the entry is gone: nobody looks for its work then
	}
	started := time.Now().UTC()
	put := func(ctx context.Context) {
		info := bus.RunnerInfo{
			Name: s.cfg.Name, Hostname: s.hostname, PID: os.Getpid(), Slots: int(s.cfg.CPUs), Started: started, Trials: s.running(),
			Capacity: s.pool.total, GPUIDs: s.cfg.GPUIDs, Workers: s.warmWorkers(),
		}
		if _, err := s.bus.PutRunnerInfo(ctx, info); err != nil && ctx.Err() == nil {
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
		case <-s.changed:
			put(ctx)
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = s.bus.RemoveRunnerInfo(dctx, s.cfg.Name)
			cancel()
			return
		}
	}
}

// track lists a starting attempt, with its work's ack subject, in the
// registry entry; the returned func takes it off.
func (s *Service) track(a *attempt) func() {
	key := a.exp + "/" + a.work.TrialID
	t := bus.RunnerTrial{Experiment: a.exp, TrialID: a.work.TrialID, Attempt: a.num, Ack: a.msg.Reply(), Delivery: a.tries}
	if r, ok := session.ResourcesFrom(a.ctx); ok {
		t.Resources, t.GPUIDs = r.Amounts, r.GPUIDs
	}
	s.mu.Lock()
	s.active[key] = t
	s.mu.Unlock()
	s.entryChanged()
	return func() {
		s.mu.Lock()
		delete(s.active, key)
		s.mu.Unlock()
		s.entryChanged()
	}
}

// entryChanged asks register to rewrite the registry entry now.
func (s *Service) entryChanged() {
	select {
	case s.changed <- struct{}{}:
	default: // a rewrite is pending; it will read the latest attempts
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
