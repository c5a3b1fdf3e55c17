package runner

import (
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/bus"
)

// heartbeat keeps the work message alive: Progress every third of the
// heartbeat timeout (timeoutS, in seconds). After each beat it asks
// overtaken whether a newer attempt of the trial has started elsewhere;
// if so it calls onOvertaken and beats no more. The returned func stops it.
func heartbeat(msg *bus.Delivery, timeoutS float64, log zerolog.Logger, overtaken func() bool, onOvertaken func()) (stop func()) {
	every := time.Duration(timeoutS * float64(time.Second) / 3)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				// The heartbeat first: the check below may wait up to 2 s
				// for the log, and a heartbeat sent after it could come
				// past the ack timeout, so the work went to another runner
				// while this one still ran it.
				if err := msg.Progress(); err != nil {
					log.Warn().Err(err).Msg("heartbeat")
				}
				if overtaken() {
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
