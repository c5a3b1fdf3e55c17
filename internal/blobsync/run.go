package blobsync

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/clock"
)

// TimeoutError is an attempt that did not finish within SyncTimeout. It
// wraps context.DeadlineExceeded.
type TimeoutError struct {
	Operation string
	Timeout   time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s did not finish running within the timeout of %s seconds", e.Operation, seconds(e.Timeout))
}

// Unwrap returns context.DeadlineExceeded.
func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// RetryError is returned by Run when every attempt failed; it wraps the
// last attempt's error.
type RetryError struct {
	Operation string
	Retries   int
	Err       error
}

func (e *RetryError) Error() string {
	return fmt.Sprintf("Failed sync even after %d retries. The latest sync failed with the following error: %v", e.Retries, e.Err)
}

func (e *RetryError) Unwrap() error { return e.Err }

// seconds formats d as Ray prints seconds: "1800", "0.1".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// Syncer runs sync operations bounded by SyncTimeout and retried up to
// MaxRetries times (see the package doc).
type Syncer struct {
	cfg Config
	log zerolog.Logger
}

// New returns a Syncer for cfg (zero fields take their defaults) that logs
// failed attempts to log.
func New(cfg Config, log zerolog.Logger) (*Syncer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Syncer{cfg: cfg.WithDefaults(), log: log}, nil
}

// Config returns the Syncer's configuration, defaults filled in.
func (s *Syncer) Config() Config { return s.cfg }

// Run calls fn until it succeeds, at most MaxRetries+1 times, each attempt
// with a context that ends after SyncTimeout, waiting RetryBackoff between
// attempts. It returns nil on success, the context's error (wrapped) when
// ctx ends, and otherwise a *RetryError wrapping the last attempt's error.
func (s *Syncer) Run(ctx context.Context, operation string, fn func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		err := s.attempt(ctx, operation, fn)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", operation, err)
		}
		left := s.cfg.MaxRetries - attempt
		if left <= 0 {
			return &RetryError{Operation: operation, Retries: s.cfg.MaxRetries, Err: err}
		}
		s.logRetry(operation, err, left)
		if err := clock.Sleep(ctx, s.cfg.RetryBackoff); err != nil {
			return fmt.Errorf("%s: waiting to retry: %w", operation, err)
		}
	}
}

func (s *Syncer) logRetry(operation string, err error, left int) {
	s.log.Warn().
		Str("operation", operation).
		AnErr("error", err).
		Int("retries_left", left).
		Dur("backoff", s.cfg.RetryBackoff).
		Msgf("The latest sync operation failed with the following error: %v\nRetrying %d more time(s) after sleeping for %s seconds...",
			err, left, seconds(s.cfg.RetryBackoff))
}

// attempt runs fn once with a context bounded by SyncTimeout. When the
// deadline passes first it returns a *TimeoutError at once: fn's context
// has ended (cause: the TimeoutError), and fn is not waited for.
func (s *Syncer) attempt(ctx context.Context, operation string, fn func(context.Context) error) error {
	timeout := &TimeoutError{Operation: operation, Timeout: s.cfg.SyncTimeout}
	actx, cancel := context.WithTimeoutCause(ctx, s.cfg.SyncTimeout, timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- protect(actx, fn) }()
	select {
	case err := <-done:
		if err != nil && errors.Is(context.Cause(actx), timeout) {
			return timeout
		}
		return err
	case <-actx.Done():
		select {
		case err := <-done: // finished as the deadline passed
			if err == nil {
				return nil
			}
		default:
		}
		return context.Cause(actx)
	}
}

// protect calls fn, turning a panic into an error.
func protect(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn(ctx)
}

// SyncUp is c.SyncUp run bounded and retried, as operation "sync_up".
func (s *Syncer) SyncUp(ctx context.Context, c Client, localDir, remote string, exclude []string) error {
	return s.Run(ctx, "sync_up", func(ctx context.Context) error {
		return c.SyncUp(ctx, localDir, remote, exclude)
	})
}

// SyncDown is c.SyncDown run bounded and retried, as operation "sync_down".
func (s *Syncer) SyncDown(ctx context.Context, c Client, remote, localDir string, exclude []string) error {
	return s.Run(ctx, "sync_down", func(ctx context.Context) error {
		return c.SyncDown(ctx, remote, localDir, exclude)
	})
}

// Delete is c.Delete run bounded and retried, as operation "delete".
func (s *Syncer) Delete(ctx context.Context, c Client, remote string) error {
	return s.Run(ctx, "delete", func(ctx context.Context) error {
		return c.Delete(ctx, remote)
	})
}
