package runner

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/tunejet/tunejet/internal/session"
)

// runFunc runs a Go trainable in this process. A panic is a failure with
// its stack. After a stop, the function has StopGrace to return; one that
// does not is abandoned (Go cannot kill a goroutine) and logged.
func runFunc(a *attempt, fn session.Func) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("trainable panicked: %v\n%s", r, debug.Stack())
			}
		}()
		done <- fn(session.With(a.ctx, a), cloneConfig(a.work.Config))
	}()
	select {
	case err := <-done:
		return funcErr(err)
	case <-a.ctx.Done():
	}
	t := time.NewTimer(a.s.cfg.StopGrace)
	defer t.Stop()
	select {
	case err := <-done:
		return funcErr(err)
	case <-t.C:
		a.log.Warn().Dur("grace", a.s.cfg.StopGrace).Msg("trainable did not return after its context was cancelled; abandoning it")
		return context.Cause(a.ctx)
	}
}

// funcErr treats a trainable that returns the stop error (or its context's
// error) like one that returned nil: the stop decides the outcome.
func funcErr(err error) error {
	if errors.Is(err, session.ErrStopped) {
		return nil
	}
	return err
}

// cloneConfig gives each attempt its own copy of the config.
func cloneConfig(c map[string]any) map[string]any {
	out := make(map[string]any, len(c))
	for k, v := range c {
		if m, ok := v.(map[string]any); ok {
			v = cloneConfig(m)
		}
		out[k] = v
	}
	return out
}
