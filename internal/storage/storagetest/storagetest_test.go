package storagetest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
)

func open(t *testing.T, storagePath string) *blob.Bucket {
	t.Helper()
	b, err := storage.OpenBucket(t.Context(), storagePath)
	if err != nil {
		t.Fatalf("OpenBucket(%q): %v", storagePath, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// httpGet fetches u directly, without the blob client, to prove the object
// reached the fake server.
func httpGet(t *testing.T, u string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", u, resp.StatusCode, body, err)
	}
	return string(body)
}

func TestS3TalksToGofakes3(t *testing.T) {
	u := storagetest.S3(t)
	b := open(t, u)
	if err := storage.WriteAtomic(t.Context(), b, "dir/hello.txt", []byte("hello s3")); err != nil {
		t.Fatal(err)
	}
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	endpoint := parsed.Query().Get("endpoint")
	if got := httpGet(t, endpoint+"/"+storagetest.BucketName+"/dir/hello.txt"); got != "hello s3" {
		t.Fatalf("gofakes3 holds %q, want %q", got, "hello s3")
	}
	if back, err := storage.ReadAll(t.Context(), b, "dir/hello.txt"); err != nil || string(back) != "hello s3" {
		t.Fatalf("s3blob reads back %q, %v", back, err)
	}
}

func TestGCSTalksToFakeGCSServer(t *testing.T) {
	u := storagetest.GCS(t)
	b := open(t, u)
	if err := storage.WriteAtomic(t.Context(), b, "dir/hello.txt", []byte("hello gcs")); err != nil {
		t.Fatal(err)
	}
	host := os.Getenv("STORAGE_EMULATOR_HOST")
	got := httpGet(t, "http://"+host+"/storage/v1/b/"+storagetest.BucketName+"/o/"+url.PathEscape("dir/hello.txt")+"?alt=media")
	if got != "hello gcs" {
		t.Fatalf("fake-gcs-server holds %q, want %q", got, "hello gcs")
	}
	// Reads go through the XML API, which the server routes by host.
	if back, err := storage.ReadAll(t.Context(), b, "dir/hello.txt"); err != nil || string(back) != "hello gcs" {
		t.Fatalf("gcsblob reads back %q, %v", back, err)
	}
}

func TestCountingCountsCompletedWrites(t *testing.T) {
	ctx := t.Context()
	base := memblob.OpenBucket(nil)
	defer func() { _ = base.Close() }()
	b, c := storagetest.Counting(base)
	for range 3 {
		if err := b.WriteAll(ctx, "a", []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.WriteAll(ctx, "b", nil, nil); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	w, err := b.NewWriter(cancelled, "a", &blob.WriterOptions{ContentType: "text/plain"})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := w.Close(); err == nil {
		t.Fatal("a cancelled write closed without error")
	}
	if c.Writes("a") != 3 || c.Writes("b") != 1 || c.Total() != 4 {
		t.Fatalf("counts = %v, want a:3 b:1", c.All())
	}
	if got, err := base.ReadAll(ctx, "a"); err != nil || string(got) != "x" {
		t.Fatalf("the base bucket holds %q, %v", got, err)
	}
}

func TestFaultyFailsThenSucceeds(t *testing.T) {
	ctx := t.Context()
	base := memblob.OpenBucket(nil)
	defer func() { _ = base.Close() }()
	b, f := storagetest.Faulty(base)
	boom := errors.New("boom")
	f.FailWrites(2, boom)
	for i := range 2 {
		if err := b.WriteAll(ctx, "k", []byte("v"), nil); !errors.Is(err, boom) {
			t.Fatalf("write %d: err = %v, want boom", i, err)
		}
	}
	if err := b.WriteAll(ctx, "k", []byte("v"), nil); err != nil {
		t.Fatalf("third write: %v", err)
	}
	if f.Writes() != 3 {
		t.Fatalf("Writes() = %d, want 3", f.Writes())
	}
	f.FailDeletes(1, boom)
	if err := b.Delete(ctx, "k"); !errors.Is(err, boom) {
		t.Fatalf("delete: err = %v, want boom", err)
	}
	if err := b.Delete(ctx, "k"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

func TestFaultyHangsUntilContextEnds(t *testing.T) {
	base := memblob.OpenBucket(nil)
	defer func() { _ = base.Close() }()
	b, f := storagetest.Faulty(base)
	f.HangWrites(true)
	why := errors.New("test gave up")
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.WriteAll(ctx, "k", []byte("v"), nil) }()
	bustest.Eventually(t, 10*time.Second, "the write hangs", func() bool { return f.Hanging() == 1 })
	cancel(why)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("hung write returned %v, want context.Canceled", err)
	}
	if r := f.Released(); len(r) != 1 || !errors.Is(r[0], why) {
		t.Fatalf("Released() = %v, want [%v]", r, why)
	}
	if ok, _ := base.Exists(t.Context(), "k"); ok {
		t.Fatal("a hung write left an object behind")
	}
}
