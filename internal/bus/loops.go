package bus

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/rs/zerolog"
)

// Loops runs at most one loop per experiment: a service follows each
// experiment it discovers once, and may follow it again after its loop
// ended (a restore brings a completed experiment back).
type Loops struct {
	mu      sync.Mutex
	running map[string]bool
	wg      sync.WaitGroup
}

// Start runs loop for exp unless one is running; an error other than
// cancellation is logged with what.
func (l *Loops) Start(ctx context.Context, exp, what string, log zerolog.Logger, loop func(context.Context) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running == nil {
		l.running = map[string]bool{}
	}
	if l.running[exp] {
		return
	}
	l.running[exp] = true
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() {
			l.mu.Lock()
			delete(l.running, exp)
			l.mu.Unlock()
		}()
		if err := runLoop(ctx, loop); err != nil && !errors.Is(err, context.Canceled) {
			log.Error().Err(err).Str("experiment", exp).Msg(what)
		}
	}()
}

// runLoop runs loop, turning a panic into an error that carries the stack:
// a loop that panics ends like one that failed, and the experiment can be
// followed again, while the service goes on with the others.
func runLoop(ctx context.Context, loop func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v\n%s", errPanicked, p, debug.Stack())
		}
	}()
	return loop(ctx)
}

// Wait waits for every loop to end.
func (l *Loops) Wait() { l.wg.Wait() }
