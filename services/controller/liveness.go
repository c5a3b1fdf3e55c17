package controller

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/clock"
)

// The liveness watch notices a runner process that died well before the
// heartbeat timeout does. A dead process's connection closes at once, and
// with it the runner's subscription to its liveness subject: a request
// there then fails with no responders. The watcher asks every registered
// runner every livenessEvery; a runner it had found present since its own
// connection last (re)connected, and that then has no subscriber on
// polls spanning livenessGrace (three in a row: long enough to reconnect to
// another server of a cluster), is gone: the watcher naks the work of its attempts in the experiments
// this controller leads, and JetStream redelivers it at once. A nak spends
// a delivery, as the heartbeat timeout's redelivery does; the next attempt
// fences the old one by its attempt number, as always.
//
// A frozen or busy runner keeps its connection and its subscription: a
// request to it times out, which counts as present. Only the heartbeat
// timeout redelivers a frozen runner's work, as before.
const (
	livenessEvery   = 250 * time.Millisecond
	livenessGrace   = 400 * time.Millisecond // polls at 0, 250 and 500 ms: the third declares
	livenessTimeout = 200 * time.Millisecond
	livenessProbes  = 64 // requests in flight at once
)

// livenessWatcher is the state of one controller's liveness watch.
type livenessWatcher struct {
	bus        *bus.Bus
	log        zerolog.Logger
	every      time.Duration
	grace      time.Duration
	runners    map[string]*watchedRunner
	handled    map[string]time.Time // ack subjects already decided on, and when
	reconnects uint64
	live       *liveRunners // what the reconcilers read of the registry
}

// watchedRunner is one registry entry and what the watch learned of it.
type watchedRunner struct {
	info    bus.RunnerInfo
	updated time.Time // when this process last received the entry
	// seen: found present since the watcher's connection last connected.
	// Only such a runner can be declared gone: a subscription that has not
	// reached this server yet, or a view from before a reconnect, proves
	// nothing.
	seen      bool
	goneSince time.Time // first probe of the current run of Gone; zero if present
}

func newLivenessWatcher(s *Service) *livenessWatcher {
	return &livenessWatcher{
		bus: s.bus, log: s.log.With().Str("part", "liveness").Logger(), every: livenessEvery, grace: livenessGrace,
		runners: map[string]*watchedRunner{}, handled: map[string]time.Time{}, live: &s.live,
	}
}

// run follows the runner registry and probes the runners until ctx ends.
func (w *livenessWatcher) run(ctx context.Context) error {
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for {
		wctx, stop := context.WithCancel(ctx)
		updates, err := w.bus.WatchRunners(wctx)
		if err != nil {
			stop()
			return err
		}
		err = w.follow(ctx, updates, tick.C)
		stop()
		if err != nil {
			return err
		}
		w.log.Warn().Msg("runner registry watch ended; watching again")
		if clock.Sleep(ctx, time.Second) != nil {
			return ctx.Err()
		}
	}
}

// follow applies registry updates and probes on every tick; it returns nil
// if the watch ends by itself.
func (w *livenessWatcher) follow(ctx context.Context, updates <-chan bus.RunnerUpdate, tick <-chan time.Time) error {
	for {
		select {
		case u, ok := <-updates:
			if !ok {
				return ctx.Err()
			}
			if !u.Current {
				w.update(u)
			}
			w.live.set(w.runners) // Current: the registry is read, runners or none
		case <-tick:
			w.poll(ctx)
			w.live.set(w.runners)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// update records a registry entry, or its removal.
func (w *livenessWatcher) update(u bus.RunnerUpdate) {
	if u.Info == nil {
		delete(w.runners, u.Name)
		return
	}
	r := w.runners[u.Name]
	if r == nil {
		r = &watchedRunner{}
		w.runners[u.Name] = r
	}
	r.info, r.updated = *u.Info, time.Now()
}

// poll probes every registered runner once and hands on the work of those
// found gone.
func (w *livenessWatcher) poll(ctx context.Context) {
	now := time.Now()
	if !w.connectionSteady() {
		return
	}
	for name, r := range w.runners {
		// Expired entries are not announced to a watch: forget an entry
		// not renewed for the registry's TTL.
		if now.Sub(r.updated) > bus.RunnerTTL {
			delete(w.runners, name)
		}
	}
	for ack, at := range w.handled {
		if now.Sub(at) > 2*bus.RunnerTTL { // no live entry can still list it
			delete(w.handled, ack)
		}
	}
	names, found := w.probe(ctx)
	for i, name := range names {
		r := w.runners[name]
		if found[i] == bus.Present {
			r.seen, r.goneSince = true, time.Time{}
			continue
		}
		if !r.seen {
			continue
		}
		if r.goneSince.IsZero() {
			r.goneSince = now
		}
		if now.Sub(r.goneSince) >= w.grace {
			w.handOn(ctx, r)
		}
	}
}

// connectionSteady reports whether this controller's own connection has
// been up since the last poll. After a reconnect every runner must be found
// present again before it can be declared gone: the server reached now may
// not know every subscription yet.
func (w *livenessWatcher) connectionSteady() bool {
	rc := w.bus.Reconnects()
	up := w.bus.Connected()
	if rc == w.reconnects && up {
		return true
	}
	if up {
		w.reconnects = rc
	}
	for _, r := range w.runners {
		r.seen, r.goneSince = false, time.Time{}
	}
	return false
}

// probe asks every runner at once (at most livenessProbes in flight).
func (w *livenessWatcher) probe(ctx context.Context) ([]string, []bus.Liveness) {
	names := make([]string, 0, len(w.runners))
	for name := range w.runners {
		names = append(names, name)
	}
	found := make([]bus.Liveness, len(names))
	sem := make(chan struct{}, livenessProbes)
	var wg sync.WaitGroup
	for i, name := range names {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			pctx, cancel := context.WithTimeout(ctx, livenessTimeout)
			defer cancel()
			found[i] = w.bus.ProbeRunner(pctx, name)
		}()
	}
	wg.Wait()
	return names, found
}

// handOn naks, once, the work of each attempt a gone runner was running in
// an experiment this controller leads, unless a newer attempt of the trial
// has started since: a nak for a delivery that is no longer current would
// still be taken (nats-server's processNak checks only that the message is
// pending), and would pull the trial from the runner now running it.
func (w *livenessWatcher) handOn(ctx context.Context, r *watchedRunner) {
	var nakked []string // the experiments whose work was handed on
	for _, t := range r.info.Trials {
		if t.Ack == "" {
			continue // a runner that does not say where its work is
		}
		if _, done := w.handled[t.Ack]; done {
			continue
		}
		w.handled[t.Ack] = time.Now()
		log := w.log.With().Str("runner", r.info.Name).Str("experiment", t.Experiment).Str("trial", t.TrialID).Int("attempt", t.Attempt).Logger()
		if !w.leads(ctx, t.Experiment) {
			continue // its leader's watch decides
		}
		newer, err := w.newerAttempt(ctx, t)
		if err != nil || newer {
			log.Debug().Err(err).Bool("newer_attempt", newer).Msg("runner gone; leaving its attempt to the heartbeat timeout")
			continue
		}
		if last, err := w.lastDelivery(ctx, t); err != nil || last {
			log.Debug().Err(err).Msg("runner gone with its work's last delivery; leaving it to the heartbeat timeout")
			continue
		}
		if err := w.bus.NakWork(t.Ack); err != nil {
			log.Warn().Err(err).Msg("runner gone; could not hand its trial on")
			continue
		}
		log.Warn().Msg("runner gone (its connection closed); handing its trial to another runner")
		if !slices.Contains(nakked, t.Experiment) {
			nakked = append(nakked, t.Experiment)
		}
	}
	if len(nakked) == 0 {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := w.bus.Flush(fctx); err != nil && ctx.Err() == nil {
		w.log.Warn().Err(err).Msg("flush the naks")
		return
	}
	// The server has the naks: an idle runner woken now finds the work.
	for _, exp := range nakked {
		if err := w.bus.AnnounceWorkAgain(exp); err != nil {
			w.log.Debug().Err(err).Str("experiment", exp).Msg("announce the work handed on; idle runners find it at their next poll")
		}
	}
}

// leads reports whether this controller holds the experiment's lease.
func (w *livenessWatcher) leads(ctx context.Context, exp string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	holder, err := w.bus.LeaseHolder(ctx, exp)
	return err == nil && holder == w.bus.Source
}

// lastDelivery reports whether t runs the last delivery its work consumer
// allows (or says nothing of its delivery). Such work is left to expire:
// nats-server finds a nakked message out of deliveries only when a runner
// pulls again (consumer.go getNextMsg), while an expired one is reported at
// once (checkPending), and with no runner left the trial must still end.
func (w *livenessWatcher) lastDelivery(ctx context.Context, t bus.RunnerTrial) (bool, error) {
	if t.Delivery <= 0 {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	maxDeliver, err := w.bus.WorkMaxDeliver(ctx, t.Experiment)
	if err != nil {
		return false, err
	}
	return maxDeliver > 0 && t.Delivery >= maxDeliver, nil
}

// newerAttempt reports whether an attempt of t's trial newer than t has
// started: then t's work has been redelivered already.
func (w *livenessWatcher) newerAttempt(ctx context.Context, t bus.RunnerTrial) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	ev, seq, err := w.bus.LastEvent(ctx, events.Subject(t.Experiment, events.WriterRunner, events.TypeTrialStarted, t.TrialID))
	if err != nil || seq == 0 {
		return false, err
	}
	if ev == nil {
		return false, errUndecodable
	}
	p, ok := ev.Data.(*events.TrialStarted)
	return ok && p.Attempt > t.Attempt, nil
}

// errUndecodable: the trial's last start is in the log but does not decode.
var errUndecodable = errors.New("the trial's last start does not decode")
