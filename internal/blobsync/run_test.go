package blobsync_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
)

// syncBuffer is a log sink that tests read while a Syncer may write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newSyncer(t *testing.T, cfg blobsync.Config) (*blobsync.Syncer, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	s, err := blobsync.New(cfg, zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

func faultyBucket(t *testing.T) (*blob.Bucket, *storagetest.Faults) {
	t.Helper()
	base := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = base.Close() })
	return storagetest.Faulty(base)
}

func oneFileDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "result.json"), []byte(`{"loss": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRunTimesOutAndCancelsTheHungWrite(t *testing.T) {
	b, faults := faultyBucket(t)
	faults.HangWrites(true)
	s, logs := newSyncer(t, blobsync.Config{SyncTimeout: 100 * time.Millisecond, MaxRetries: 1, RetryBackoff: time.Millisecond})

	err := s.SyncUp(t.Context(), blobsync.BucketClient{Bucket: b}, oneFileDir(t), "exp", nil)

	var timeout *blobsync.TimeoutError
	if !errors.As(err, &timeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SyncUp = %v, want a TimeoutError", err)
	}
	const want = "sync_up did not finish running within the timeout of 0.1 seconds"
	if timeout.Error() != want {
		t.Fatalf("timeout error = %q, want %q", timeout.Error(), want)
	}
	if !strings.Contains(err.Error(), "Failed sync even after 1 retries. The latest sync failed with the following error: "+want) {
		t.Fatalf("SyncUp = %q", err)
	}
	bustest.Eventually(t, 10*time.Second, "both hung writes see their context end", func() bool {
		return len(faults.Released()) == 2 && faults.Hanging() == 0
	})
	for i, cause := range faults.Released() {
		if !errors.As(cause, &timeout) {
			t.Errorf("hung write %d ended because of %v, want the TimeoutError", i, cause)
		}
	}
	if !strings.Contains(logs.String(), "Retrying 1 more time(s)") {
		t.Errorf("log has no retry message: %s", logs)
	}
}

func TestRunDoesNotWaitForAFunctionThatIgnoresItsContext(t *testing.T) {
	s, _ := newSyncer(t, blobsync.Config{SyncTimeout: 50 * time.Millisecond, MaxRetries: 1, RetryBackoff: time.Millisecond})
	release := make(chan struct{})
	defer close(release)
	err := s.Run(t.Context(), "stubborn", func(context.Context) error {
		<-release
		return nil
	})
	var timeout *blobsync.TimeoutError
	if !errors.As(err, &timeout) || timeout.Operation != "stubborn" {
		t.Fatalf("Run = %v, want a TimeoutError for stubborn", err)
	}
}

func TestRunRetriesUntilSuccess(t *testing.T) {
	b, faults := faultyBucket(t)
	boom := errors.New("boom")
	faults.FailWrites(2, boom)
	s, logs := newSyncer(t, blobsync.Config{MaxRetries: 2, RetryBackoff: time.Millisecond})

	if err := s.SyncUp(t.Context(), blobsync.BucketClient{Bucket: b}, oneFileDir(t), "exp", nil); err != nil {
		t.Fatalf("SyncUp after 2 failures with MaxRetries 2: %v", err)
	}
	if faults.Writes() != 3 {
		t.Fatalf("writes = %d, want 3", faults.Writes())
	}
	got, err := b.ReadAll(t.Context(), "exp/result.json")
	if err != nil || string(got) != `{"loss": 1}` {
		t.Fatalf("uploaded %q, %v", got, err)
	}
	out := logs.String()
	for _, want := range []string{
		`"level":"warn"`, `"operation":"sync_up"`, `"retries_left":2`,
		`The latest sync operation failed with the following error: `,
		`Retrying 2 more time(s) after sleeping for 0.001 seconds...`,
		`Retrying 1 more time(s) after sleeping for 0.001 seconds...`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log does not contain %q:\n%s", want, out)
		}
	}
}

func TestRunGivesUpAfterMaxRetries(t *testing.T) {
	b, faults := faultyBucket(t)
	boom := errors.New("boom")
	faults.FailWrites(100, boom)
	s, _ := newSyncer(t, blobsync.Config{MaxRetries: 2, RetryBackoff: time.Millisecond})

	err := s.SyncUp(t.Context(), blobsync.BucketClient{Bucket: b}, oneFileDir(t), "exp", nil)
	if !errors.Is(err, boom) {
		t.Fatalf("SyncUp = %v, want it to wrap the cause", err)
	}
	var re *blobsync.RetryError
	if !errors.As(err, &re) || re.Retries != 2 || re.Operation != "sync_up" {
		t.Fatalf("SyncUp = %#v, want a RetryError with 2 retries", err)
	}
	if !strings.HasPrefix(err.Error(), "Failed sync even after 2 retries. The latest sync failed with the following error: ") {
		t.Fatalf("SyncUp = %q", err)
	}
	if faults.Writes() != 3 {
		t.Fatalf("writes = %d, want 3 attempts", faults.Writes())
	}
}

// cancelOnWrite cancels a context when the Syncer logs, i.e. when it is
// about to wait before a retry.
type cancelOnWrite struct{ cancel context.CancelFunc }

func (c cancelOnWrite) Write(p []byte) (int, error) { c.cancel(); return len(p), nil }

func TestRunBackoffRespectsTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s, err := blobsync.New(blobsync.Config{RetryBackoff: time.Hour}, zerolog.New(cancelOnWrite{cancel}))
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	err = s.Run(ctx, "op", func(context.Context) error { calls++; return errors.New("boom") })
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("Run = %v after %d calls, want context.Canceled after 1", err, calls)
	}
}

func TestRunStopsWhenTheCallerCancels(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s, _ := newSyncer(t, blobsync.Config{RetryBackoff: time.Millisecond})
	calls := 0
	err := s.Run(ctx, "op", func(ctx context.Context) error {
		calls++
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("Run = %v after %d calls, want context.Canceled after 1", err, calls)
	}
	var re *blobsync.RetryError
	if errors.As(err, &re) {
		t.Fatalf("Run = %v, a cancelled run is not a retry failure", err)
	}
}

func TestRunRecoversPanics(t *testing.T) {
	s, _ := newSyncer(t, blobsync.Config{MaxRetries: 1, RetryBackoff: time.Millisecond})
	err := s.Run(t.Context(), "op", func(context.Context) error { panic("kaboom") })
	if err == nil || !strings.Contains(err.Error(), "panic: kaboom") {
		t.Fatalf("Run = %v, want the panic as an error", err)
	}
}
