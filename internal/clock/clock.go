// Package clock holds the waits that every layer shares.
//
// # Overview
//
// Sleep waits a duration or until a context ends, whichever comes first:
// the pause of a retry loop, a poll or a backoff. It imports only the
// standard library, so any package of the module may use it.
package clock

import (
	"context"
	"time"
)

// Sleep waits d or until ctx ends: nil when d has passed, ctx's cause
// (context.Cause) when ctx ended first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
