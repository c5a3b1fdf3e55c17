package storagetest

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// BucketName is the bucket S3 and GCS create.
const BucketName = "tunejet-test"

// S3 starts an in-memory S3 server (gofakes3) on loopback for the test,
// creates BucketName, points the AWS SDK at dummy credentials (no host
// config files), and returns a URL such as
// s3://tunejet-test?endpoint=http://127.0.0.1:PORT&use_path_style=true&disable_https=true&region=us-east-1.
// The server stops when the test ends.
func S3(t testing.TB) string {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(BucketName); err != nil {
		t.Fatalf("storagetest: create S3 bucket: %v", err)
	}
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(srv.Close)
	return S3At(t, srv.URL)
}

// S3At is S3's URL and AWS environment for an S3 server already serving
// BucketName at endpoint (http://host:port).
func S3At(t testing.TB, endpoint string) string {
	t.Helper()
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	t.Setenv("AWS_ACCESS_KEY_ID", "tunejet-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "tunejet-test")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	q := url.Values{
		"endpoint":       {endpoint},
		"use_path_style": {"true"},
		"disable_https":  {"true"},
		"region":         {"us-east-1"},
	}
	return "s3://" + BucketName + "?" + q.Encode()
}

// GCS starts fake-gcs-server on 127.0.0.1 for the test, creates BucketName,
// sets STORAGE_EMULATOR_HOST so gcsblob talks to it without credentials,
// and returns "gs://tunejet-test". The server stops when the test ends.
func GCS(t testing.TB) string {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http",
		Host:   "127.0.0.1",
		// The Go client reads objects through the XML API at
		// http://HOST:PORT/BUCKET/OBJECT; the server routes those by host.
		PublicHost: "127.0.0.1",
	})
	if err != nil {
		t.Fatalf("storagetest: start fake-gcs-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: BucketName})
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL(), "http://"))
	t.Setenv("STORAGE_EMULATOR_HOST_GRPC", "")
	return "gs://" + BucketName
}

var memSeq atomic.Int64

// Mem returns a mem:// URL that no other test (or earlier run of this
// one, under -count) has used. storage.OpenBucket shares mem:// buckets by
// name for the life of the process, so tests need fresh names.
func Mem(t testing.TB) string {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("mem://%s-%d", name, memSeq.Add(1))
}
