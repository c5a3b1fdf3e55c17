package blobsync

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"
)

// ErrQueueClosed is the error recorded for a submission that could not
// run because the queue was closed.
var ErrQueueClosed = errors.New("sync queue closed")

// Queue runs submitted syncs one at a time on one worker goroutine. A
// submission for a key that is already waiting replaces the waiting one
// (the latest state wins; nothing is dropped); a submission for a key that
// is running waits and runs after it. This is a deviation from Ray, which
// skips a sync while another is in progress.
type Queue struct {
	log    zerolog.Logger
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	mu      sync.Mutex
	seq     uint64          // sequence number of the last submission
	order   []string        // waiting keys, first to run first
	waiting map[string]*job // by key
	running *job
	results []result      // failures not yet returned by Flush
	changed chan struct{} // closed (and replaced) when a job finishes
	wake    chan struct{} // buffered: a job was submitted
	closed  bool
}

type job struct {
	key      string
	fn       func(context.Context) error
	firstSeq uint64 // the oldest submission the job stands for
}

// result is the outcome of a job; seq is the oldest submission it stood
// for, so every Flush that waited for the job reports it.
type result struct {
	key string
	seq uint64
	err error
}

// NewQueue starts a queue whose worker runs each job with a context derived
// from ctx; the queue stops when ctx ends or Close is called. Failed jobs
// are logged to log and kept for Flush.
func NewQueue(ctx context.Context, log zerolog.Logger) *Queue {
	ctx, cancel := context.WithCancelCause(ctx)
	q := &Queue{
		log:     log,
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
		waiting: map[string]*job{},
		changed: make(chan struct{}),
		wake:    make(chan struct{}, 1),
	}
	go q.work()
	return q
}

// Submit queues fn under key. If a job for key is waiting, fn replaces its
// function (coalesced); otherwise a new job waits behind the others. After
// Close, the submission is recorded as failed with ErrQueueClosed.
func (q *Queue) Submit(key string, fn func(context.Context) error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	if q.closed {
		q.record(result{key: key, seq: q.seq, err: ErrQueueClosed})
		return
	}
	if j, ok := q.waiting[key]; ok {
		j.fn = fn
		return
	}
	q.waiting[key] = &job{key: key, fn: fn, firstSeq: q.seq}
	q.order = append(q.order, key)
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Flush waits until every submission made before the call has run (or was
// dropped by Close), and returns the failures among the latest run of each
// key, joined; each failure is returned by one Flush. It returns early,
// with the context's error, when ctx ends.
func (q *Queue) Flush(ctx context.Context) error {
	q.mu.Lock()
	target := q.seq
	for q.pendingUpTo(target) {
		changed := q.changed
		q.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("flush sync queue: %w", context.Cause(ctx))
		}
		q.mu.Lock()
	}
	defer q.mu.Unlock()
	return q.takeResults(target)
}

// Close stops the queue: the running job's context ends, waiting jobs are
// recorded as failed with ErrQueueClosed, and Close returns when the
// worker has stopped. Later Submits fail the same way; Flush still
// returns the recorded failures.
func (q *Queue) Close() {
	q.cancel(ErrQueueClosed)
	<-q.done
}

// pendingUpTo reports whether a job standing for a submission <= target
// is waiting or running. q.mu is held.
func (q *Queue) pendingUpTo(target uint64) bool {
	if q.running != nil && q.running.firstSeq <= target {
		return true
	}
	for _, j := range q.waiting {
		if j.firstSeq <= target {
			return true
		}
	}
	return false
}

// takeResults removes and joins the failures recorded for submissions up to
// target. q.mu is held.
func (q *Queue) takeResults(target uint64) error {
	var errs []error
	kept := q.results[:0]
	for _, r := range q.results {
		if r.seq <= target {
			errs = append(errs, fmt.Errorf("sync %s: %w", r.key, r.err))
		} else {
			kept = append(kept, r)
		}
	}
	q.results = kept
	return errors.Join(errs...)
}

// record keeps a job's outcome: a success clears the key's earlier
// failures, a failure replaces them. q.mu is held.
func (q *Queue) record(r result) {
	kept := q.results[:0]
	for _, old := range q.results {
		if old.key != r.key {
			kept = append(kept, old)
		}
	}
	q.results = kept
	if r.err != nil {
		q.results = append(q.results, r)
	}
}

func (q *Queue) work() {
	defer close(q.done)
	for {
		j := q.next()
		if j == nil {
			return
		}
		err := protect(q.ctx, j.fn)
		if err != nil {
			q.log.Warn().Str("key", j.key).Err(err).Msg("sync failed")
		}
		q.finish(j, err)
	}
}

// next waits for a job and marks it running; nil when the queue stops.
func (q *Queue) next() *job {
	for {
		q.mu.Lock()
		if q.ctx.Err() != nil {
			q.shutdown()
			q.mu.Unlock()
			return nil
		}
		if len(q.order) > 0 {
			key := q.order[0]
			q.order = q.order[1:]
			j := q.waiting[key]
			delete(q.waiting, key)
			q.running = j
			q.mu.Unlock()
			return j
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-q.ctx.Done():
		}
	}
}

func (q *Queue) finish(j *job, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.running = nil
	q.record(result{key: j.key, seq: j.firstSeq, err: err})
	q.broadcast()
}

// shutdown drops the waiting jobs as failed. q.mu is held.
func (q *Queue) shutdown() {
	q.closed = true
	for _, key := range q.order {
		j := q.waiting[key]
		q.record(result{key: key, seq: j.firstSeq, err: ErrQueueClosed})
	}
	q.order, q.waiting = nil, map[string]*job{}
	q.broadcast()
}

func (q *Queue) broadcast() {
	close(q.changed)
	q.changed = make(chan struct{})
}
