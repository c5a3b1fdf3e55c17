package blobsync_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"gocloud.dev/blob/memblob"

	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
)

// recorder keeps the order in which queued functions ran.
type recorder struct {
	mu  sync.Mutex
	ran []string
}

func (r *recorder) fn(name string, then func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		r.mu.Lock()
		r.ran = append(r.ran, name)
		r.mu.Unlock()
		if then != nil {
			return then(ctx)
		}
		return nil
	}
}

func (r *recorder) order() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ran)
}

func TestQueueCoalescesWhileOneRuns(t *testing.T) {
	ctx := t.Context()
	base := memblob.OpenBucket(nil)
	defer base.Close()
	b, counts := storagetest.Counting(base)
	q := blobsync.NewQueue(ctx, zerolog.Nop())
	defer q.Close()

	var rec recorder
	started, release := make(chan struct{}), make(chan struct{})
	write := func(v string) func(context.Context) error {
		return func(ctx context.Context) error { return storage.WriteAtomic(ctx, b, "state.json", []byte(v)) }
	}
	q.Submit("state", rec.fn("v1", func(ctx context.Context) error {
		close(started)
		<-release
		return write("v1")(ctx)
	}))
	<-started
	for _, v := range []string{"v2", "v3", "v4", "v5"} {
		q.Submit("state", rec.fn(v, write(v)))
	}
	q.Submit("other", rec.fn("other", nil))
	close(release)

	if err := q.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.order(), []string{"v1", "v5", "other"}; !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	if n := counts.Writes("state.json"); n != 2 {
		t.Fatalf("state.json written %d times, want 2 (the slow one and the coalesced one)", n)
	}
	if got, err := storage.ReadAll(ctx, b, "state.json"); err != nil || string(got) != "v5" {
		t.Fatalf("state.json = %q, %v; want the latest, v5", got, err)
	}
}

func TestQueueFlushReturnsFailuresOnce(t *testing.T) {
	ctx := t.Context()
	q := blobsync.NewQueue(ctx, zerolog.Nop())
	defer q.Close()
	boom := errors.New("boom")
	q.Submit("a", func(context.Context) error { return boom })
	q.Submit("b", func(context.Context) error { return nil })
	err := q.Flush(ctx)
	if !errors.Is(err, boom) || err.Error() != "sync a: boom" {
		t.Fatalf("Flush = %v, want a's failure", err)
	}
	if err := q.Flush(ctx); err != nil {
		t.Fatalf("second Flush = %v, want nil", err)
	}
	// A later success of the same key clears an unreported failure.
	q.Submit("a", func(context.Context) error { return boom })
	q.Submit("b", func(context.Context) error { return nil })
	q.Submit("a", func(context.Context) error { return nil })
	if err := q.Flush(ctx); err != nil {
		t.Fatalf("Flush after a recovered key = %v, want nil", err)
	}
}

func TestQueueFlushHonoursItsContext(t *testing.T) {
	q := blobsync.NewQueue(t.Context(), zerolog.Nop())
	defer q.Close()
	started := make(chan struct{})
	q.Submit("slow", func(ctx context.Context) error { close(started); <-ctx.Done(); return ctx.Err() })
	<-started
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := q.Flush(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Flush = %v, want context.Canceled", err)
	}
}

func TestQueueCloseCancelsAndReportsDropped(t *testing.T) {
	q := blobsync.NewQueue(t.Context(), zerolog.Nop())
	started := make(chan struct{})
	var runningErr error
	q.Submit("slow", func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		runningErr = context.Cause(ctx)
		return ctx.Err()
	})
	<-started
	q.Submit("waiting", func(context.Context) error { t.Error("a dropped job ran"); return nil })
	q.Close()
	if !errors.Is(runningErr, blobsync.ErrQueueClosed) {
		t.Fatalf("running job's context ended with %v, want ErrQueueClosed", runningErr)
	}
	q.Submit("late", func(context.Context) error { t.Error("a job ran after Close"); return nil })
	err := q.Flush(t.Context())
	for key, want := range map[string]error{"slow": context.Canceled, "waiting": blobsync.ErrQueueClosed, "late": blobsync.ErrQueueClosed} {
		if got := failureOf(err, key); !errors.Is(got, want) {
			t.Errorf("failure of %s = %v, want %v (Flush = %v)", key, got, want, err)
		}
	}
}

// failureOf picks the failure of key out of Flush's joined error.
func failureOf(err error, key string) error {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return nil
	}
	for _, e := range joined.Unwrap() {
		if strings.HasPrefix(e.Error(), "sync "+key+":") {
			return e
		}
	}
	return nil
}
