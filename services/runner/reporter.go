package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tunejet/tunejet/events"
)

// maxBatch bounds the results one trial.reported event carries, and so
// the results a trial may have queued before Report waits.
const maxBatch = 256

// flushTimeout bounds the wait for queued results to be stored. A publish
// already retries for bus.PublishRetryFor while the log has no leader.
const flushTimeout = 60 * time.Second

// reporter sends an attempt's results to the log in the order they were
// reported, with one publish in flight at a time. Results reported while
// a publish waits for its answer queue up and go out together in the next
// trial.reported event (the queued ones as "earlier"). A trial reporting
// slower than the log answers sends one result per event; one reporting
// faster sends fewer, larger events instead of falling behind.
type reporter struct {
	attemptRef

	mu     sync.Mutex
	queued []map[string]any
	room   chan struct{} // closed when the queue empties; nil while it has room
	done   chan struct{} // closed when the sender stops; nil when none runs
	err    error         // the first failed publish; every later call returns it
	last   int           // training_iteration of the last result queued
}

// add queues a result for the log and returns without waiting for it,
// unless maxBatch results already wait. The result is stored even when
// ctx is cancelled: the trial's context may already be.
func (r *reporter) add(ctx context.Context, result map[string]any) error {
	r.mu.Lock()
	for len(r.queued) >= maxBatch && r.err == nil {
		if r.room == nil {
			r.room = make(chan struct{})
		}
		room := r.room
		r.mu.Unlock()
		<-room
		r.mu.Lock()
	}
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	// Reports made at once from several goroutines may arrive here out of
	// order. An event's results must increase, and the fold would drop an
	// older result after a newer one anyway.
	it, _ := result["training_iteration"].(int)
	if it <= r.last {
		r.log.Warn().Int("training_iteration", it).Int("after", r.last).Msg("a report reached the log after a newer one; dropping it")
		return nil
	}
	r.last = it
	r.queued = append(r.queued, result)
	if r.done == nil {
		r.done = make(chan struct{})
		go r.send(context.WithoutCancel(ctx), r.done)
	}
	return nil
}

// send publishes what is queued until nothing is.
func (r *reporter) send(ctx context.Context, done chan struct{}) {
	for {
		r.mu.Lock()
		batch := r.queued
		r.queued = nil
		if r.room != nil {
			close(r.room)
			r.room = nil
		}
		if len(batch) == 0 || r.err != nil {
			r.done = nil
			close(done)
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		if err := r.publishResults(ctx, batch); err != nil {
			r.mu.Lock()
			r.err = fmt.Errorf("publish report: %w", err)
			r.mu.Unlock()
		}
	}
}

// publishResults stores results as one trial.reported event, or as several when
// one would exceed the server's message size.
func (r *reporter) publishResults(ctx context.Context, results []map[string]any) error {
	n := len(results)
	ev := r.s.bus.Event(r.exp, events.WriterRunner, &events.TrialReported{
		TrialID: r.trial, Attempt: r.num, Earlier: results[: n-1 : n-1], Result: results[n-1],
	})
	var limit int64
	if n > 1 {
		limit = r.s.bus.MaxPayload() / 2
	}
	published, err := r.s.bus.PublishUnder(ctx, ev, limit)
	if err != nil || published {
		return err
	}
	if err := r.publishResults(ctx, results[:n/2]); err != nil {
		return err
	}
	return r.publishResults(ctx, results[n/2:])
}

// flush waits until every result reported so far is stored, and returns
// the first publish that failed.
func (r *reporter) flush() error {
	deadline := time.NewTimer(flushTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		done, err := r.done, r.err
		r.mu.Unlock()
		if done == nil || err != nil {
			return err
		}
		select {
		case <-done:
		case <-deadline.C:
			return fmt.Errorf("publish report: not stored within %v", flushTimeout)
		}
	}
}
