package runner

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// progresser is what heartbeat keeps alive: a *bus.Delivery.
type progresser interface{ Progress() error }

// heartbeat keeps the work message alive: Progress every quarter of the
// heartbeat timeout (timeoutS, in seconds), so that a beat late or lost
// still leaves others inside the timeout. Every third of the timeout,
// apart from the beats, it asks overtaken whether a newer attempt of the
// trial has started elsewhere; if so it calls onOvertaken and beats no
// more. The check reads the log and may be slow under load: it runs on a
// goroutine of its own, so it never delays a beat. The returned func stops
// both and waits for them (and so for a check under way).
func heartbeat(msg progresser, timeoutS float64, log zerolog.Logger, overtaken func() bool, onOvertaken func()) (stop func()) {
	timeout := time.Duration(timeoutS * float64(time.Second))
	done := make(chan struct{})   // closed by stop
	passed := make(chan struct{}) // closed once overtaken
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(timeout / 4)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if err := msg.Progress(); err != nil {
					log.Warn().Err(err).Msg("heartbeat")
				}
			case <-passed:
				return
			case <-done:
				return
			}
		}
	})
	wg.Go(func() {
		t := time.NewTicker(timeout / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if overtaken() {
					close(passed)
					onOvertaken()
					return
				}
			case <-done:
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
