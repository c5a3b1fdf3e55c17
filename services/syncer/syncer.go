package syncer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/storage"
)

// Config configures a syncer. The zero value is usable.
type Config struct {
	// WorkDir holds the local staging copies of result files; it must not
	// be shared with another syncer. Default a fresh directory under
	// <tmp>/tunejet-syncer.
	WorkDir string
	// MaxRetries is how many times a failed sync is retried before it is
	// announced failed. Default 2 (Ray's).
	MaxRetries int
	// RetryBackoff is the wait before each retry. Default 5s (Ray's).
	RetryBackoff time.Duration
	// Period overrides every experiment's sync_period; 0 uses the
	// experiment's own (tests use a short one).
	Period time.Duration
	// Client, when set, copies each experiment with an upload_dir there
	// instead of the experiment's command syncer or gocloud (a Go
	// program's own Syncer, tune.WithSyncer).
	Client blobsync.Client
}

func (c *Config) setDefaults() {
	if c.WorkDir == "" {
		base := filepath.Join(os.TempDir(), "tunejet-syncer")
		if err := os.MkdirAll(base, 0o755); err == nil {
			c.WorkDir, _ = os.MkdirTemp(base, fmt.Sprintf("%d-", os.Getpid()))
		}
		if c.WorkDir == "" {
			c.WorkDir = filepath.Join(base, fmt.Sprintf("%d", os.Getpid()))
		}
	}
}

// Service is a running syncer.
type Service struct {
	bus *bus.Bus
	cfg Config
	log zerolog.Logger

	loops bus.Loops // one writer per followed experiment
}

// New returns a syncer on b.
func New(b *bus.Bus, cfg Config) *Service {
	cfg.setDefaults()
	return &Service{bus: b, cfg: cfg, log: b.Log.With().Str("service", "syncer").Logger()}
}

// Run follows started experiments until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	if err := s.bus.Provision(ctx); err != nil {
		return err
	}
	unregister, err := s.bus.Register(ctx, "syncer", "Write experiment results and state to storage")
	if err != nil {
		return err
	}
	defer unregister()
	// Clients ask, before they submit, whether this syncer sees the
	// storage they write to (a queue group: one syncer answers).
	stop, err := s.bus.Serve(ctx, storage.SharedCheckSubject, "syncer", s.answerSharedCheck)
	if err != nil {
		return fmt.Errorf("syncer: answer storage checks: %w", err)
	}
	defer stop()
	// ... and to claim the experiment's folder for this deployment.
	stopClaims, err := s.bus.Serve(ctx, storage.ClaimSubject, "syncer", s.answerClaim)
	if err != nil {
		return fmt.Errorf("syncer: answer storage claims: %w", err)
	}
	defer stopClaims()
	filter := events.TypeSubjects("*", events.WriterController, events.TypeExperimentStarted)
	err = s.bus.Watch(ctx, filter, 0, bus.Handler{Event: func(ev *events.Event) { s.follow(ctx, ev.Experiment) }})
	s.loops.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// follow starts syncing an experiment, once.
func (s *Service) follow(ctx context.Context, exp string) {
	s.loops.Start(ctx, exp, "syncing stopped", s.log, newWriter(s, exp).run)
}

// syncConfig is the experiment's SyncConfig as blobsync bounds it.
func (s *Service) syncConfig(sc events.SyncConfig) blobsync.Config {
	c := blobsync.Config{
		SyncPeriod:   events.Seconds(sc.SyncPeriodS),
		SyncTimeout:  events.Seconds(sc.SyncTimeoutS),
		MaxRetries:   s.cfg.MaxRetries,
		RetryBackoff: s.cfg.RetryBackoff,
	}.WithDefaults()
	if s.cfg.Period > 0 {
		c.SyncPeriod = s.cfg.Period
	}
	return c
}

// answerSharedCheck tells a client whether this syncer sees the marker it
// wrote under a storage path on a file system, or can write to its bucket.
func (s *Service) answerSharedCheck(ctx context.Context, data []byte) any {
	var req storage.SharedCheck
	var reply storage.SharedCheckReply
	err := json.Unmarshal(data, &req)
	bucket := err == nil && storage.IsBucket(req.StoragePath)
	switch {
	case err != nil || req.Experiment == "" || req.Token == "" && !bucket:
		reply.Error = fmt.Sprintf("malformed storage check: want {storage_path, experiment, token}: %v", err)
	case bucket:
		if err := storage.Reach(ctx, req.StoragePath, req.Experiment); err != nil {
			reply = storage.Unreachable(err)
			// The client is told and does not submit: nothing to do here.
			s.log.Info().Err(err).Str("experiment", req.Experiment).Msg("a client's bucket cannot be written from here; it will not submit")
		}
	default:
		if err := storage.CheckToken(req.StoragePath, req.Experiment, req.Token); err != nil {
			reply.NotShared = true
			reply.Error = strings.TrimPrefix(err.Error(), storage.ErrNotShared.Error()+": ")
			s.log.Warn().Err(err).Str("experiment", req.Experiment).Msg("a client's storage is not visible here; it will not submit")
		}
	}
	return reply
}

// claimTimeout bounds a claim made for a client: storage that hangs must
// not hold up the claims of the clients after it.
const claimTimeout = 10 * time.Second

// answerClaim claims an experiment's folder for this deployment, for a
// client about to submit it (storage.ClaimRun), recording the client's
// process; the reply names the owner when another deployment owns it.
func (s *Service) answerClaim(ctx context.Context, data []byte) any {
	var req storage.ClaimRequest
	var reply storage.ClaimReply
	err := json.Unmarshal(data, &req)
	if err == nil && req.StoragePath == "" {
		err = errors.New("no storage_path")
	}
	if err == nil {
		err = events.ValidateID("experiment name", req.Experiment)
	}
	if err != nil {
		reply.Error = fmt.Sprintf("malformed storage claim: want {storage_path, experiment, host, pid}: %v", err)
		return reply
	}
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	d, err := s.bus.Deployment(ctx)
	if err != nil {
		reply.Error = err.Error()
		return reply
	}
	me := storage.Owner{Deployment: d.ID, Store: d.Store, Host: req.Host, PID: req.PID, Embedded: req.Embedded, RenewEveryS: req.RenewEveryS}
	if s.cfg.Period > 0 {
		me.RenewEveryS = s.cfg.Period.Seconds()
	}
	if _, err := storage.ClaimOwner(ctx, req.StoragePath, req.Experiment, me, storage.ClaimRun, nil); err != nil {
		reply.Owned, reply.Error = errors.Is(err, storage.ErrOwned), err.Error()
		if reply.Owned {
			s.log.Warn().Err(err).Str("experiment", req.Experiment).Msg("refused a client's claim on an experiment's folder; it will not submit")
		} else {
			// Storage failing, not a refusal: the client's storage check
			// that follows names why to the user, once.
			s.log.Info().Err(err).Str("experiment", req.Experiment).Msg("could not claim a client's experiment folder yet; it is claimed again when the storage opens")
		}
	}
	return reply
}
