package storage_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
)

// readOnlyS3 serves storagetest.BucketName through gofakes3 but refuses
// every write as S3 does under a read-only policy: 403 AccessDenied.
func readOnlyS3(t *testing.T) string {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(storagetest.BucketName); err != nil {
		t.Fatal(err)
	}
	fake := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut || r.Method == http.MethodDelete {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message><RequestId>1</RequestId></Error>`))
			return
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return storagetest.S3At(t, srv.URL)
}

// TestReachNamesWhy: a probe of a bucket that cannot be written fails
// with one line naming why, in the words the issue tracker and the docs
// use, with the SDK's own message after it, through the real AWS client.
func TestReachNamesWhy(t *testing.T) {
	tests := []struct {
		name   string
		url    func(t *testing.T) string
		reason error
		detail string
	}{
		{"no credentials", func(t *testing.T) string {
			u := storagetest.S3(t)
			storagetest.NoCredentials(t)
			return u
		}, storage.ErrNoCredentials, "get credentials"},
		{"access denied", readOnlyS3, storage.ErrAccessDenied, "AccessDenied"},
		{"no such bucket", func(t *testing.T) string { return storagetest.S3WithoutBucket(t) }, storage.ErrNoSuchBucket, "NoSuchBucket"},
		// The SDK retries a refused connection with a random backoff,
		// which on a loaded machine may outlast the probe's bound: then the
		// detail is the bound, not the refusal.
		{"unreachable endpoint", func(t *testing.T) string {
			return storagetest.S3At(t, storagetest.ClosedEndpoint(t))
		}, storage.ErrUnreachable, "connection refused|no answer within 5s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tt.url(t)
			err := storage.Reach(t.Context(), u, "exp")
			var re *storage.ReachError
			if !errors.As(err, &re) || !errors.Is(err, tt.reason) {
				t.Fatalf("Reach = %v, want a *ReachError matching %q", err, tt.reason)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("the error is more than one line: %q", msg)
			}
			if want := "storage_path " + u + ": " + tt.reason.Error() + " ("; !strings.Contains(msg, want) {
				t.Errorf("Reach error %q does not say %q", msg, want)
			}
			if !slices.ContainsFunc(strings.Split(tt.detail, "|"), func(d string) bool { return strings.Contains(msg, d) }) {
				t.Errorf("Reach error %q does not say %q", msg, tt.detail)
			}
		})
	}
}

// TestReachWritesAndDeletes: a bucket that can be written passes, and the
// probe leaves nothing behind.
func TestReachWritesAndDeletes(t *testing.T) {
	u := storagetest.S3(t)
	if err := storage.Reach(t.Context(), u, "exp"); err != nil {
		t.Fatalf("Reach of a writable bucket = %v", err)
	}
	it := open(t, u).List(nil)
	if obj, err := it.Next(t.Context()); err == nil {
		t.Errorf("the probe left %s in the bucket", obj.Key)
	}
}
