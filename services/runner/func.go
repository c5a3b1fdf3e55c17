package runner

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/session"
)

// funcExecutor runs a Go trainable in this process. A panic is a failure
// with its stack. After ctx is done, the function has Grace to return;
// one that does not is abandoned (Go cannot kill a goroutine) and logged.
type funcExecutor struct {
	Func  session.Func
	Grace time.Duration
	Log   zerolog.Logger
}

// Execute implements Executor.
func (e *funcExecutor) Execute(ctx context.Context, s session.Session, config map[string]any) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("trainable panicked: %v\n%s", r, debug.Stack())
			}
		}()
		done <- e.Func(session.With(ctx, s), cloneConfig(config))
	}()
	select {
	case err := <-done:
		return funcErr(err)
	case <-ctx.Done():
	}
	t := time.NewTimer(e.Grace)
	defer t.Stop()
	select {
	case err := <-done:
		return funcErr(err)
	case <-t.C:
		e.Log.Warn().Dur("grace", e.Grace).Msg("trainable did not return after its context was cancelled; abandoning it")
		return context.Cause(ctx)
	}
}

// funcErr treats a trainable that returns the stop error like one that
// returned nil: the stop decides the outcome.
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
