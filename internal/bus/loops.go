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
// experiment it discovers once, and follows it again after its loop ended
// (a restore brings a completed experiment back). A loop asked for while
// the experiment's loop runs is not dropped: it runs once that one ends,
// for a loop that is ending (its experiment done) may no longer see the
// run that asked for it.
type Loops struct {
	mu      sync.Mutex
	running map[string]bool
	next    map[string]func(context.Context) error // asked for while running
	wg      sync.WaitGroup
}

// Start runs loop for exp, after the one running if there is one (only the
// latest loop asked for waits); an error other than cancellation is logged
// with what.
func (l *Loops) Start(ctx context.Context, exp, what string, log zerolog.Logger, loop func(context.Context) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running == nil {
		l.running, l.next = map[string]bool{}, map[string]func(context.Context) error{}
	}
	if l.running[exp] {
		l.next[exp] = loop
		return
	}
	l.running[exp] = true
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for loop != nil {
			if err := runLoop(ctx, loop); err != nil && !errors.Is(err, context.Canceled) {
				log.Error().Err(err).Str("experiment", exp).Msg(what)
			}
			l.mu.Lock()
			loop = l.next[exp]
			delete(l.next, exp)
			if loop == nil || ctx.Err() != nil {
				loop = nil
				delete(l.running, exp)
			}
			l.mu.Unlock()
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
