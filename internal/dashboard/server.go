// Package dashboard serves tunejet's web dashboard: every experiment the
// event log holds, and for one experiment its trials and their learning
// curves, updated live from the log through server-sent events.
//
// It reads the event log of a deployment or of the embedded store (New),
// or an experiment's storage directory alone (NewStorage): a finished or
// interrupted experiment as its files tell it.
//
// It is read-only unless Config.AllowActions lets visitors stop an
// experiment. It binds to loopback unless given a token, which every
// request must then carry: as "Authorization: Bearer TOKEN", or once as
// ?token=TOKEN, which sets a cookie for the rest of the visit. Without a
// token it answers only requests addressed to a loopback host name (no DNS
// rebinding), and actions refuse cross-origin requests. Its assets are
// embedded: nothing is fetched from elsewhere at run time.
package dashboard

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
)

// DefaultAddr is the address the dashboard listens on by default (Ray's
// dashboard port).
const DefaultAddr = "127.0.0.1:8265"

// TokenEnv is the environment variable that gives the token when no flag
// does.
const TokenEnv = "TUNEJET_DASHBOARD_TOKEN"

// cookieName holds the token after a ?token= visit.
const cookieName = "tunejet_dashboard_token"

//go:embed assets
var assets embed.FS

// Config configures a Server.
type Config struct {
	// Token, when set, is required of every request.
	Token string
	// AllowActions lets visitors stop an experiment from the page; without
	// it the page shows no button and the action endpoints answer 403.
	AllowActions bool
	// Log receives the server's logs.
	Log zerolog.Logger
}

// Server serves the dashboard of the experiments on one bus, or of one
// experiment read from storage.
type Server struct {
	b   *bus.Bus // nil when reading files
	cfg Config
	ctx context.Context // the watches live as long as it

	// stored is the experiment read from storage, when there is no bus.
	stored *live

	mu   sync.Mutex
	exps map[string]*live

	// The experiments submitted to the log, in submission order, from a
	// watch started on first use; list tells of a new one and of every
	// change to one watched.
	submitted   sync.Once
	names0      []string
	namesCaught chan struct{}
	namesErr    error
	list        hub
}

// New returns a server reading b; the experiments it watches are followed
// until ctx ends.
func New(ctx context.Context, b *bus.Bus, cfg Config) *Server {
	return &Server{b: b, cfg: cfg, ctx: ctx, exps: map[string]*live{}, namesCaught: make(chan struct{})}
}

// CheckAddr refuses an address that is not loopback when there is no
// token: the dashboard shows configs and results to whoever reaches it.
func CheckAddr(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("dashboard address %q: %w", addr, err)
	}
	if token != "" || loopback(host) {
		return nil
	}
	return fmt.Errorf("dashboard address %q is not loopback: give a token (--token or %s) that every visitor must then present, or listen on 127.0.0.1", addr, TokenEnv)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Listen checks addr (CheckAddr) and listens on it.
func Listen(ctx context.Context, addr, token string) (net.Listener, error) {
	if err := CheckAddr(addr, token); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return ln, nil
}

// URL is the address of the dashboard served on ln, to print.
func URL(ln net.Listener) string {
	return "http://" + ln.Addr().String() + "/"
}

// Serve serves the dashboard on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx) // the event streams end with ctx
	})
	defer stop()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("dashboard: %w", err)
}

// Handler is the dashboard's HTTP handler.
func (s *Server) Handler() http.Handler {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	mux := http.NewServeMux()
	page := func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	}
	mux.HandleFunc("GET /{$}", page)
	mux.HandleFunc("GET /experiments/{name}", page)
	mux.HandleFunc("GET /runners", page)
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /api/experiments", s.listExperiments)
	mux.HandleFunc("GET /api/stream/experiments", s.streamExperiments)
	mux.HandleFunc("GET /api/stream/runners", s.streamRunners)
	mux.HandleFunc("GET /api/experiments/{name}", s.getExperiment)
	mux.HandleFunc("GET /api/experiments/{name}/events", s.streamExperiment)
	mux.HandleFunc("GET /api/experiments/{name}/importance", s.getImportance)
	mux.HandleFunc("GET /api/experiments/{name}/trials/{trial}", s.getTrial)
	mux.HandleFunc("GET /api/experiments/{name}/trials/{trial}/checkpoints/{checkpoint}", s.downloadCheckpoint)
	mux.HandleFunc("GET /api/runners", s.listRunners)
	mux.HandleFunc("GET /api/info", s.info)
	actions := http.NewServeMux()
	actions.HandleFunc("POST /api/experiments/{name}/stop", s.stopExperiment)
	actions.HandleFunc("POST /api/experiments/{name}/trials/{trial}/stop", s.stopTrial)
	mux.Handle("POST /api/", s.actions(actions))
	return headers(plainPaths(s.auth(mux)))
}

// plainPaths refuses, with 400, a path with an empty, "." or ".." segment
// (encoded or not), an encoded slash or a backslash: no URL of the page
// has one, and the router would otherwise clean the path and redirect to
// a page the client did not name.
func plainPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw := strings.ToLower(r.URL.EscapedPath())
		bad := strings.Contains(raw, "//") || strings.Contains(raw, "%2f") || strings.Contains(raw, "%5c") || strings.Contains(r.URL.Path, "\\")
		for _, seg := range strings.Split(r.URL.Path, "/") {
			bad = bad || seg == "." || seg == ".."
		}
		if bad {
			httpError(w, http.StatusBadRequest, "a path with an empty, . or .. segment, or an encoded slash, is refused")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// headers sets the security headers of every response.
func headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// auth requires the token, when there is one: a Bearer header, the
// cookie, or ?token=, which sets the cookie and redirects to the same
// page without it (so that it stays out of the history and the logs).
//
// Without a token, a request must name a loopback host: a page of another
// site whose name was made to resolve to 127.0.0.1 (DNS rebinding) is
// refused.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host, _, err := net.SplitHostPort(r.Host)
			if err != nil {
				host = r.Host
			}
			if !loopback(strings.Trim(host, "[]")) {
				httpError(w, http.StatusForbidden, fmt.Sprintf("this dashboard has no token, so it answers only requests to a loopback address, not to %q: give it a --token to serve other names", r.Host))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	want := []byte(s.cfg.Token)
	ok := func(got string) bool { return got != "" && subtle.ConstantTimeCompare([]byte(got), want) == 1 }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bearer, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found && ok(bearer) {
			next.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(cookieName); err == nil && ok(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		q := r.URL.Query()
		if tok := q.Get("token"); ok(tok) {
			http.SetCookie(w, &http.Cookie{
				Name: cookieName, Value: tok, Path: "/", HttpOnly: true,
				Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
			})
			q.Del("token")
			u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="tunejet dashboard"`)
		httpError(w, http.StatusUnauthorized, "this dashboard needs its token: open it once as /?token=TOKEN, or send Authorization: Bearer TOKEN")
	})
}

// experiment returns the live view of the named experiment, watching it
// from the log if no one has asked for it before, once it has caught up
// with the log; ok is false when the log does not hold it.
func (s *Server) experiment(ctx context.Context, name string) (l *live, ok bool, err error) {
	if events.ValidateID("experiment name", name) != nil {
		return nil, false, nil
	}
	if s.b == nil {
		return s.stored, s.stored != nil && s.stored.name == name, nil
	}
	s.mu.Lock()
	l = s.exps[name]
	s.mu.Unlock()
	if l == nil {
		last, err := s.b.LastSeq(ctx, events.ExperimentSubjects(name))
		if err != nil {
			return nil, false, fmt.Errorf("look up experiment %s: %w", name, err)
		}
		if last == 0 {
			return nil, false, nil
		}
		s.mu.Lock()
		if l = s.exps[name]; l == nil {
			l = newLive(name)
			l.onChange = s.list.notify
			s.exps[name] = l
			go l.watch(s.ctx, s.b) //nolint:contextcheck // the watch outlives the request that starts it
		}
		s.mu.Unlock()
	}
	select {
	case <-l.caught:
		return l, true, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// names are the experiments submitted to the log, in submission order.
func (s *Server) names(ctx context.Context) ([]string, error) {
	if s.b == nil {
		return []string{s.stored.name}, nil
	}
	s.submitted.Do(func() { go s.watchSubmitted() })
	select {
	case <-s.namesCaught:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.namesErr != nil {
		return nil, fmt.Errorf("list experiments: %w", s.namesErr)
	}
	return slices.Clone(s.names0), nil
}

// watchSubmitted follows the submissions for as long as the server runs.
func (s *Server) watchSubmitted() {
	var once sync.Once
	caught := func() { once.Do(func() { close(s.namesCaught) }) }
	seen := map[string]bool{}
	err := s.b.Watch(s.ctx, events.TypeSubjects("*", events.WriterClient, events.TypeExperimentSubmitted), 0, bus.Handler{
		Event: func(ev *events.Event) {
			if seen[ev.Experiment] {
				return
			}
			seen[ev.Experiment] = true
			s.mu.Lock()
			s.names0 = append(s.names0, ev.Experiment)
			s.mu.Unlock()
			s.list.notify()
		},
		CaughtUp: caught,
	})
	if err != nil && s.ctx.Err() == nil {
		s.mu.Lock()
		s.namesErr = err
		s.mu.Unlock()
		s.cfg.Log.Error().Err(err).Msg("dashboard: the watch of submissions ended")
		s.list.notify()
	}
	caught()
}
