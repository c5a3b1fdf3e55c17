package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt/direct"
	"github.com/tunejet/tunejet/internal/storage"
)

// route is how an experiment's checkpoints reach its storage from this
// runner (checkpoint_config.route): straight into storage (direct not
// nil), or through the Object Store.
type route struct {
	path string // the experiment's storage_path
	mode string // checkpoint_config.route; "" is auto
	// timeout bounds one direct write (sync_config.sync_timeout): with
	// route auto a write that fails or hangs goes to the Object Store.
	timeout time.Duration
	direct  direct.Storage // the experiment's storage, when this runner writes it itself
	// unreachable says why this runner cannot write the storage itself,
	// when it cannot.
	unreachable error
}

// routes caches each experiment's route: storage is probed once per
// experiment (and storage path) per runner.
type routes struct {
	mu sync.Mutex
	m  map[string]*route // by experiment and storage path
}

// routeOf returns the route of the experiment's checkpoints, probing the
// storage the first time.
func (s *Service) routeOf(ctx context.Context, exp string) (*route, error) {
	path, mode, timeout, err := s.storageOf(ctx, exp)
	if err != nil {
		return nil, err
	}
	key := exp + "\x00" + path
	s.routes.mu.Lock()
	r := s.routes.m[key]
	s.routes.mu.Unlock()
	if r != nil {
		return &route{path: r.path, mode: mode, timeout: timeout, direct: r.direct, unreachable: r.unreachable}, nil
	}
	r = &route{path: path, mode: mode, timeout: timeout}
	switch {
	case mode == events.RouteObjectStore:
		// No probe: nothing goes straight to storage. Not cached, so that
		// a route changed by a restore probes then.
		r.unreachable = errors.New("checkpoint_config.route is object_store")
		return r, nil
	case path == "":
		r.unreachable = errors.New("the experiment names no storage path")
	default:
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		r.direct, r.unreachable = s.reach(pctx, path, exp)
		cancel()
	}
	if r.unreachable != nil {
		s.log.Info().Str("experiment", exp).Str("storage_path", path).Str("reason", r.unreachable.Error()).
			Msg("this runner cannot write the experiment's storage; checkpoints go through the Object Store")
	} else {
		s.log.Info().Str("experiment", exp).Str("storage_path", path).Msg("checkpoints go straight to storage")
	}
	s.routes.mu.Lock()
	if s.routes.m == nil {
		s.routes.m = map[string]*route{}
	}
	if old := s.routes.m[key]; old != nil { // probed at once by another attempt
		r = &route{path: old.path, mode: mode, timeout: timeout, direct: old.direct, unreachable: old.unreachable}
	} else {
		s.routes.m[key] = r
	}
	s.routes.mu.Unlock()
	return r, nil
}

// probeTimeout bounds the probe of an experiment's storage: storage that
// does not answer is storage this runner does not reach.
const probeTimeout = 10 * time.Second

// reach probes the experiment's storage and opens it for direct writes.
func (s *Service) reach(ctx context.Context, path, exp string) (direct.Storage, error) {
	if err := s.cfg.ReachStorage(ctx, path, exp); err != nil {
		return nil, err
	}
	if !storage.IsURL(path) {
		return &direct.FileSystem{Root: filepath.Join(path, exp)}, nil
	}
	if dir, err := storage.LocalPath(path); err == nil { // file://
		return &direct.FileSystem{Root: filepath.Join(dir, exp)}, nil
	}
	b, err := storage.OpenBucket(context.WithoutCancel(ctx), path)
	if err != nil {
		return nil, err
	}
	// The runner's life long: one handle per experiment.
	return &direct.BlobStore{B: storage.ExperimentBucket(b, exp), URL: storage.Join(path, exp)}, nil
}

// defaultWriteTimeout bounds a direct write when the spec names no
// sync_timeout (Ray's default).
const defaultWriteTimeout = 30 * time.Minute

// storageOf reads the experiment's storage path (from its newest start),
// checkpoint route and sync timeout (from its spec).
func (s *Service) storageOf(ctx context.Context, exp string) (path, mode string, timeout time.Duration, err error) {
	timeout = defaultWriteTimeout
	ev, _, err := s.bus.LastEvent(ctx, events.Subject(exp, events.WriterController, events.TypeExperimentStarted, ""))
	if err != nil {
		return "", "", 0, fmt.Errorf("read the storage path of %s: %w", exp, err)
	}
	if p, ok := eventData[*events.ExperimentStarted](ev, nil); ok {
		path = p.StoragePath
	}
	ev, _, err = s.bus.LastEvent(ctx, events.Subject(exp, events.WriterClient, events.TypeExperimentSubmitted, ""))
	if err != nil {
		return "", "", 0, fmt.Errorf("read the checkpoint route of %s: %w", exp, err)
	}
	if p, ok := eventData[*events.ExperimentSubmitted](ev, nil); ok {
		mode = p.Spec.RunConfig.CheckpointConfig.Route
		if t := p.Spec.RunConfig.SyncConfig.SyncTimeoutS; t > 0 {
			timeout = time.Duration(t * float64(time.Second))
		}
	}
	return path, mode, timeout, nil
}

// writesDirect reports whether checkpoints go straight to storage, or the
// error of route "storage" when this runner cannot write it.
func (r *route) writesDirect(runner string) (bool, error) {
	switch {
	case r == nil || r.mode == events.RouteObjectStore:
		return false, nil
	case r.direct != nil:
		return true, nil
	case r.mode == events.RouteStorage:
		return false, fmt.Errorf("checkpoint_config.route is %q but runner %s cannot write storage_path %q: %w",
			events.RouteStorage, runner, r.path, r.unreachable)
	}
	return false, nil
}

// readsDirect is the storage this runner reads direct checkpoints from,
// or nil when it cannot (they then come through the Object Store).
func (r *route) readsDirect() direct.Storage {
	if r == nil {
		return nil
	}
	return r.direct
}
