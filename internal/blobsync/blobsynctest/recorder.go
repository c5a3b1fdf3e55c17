// Package blobsynctest holds a blobsync.Client for tests.
package blobsynctest

import (
	"context"
	"slices"
	"strings"
	"sync"
)

// Recorder is a blobsync.Client (and a tune.Syncer) that records its calls
// and succeeds: "up LOCAL REMOTE EXCLUDES" (comma-separated), "down REMOTE
// LOCAL" and "delete REMOTE".
type Recorder struct {
	mu    sync.Mutex
	calls []string
}

// Calls returns the calls so far, oldest first.
func (r *Recorder) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *Recorder) record(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}

// SyncUp records "up LOCAL REMOTE EXCLUDES".
func (r *Recorder) SyncUp(_ context.Context, localDir, remote string, exclude []string) error {
	r.record("up " + localDir + " " + remote + " " + strings.Join(exclude, ","))
	return nil
}

// SyncDown records "down REMOTE LOCAL".
func (r *Recorder) SyncDown(_ context.Context, remote, localDir string, _ []string) error {
	r.record("down " + remote + " " + localDir)
	return nil
}

// Delete records "delete REMOTE".
func (r *Recorder) Delete(_ context.Context, remote string) error {
	r.record("delete " + remote)
	return nil
}
