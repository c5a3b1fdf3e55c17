package bus

import (
	"context"
	"errors"
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
		if err := loop(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error().Err(err).Str("experiment", exp).Msg(what)
		}
		l.mu.Lock()
		delete(l.running, exp)
		l.mu.Unlock()
	}()
}

// Wait waits for every loop to end.
func (l *Loops) Wait() { l.wg.Wait() }
