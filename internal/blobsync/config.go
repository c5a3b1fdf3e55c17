package blobsync

import (
	"errors"
	"fmt"
	"time"
)

// Defaults, from Ray's SyncConfig and Syncer.wait_or_retry.
const (
	DefaultSyncPeriod   = 300 * time.Second
	DefaultSyncTimeout  = 1800 * time.Second
	DefaultMaxRetries   = 2
	DefaultRetryBackoff = 5 * time.Second
)

// ErrInvalidConfig is wrapped by every error Config.Validate reports.
var ErrInvalidConfig = errors.New("invalid sync config")

// Config bounds and paces syncs (Ray's SyncConfig). A zero field means its
// default; a negative one is invalid.
type Config struct {
	// SyncPeriod is the least time between two periodic syncs (Throttle).
	// Default 300 s (Ray's sync_period).
	SyncPeriod time.Duration
	// SyncTimeout bounds one attempt of a sync; an attempt still running
	// then is cancelled and counts as failed. Default 1800 s (Ray's
	// sync_timeout).
	SyncTimeout time.Duration
	// MaxRetries is how many times a failed sync is tried again, so a sync
	// gets MaxRetries+1 attempts. Default 2 (Ray's wait_or_retry).
	MaxRetries int
	// RetryBackoff is the fixed wait before each retry. Default 5 s (Ray's
	// backoff_s).
	RetryBackoff time.Duration
}

// Validate reports every invalid field, joined with errors.Join; each
// error wraps ErrInvalidConfig and names the field.
func (c Config) Validate() error {
	var errs []error
	check := func(bad bool, field string, v any) {
		if bad {
			errs = append(errs, fmt.Errorf("%w: %s must not be negative, got %v", ErrInvalidConfig, field, v))
		}
	}
	check(c.SyncPeriod < 0, "SyncPeriod", c.SyncPeriod)
	check(c.SyncTimeout < 0, "SyncTimeout", c.SyncTimeout)
	check(c.MaxRetries < 0, "MaxRetries", c.MaxRetries)
	check(c.RetryBackoff < 0, "RetryBackoff", c.RetryBackoff)
	return errors.Join(errs...)
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.SyncPeriod == 0 {
		c.SyncPeriod = DefaultSyncPeriod
	}
	if c.SyncTimeout == 0 {
		c.SyncTimeout = DefaultSyncTimeout
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	return c
}
