package main_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
)

// markingExperiment is an experiment whose one trial creates the file
// named by MARK: a test that finds no such file knows no trial started.
const markingExperiment = `name: %s
trainable:
  name: mark
  command: ["/bin/sh", "-c", "touch \"$MARK\" && \"$TUNEJET_BIN\" report loss=1"]
param_space:
  x: 1
tune_config:
  metric: loss
  mode: min
`

// TestRunRefusesABucketItCannotWrite: `tunejet run` on the embedded stack
// with a bucket storage_path that cannot be written (no credentials, no
// such bucket, an endpoint where nothing listens) exits 1 with one line
// that names the storage path and why, and no trial starts; the next run
// on the same store says nothing of it. The real AWS client talks to
// gofakes3 or a closed port on loopback.
func TestRunRefusesABucketItCannotWrite(t *testing.T) {
	withBucket := storagetest.S3(t) // sets dummy credentials for the tests below
	tests := []struct {
		name, url string
		env       []string
	}{
		{"no credentials", withBucket, storagetest.NoCredentialsEnv()},
		{"no such bucket", storagetest.S3WithoutBucket(t), nil},
		{"unreachable endpoint", storagetest.S3At(t, storagetest.ClosedEndpoint(t)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mark := filepath.Join(t.TempDir(), "started")
			file := writeFile(t, t.TempDir(), "exp.yaml", fmt.Sprintf(markingExperiment, "unwritable"))
			env := embeddedEnv(t, append([]string{"MARK=" + mark}, tt.env...)...)
			store := t.TempDir()
			r := tunejet(t, "", env, "run", file, "--store-dir", store, "--storage-path", tt.url)
			if r.code != 1 {
				t.Fatalf("want exit status 1, got:\n%s", r)
			}
			want := "tunejet: storage_path " + tt.url + ": " + tt.name + " ("
			if got := strings.TrimSpace(r.stderr); strings.Contains(got, "\n") || !strings.HasPrefix(got, want) {
				t.Errorf("want one line on stderr starting %q, got:\n%s", want, r)
			}
			if strings.Contains(r.stdout, "Results:") {
				t.Errorf("a refused run printed results:\n%s", r)
			}
			if _, err := os.Stat(mark); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a trial started (%s: %v)", mark, err)
			}
			// The refused experiment left nothing in the store to retry.
			other := writeFile(t, t.TempDir(), "other.yaml", fmt.Sprintf(markingExperiment, "other"))
			r = tunejet(t, "", env, "run", other, "--store-dir", store, "--storage-path", t.TempDir())
			if r.code != 0 || strings.Contains(r.stderr, "unwritable") || strings.Contains(r.stderr, "s3://") {
				t.Errorf("the next run on the same store: want exit status 0 and nothing about the refused experiment:\n%s", r)
			}
		})
	}
}

// TestRestoreRefusesABucketItCannotWrite: `tunejet restore` of an
// experiment in a bucket it has no credentials for exits 1 with the same
// one line, before it asks anything of the restorer: on the embedded
// stack, and against a deployment.
func TestRestoreRefusesABucketItCannotWrite(t *testing.T) {
	u := storagetest.S3(t)
	srv := bustest.Start(t)
	for name, where := range map[string][]string{
		"embedded":   {"--store-dir", t.TempDir()},
		"deployment": {"--nats", srv.URL()},
	} {
		t.Run(name, func(t *testing.T) {
			mark := filepath.Join(t.TempDir(), "started")
			file := writeFile(t, t.TempDir(), "exp.yaml", fmt.Sprintf(markingExperiment, "unwritable"))
			env := embeddedEnv(t, append([]string{"MARK=" + mark}, storagetest.NoCredentialsEnv()...)...)
			r := tunejet(t, "", env, append([]string{"restore", storage.Join(u, "unwritable"), file}, where...)...)
			if r.code != 1 {
				t.Fatalf("want exit status 1, got:\n%s", r)
			}
			got := strings.TrimSpace(r.stderr)
			if strings.Contains(got, "\n") || !strings.HasPrefix(got, "tunejet: storage_path s3://"+storagetest.BucketName) || !strings.Contains(got, ": no credentials (") {
				t.Errorf("want one line on stderr naming the bucket and saying it has no credentials, got:\n%s", r)
			}
			if _, err := os.Stat(mark); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a trial started (%s: %v)", mark, err)
			}
		})
	}
}
