package controller

import (
	"maps"
	"slices"
	"sync"

	"github.com/tunejet/tunejet/events"
)

// liveRunners is what the liveness watch knows of the registry, for the
// reconcilers: the total capacity of each live runner. Until the watch has
// read the registry, caps is nil: no runner known is not the same as no
// runner registered (Inputs.Runners empty schedules every trial).
type liveRunners struct {
	mu    sync.Mutex
	caps  map[string]events.Resources
	first chan struct{} // closed once the registry is read (readCh)
}

// readCh is closed once the liveness watch has read the registry: a
// reconciler that put its decisions off until then goes on without
// waiting for a tick or an event.
func (l *liveRunners) readCh() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.first == nil {
		l.first = make(chan struct{})
		if l.caps != nil {
			close(l.first)
		}
	}
	return l.first
}

// read reports whether the liveness watch has read the registry (or has
// ended, so that no better view will come).
func (l *liveRunners) read() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.caps != nil
}

// set records the watch's runners.
func (l *liveRunners) set(runners map[string]*watchedRunner) {
	caps := make(map[string]events.Resources, len(runners))
	for name, r := range runners {
		caps[name] = r.info.Total()
	}
	l.mu.Lock()
	if l.caps == nil && l.first != nil {
		close(l.first)
	}
	l.caps = caps
	l.mu.Unlock()
}

// totals are the live runners' capacities, by runner name.
func (l *liveRunners) totals() []events.Resources {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]events.Resources, 0, len(l.caps))
	for _, name := range slices.Sorted(maps.Keys(l.caps)) {
		out = append(out, l.caps[name])
	}
	return out
}

// warnUnfit logs, once per trial and reason, why a PENDING trial waits
// for a runner (as Ray warns of a trial no node can hold).
func (r *reconciler) warnUnfit(totals []events.Resources) {
	if r.unfitTold == nil {
		r.unfitTold = map[string]string{}
	}
	for _, t := range r.st.TrialList() {
		if t.Scheduled || t.Finished() {
			continue
		}
		why := Unfit(r.st.Spec, t, totals)
		if why != "" && r.unfitTold[t.ID] != why {
			r.log.Warn().Str("trial", t.ID).Str("reason", why).
				Msg("the trial stays PENDING until a runner that can hold it registers")
		}
		r.unfitTold[t.ID] = why
	}
}
