package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/tunejet/tunejet/internal/bus"
)

// listEvery is the least time between two updates of a list stream: a
// busy experiment changes many times a second, and each update of the
// experiments list sums up every trial of every experiment.
const listEvery = 250 * time.Millisecond

// registryRetry is how often a runners stream looks for a registry that
// no controller has created yet.
const registryRetry = 2 * time.Second

// hub signals its subscribers, each through a channel of one coalesced
// signal.
type hub struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

func (h *hub) notify() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (h *hub) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[chan struct{}]struct{}{}
	}
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}
}

// experimentList is GET /api/experiments's answer.
type experimentList struct {
	Experiments []Summary `json:"experiments"`
}

// summaries sums up every experiment the log holds, in submission order.
func (s *Server) summaries(ctx context.Context) (experimentList, error) {
	names, err := s.names(ctx)
	if err != nil {
		return experimentList{}, err
	}
	out := experimentList{Experiments: []Summary{}}
	for _, name := range names {
		l, ok, err := s.experiment(ctx, name)
		if err != nil {
			return experimentList{}, err
		}
		if !ok {
			continue
		}
		l.mu.Lock()
		out.Experiments = append(out.Experiments, l.summary())
		l.mu.Unlock()
	}
	return out, nil
}

// sse starts a stream of server-sent events; nil when w cannot stream.
func sse(w http.ResponseWriter) http.Flusher {
	flusher, ok := w.(http.Flusher)
	if !ok {
		httpError(w, http.StatusInternalServerError, "this server cannot stream")
		return nil
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return flusher
}

// send writes one "update" event; false when the reader went away.
func send(w http.ResponseWriter, flusher http.Flusher, data []byte) bool {
	if _, err := fmt.Fprintf(w, "event: update\ndata: %s\n\n", data); err != nil {
		return false
	}
	flusher.Flush()
	return true
}

// streamExperiments answers GET /api/stream/experiments with server-sent
// events: the experiments list, then the list again after each change to
// an experiment or a new submission (at most one every listEvery).
func (s *Server) streamExperiments(w http.ResponseWriter, r *http.Request) {
	changed, cancel := s.list.subscribe()
	defer cancel()
	first, err := s.summaries(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	flusher := sse(w)
	if flusher == nil {
		return
	}
	var last []byte
	for list := first; ; {
		data, err := json.Marshal(list)
		if err != nil {
			s.cfg.Log.Error().Err(err).Msg("dashboard: encode the experiments list")
			return
		}
		if !bytes.Equal(data, last) {
			if !send(w, flusher, data) {
				return
			}
			last = data
		}
		if !waitForChange(r.Context(), s.ctx, changed, w, flusher) || !pause(r.Context(), s.ctx, listEvery) {
			return
		}
		if list, err = s.summaries(r.Context()); err != nil {
			s.cfg.Log.Error().Err(err).Msg("dashboard: the experiments list")
			return
		}
	}
}

// pause waits d; false when the reader went away or the server stops.
func pause(ctx, serverCtx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-serverCtx.Done():
		return false
	}
}

// runnerList is the runners' answer: each runner as it publishes itself.
type runnerList struct {
	Runners []map[string]any `json:"runners"`
	Note    string           `json:"note,omitempty"`
}

// runnerEntry decodes a registry entry, leaving out the reply subjects
// of the runner's work (a way to nak it).
func runnerEntry(data []byte) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decode a runner: %w", err)
	}
	if trials, ok := m["trials"].([]any); ok {
		for _, t := range trials {
			if tm, ok := t.(map[string]any); ok {
				delete(tm, "ack")
			}
		}
	}
	return m, nil
}

// streamRunners answers GET /api/stream/runners with server-sent events:
// the live runners, then the list again each time a runner registers,
// renews its entry with a change, leaves, or lets its entry expire
// (bus.RunnerTTL after its last renewal: the registry does not announce
// expiries, so the stream forgets such an entry itself).
func (s *Server) streamRunners(w http.ResponseWriter, r *http.Request) {
	if s.b == nil {
		if flusher := sse(w); flusher != nil {
			data, _ := json.Marshal(runnerList{Runners: []map[string]any{}, Note: "This dashboard reads an experiment's files: it sees no runners."})
			send(w, flusher, data)
		}
		return
	}
	updates, ok, err := s.b.WatchExistingRunners(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	flusher := sse(w)
	if flusher == nil {
		return
	}
	if !ok {
		data, _ := json.Marshal(runnerList{Runners: []map[string]any{}, Note: "No runner has registered with this deployment yet."})
		if !send(w, flusher, data) {
			return
		}
		// The controller creates the registry when it starts: look for
		// it again now and then (the registry cannot be watched before).
		for !ok {
			if !pause(r.Context(), s.ctx, registryRetry) {
				return
			}
			if updates, ok, err = s.b.WatchExistingRunners(r.Context()); err != nil {
				s.cfg.Log.Error().Err(err).Msg("dashboard: the runner registry")
				return
			}
		}
	}
	s.followRunners(r.Context(), w, flusher, updates)
}

func (s *Server) followRunners(ctx context.Context, w http.ResponseWriter, flusher http.Flusher, updates <-chan bus.RunnerUpdate) {
	type seen struct {
		info map[string]any
		at   time.Time
	}
	runners := map[string]seen{}
	initial := true
	var last []byte
	publish := func() bool {
		out := runnerList{Runners: []map[string]any{}}
		for _, name := range slices.Sorted(maps.Keys(runners)) {
			out.Runners = append(out.Runners, runners[name].info)
		}
		if len(out.Runners) == 0 {
			out.Note = "No live runner."
		}
		data, err := json.Marshal(out)
		if err != nil || bytes.Equal(data, last) {
			return err == nil
		}
		last = data
		return send(w, flusher, data)
	}
	prune := time.NewTicker(time.Second)
	defer prune.Stop()
	alive := time.NewTicker(keepAlive)
	defer alive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.ctx.Done():
			return
		case u, ok := <-updates:
			if !ok {
				return
			}
			if u.Current { // the entries there were: send them
				initial = false
				if !publish() {
					return
				}
				continue
			}
			if u.Entry != nil {
				info, err := runnerEntry(u.Entry)
				if err != nil {
					continue
				}
				runners[u.Name] = seen{info: info, at: u.Written}
			} else {
				delete(runners, u.Name)
			}
			if !initial && !publish() {
				return
			}
		case now := <-prune.C:
			for name, r := range runners {
				if now.Sub(r.at) > bus.RunnerTTL {
					delete(runners, name)
				}
			}
			if !initial && !publish() {
				return
			}
		case <-alive.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}
