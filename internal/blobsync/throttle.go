package blobsync

import (
	"sync"
	"time"
)

// Throttle paces a periodic sync (Ray's Syncer.sync_up_if_needed): the
// first sync is always due, and the next one only once Period has passed
// since the last sync that ran. Times are passed in, so tests need no
// clock. Safe for concurrent use.
type Throttle struct {
	period time.Duration

	mu     sync.Mutex
	last   time.Time
	synced bool
}

// NewThrottle returns a Throttle with the given period (Config.SyncPeriod).
func NewThrottle(period time.Duration) *Throttle { return &Throttle{period: period} }

// Due reports whether a sync should run at now.
func (t *Throttle) Due(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.synced || now.Sub(t.last) >= t.period
}

// Mark records that a sync ran at now. Call it only when the sync ran.
func (t *Throttle) Mark(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last, t.synced = now, true
}

// Reset makes the next sync due at once (Ray's Syncer.reset).
func (t *Throttle) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.synced = false
}
