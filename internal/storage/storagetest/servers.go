package storagetest

import (
	"fmt"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
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

// S3WithoutBucket starts gofakes3 on loopback like S3 but creates no
// bucket: its URL names BucketName, which the server does not have.
func S3WithoutBucket(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New(), gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(srv.Close)
	return S3At(t, srv.URL)
}

// ClosedEndpoint returns http://127.0.0.1:PORT where nothing listens: a
// port that was just bound and released.
func ClosedEndpoint(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("storagetest: find a free port: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// NoCredentialsEnv is the environment ("KEY=value") in which the AWS SDK
// finds no credentials and asks no metadata service for them: no keys, a
// profile or a role, empty config files, the EC2 metadata client off. A
// process given it, with the AWS_* variables of its own environment left
// out, sees no credentials.
func NoCredentialsEnv() []string {
	env := []string{
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
	}
	for _, k := range []string{
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
	} {
		env = append(env, k+"=")
	}
	return env
}

// NoCredentials sets NoCredentialsEnv for the test (after S3 or S3At,
// which set dummy credentials).
func NoCredentials(t testing.TB) {
	t.Helper()
	for _, kv := range NoCredentialsEnv() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
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
