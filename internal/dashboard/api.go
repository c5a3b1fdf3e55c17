package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// keepAlive is how often an idle event stream sends a comment, so that
// proxies and the browser keep it open.
const keepAlive = 15 * time.Second

// listExperiments answers GET /api/experiments: every experiment the log
// holds, in submission order.
func (s *Server) listExperiments(w http.ResponseWriter, r *http.Request) {
	out, err := s.summaries(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, out)
}

// getExperiment answers GET /api/experiments/{name}: the experiment and
// every trial with its whole curve.
func (s *Server) getExperiment(w http.ResponseWriter, r *http.Request) {
	l := s.lookup(w, r)
	if l == nil {
		return
	}
	s0, ok := curveQuery(w, r)
	if !ok {
		return
	}
	u, _ := l.update(&s0)
	writeJSON(w, u)
}

// curveQuery reads what a reader's curves draw: ?metric= (default the
// experiment's) against ?x= (one of XAxes, default training_iteration).
func curveQuery(w http.ResponseWriter, r *http.Request) (sent, bool) {
	q := r.URL.Query()
	s := sent{metric: q.Get("metric"), x: q.Get("x")}
	if s.x != "" && !slices.Contains(XAxes, s.x) {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("x=%q: curves are drawn against one of %s", s.x, strings.Join(XAxes, ", ")))
		return sent{}, false
	}
	return s, true
}

// streamExperiment answers GET /api/experiments/{name}/events with
// server-sent events: an "update" with the whole experiment, then one
// after each change to the log with the trials it changed and their new
// curve points.
func (s *Server) streamExperiment(w http.ResponseWriter, r *http.Request) {
	l := s.lookup(w, r)
	if l == nil {
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		httpError(w, http.StatusInternalServerError, "this server cannot stream")
		return
	}
	s0, ok := curveQuery(w, r)
	if !ok {
		return
	}
	changed, cancel := l.subscribe()
	defer cancel()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	for {
		if u, ok := l.update(&s0); ok {
			data, err := json.Marshal(u)
			if err != nil {
				s.cfg.Log.Error().Err(err).Str("experiment", l.name).Msg("dashboard: encode an update")
				return
			}
			if _, err := fmt.Fprintf(w, "event: update\ndata: %s\n\n", data); err != nil {
				return // the reader went away
			}
			flusher.Flush()
		}
		if !waitForChange(r.Context(), s.ctx, changed, w, flusher) {
			return
		}
	}
}

// waitForChange waits for a change, keeping the stream alive meanwhile;
// false when the reader went away or the server stops.
func waitForChange(ctx, serverCtx context.Context, changed <-chan struct{}, w io.Writer, flusher http.Flusher) bool {
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-serverCtx.Done():
			return false
		case <-changed:
			return true
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return false
			}
			flusher.Flush()
		}
	}
}

// lookup finds the experiment the path names, or answers 404 (and
// returns nil).
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *live {
	name := r.PathValue("name")
	l, ok, err := s.experiment(r.Context(), name)
	if err != nil {
		s.fail(w, r, err)
		return nil
	}
	if !ok {
		httpError(w, http.StatusNotFound, fmt.Sprintf("no experiment named %q in the event log", name))
		return nil
	}
	return l
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the reader went away
	}
	s.cfg.Log.Error().Err(err).Str("path", r.URL.Path).Msg("dashboard: request failed")
	httpError(w, http.StatusInternalServerError, err.Error())
}

// httpError answers with {"error": msg}.
func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg}) // the status is sent already
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v) // the status is sent already
}
