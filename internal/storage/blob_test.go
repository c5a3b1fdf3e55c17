package storage_test

import (
	"bytes"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

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

func TestOpenBucketBadPaths(t *testing.T) {
	s3 := storagetest.S3(t) // AWS env for the s3 cases
	s3u, err := url.Parse(s3)
	if err != nil {
		t.Fatal(err)
	}
	withPath := func(p, extra string) string {
		u := *s3u
		u.Path = p
		if extra != "" {
			u.RawQuery += "&" + extra
		}
		return u.String()
	}
	tests := []struct {
		name     string
		path     string
		want     []string
		ourError bool // wraps storage.ErrInvalidURL
	}{
		{"unknown scheme", "ftp://host/dir", []string{`"ftp://host/dir"`, `unsupported scheme "ftp"`, "file://, mem://, s3://, gs://, azblob://"}, true},
		{"s3 without bucket", "s3://", []string{`"s3://"`, "no bucket name"}, true},
		{"gs without bucket", "gs:///prefix", []string{`"gs:///prefix"`, "no bucket name"}, true},
		{"s3 bad query parameter", s3 + "&bogus=1", []string{"bogus"}, false},
		{"file bad query parameter", "file://" + t.TempDir() + "?bogus=1", []string{`invalid query parameter "bogus"`}, false},
		{"mem query parameter", "mem://x?create_dir=1", []string{`"mem://x?create_dir=1"`, `invalid query parameter "create_dir"`}, true},
		{"relative local path", "results/x", []string{`"results/x"`, "must be absolute"}, true},
		{"empty local path", "", []string{"must be absolute"}, true},
		{"dot-dot in prefix", withPath("/a/../b", ""), []string{`".."`}, true},
		{"prefix twice", withPath("/a", "prefix=b/"), []string{"not both"}, true},
		{"single key", s3 + "&key=k", []string{`"key"`}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := storage.OpenBucket(t.Context(), tc.path)
			if err == nil {
				_ = b.Close()
				t.Fatalf("OpenBucket(%q) succeeded", tc.path)
			}
			t.Logf("OpenBucket(%q): %v", tc.path, err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.ourError != errors.Is(err, storage.ErrInvalidURL) {
				t.Errorf("errors.Is(%v, ErrInvalidURL) = %v, want %v", err, !tc.ourError, tc.ourError)
			}
		})
	}
}

func TestOpenBucketMemIsSharedByName(t *testing.T) {
	ctx := t.Context()
	name := storagetest.Mem(t)
	w := open(t, name)
	r := open(t, name)
	if err := storage.WriteAtomic(ctx, w, "exp/a.json", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := storage.ReadAll(ctx, r, "exp/a.json"); err != nil || string(got) != "1" {
		t.Fatalf("reader sees %q, %v after the writer closed", got, err)
	}
	sub := open(t, name+"/exp")
	if got, err := storage.ReadAll(ctx, sub, "a.json"); err != nil || string(got) != "1" {
		t.Fatalf("%s/exp sees %q, %v", name, got, err)
	}
	other := open(t, name+"-other")
	if _, err := storage.ReadAll(ctx, other, "exp/a.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("another name sees the object: %v", err)
	}
}

func TestOpenBucketLocalIsRaysLayout(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "not", "yet")
	for _, p := range []string{dir, "file://" + dir} {
		b := open(t, p)
		if err := storage.WriteAtomic(ctx, b, "exp/trial_0/result.json", []byte(p)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "exp", "trial_0", "result.json"))
		if err != nil || string(got) != p {
			t.Fatalf("%s: file holds %q, %v", p, got, err)
		}
	}
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, d.Name())
		}
		return err
	})
	if err != nil || len(names) != 1 {
		t.Fatalf("files under the storage path: %v, %v; want only result.json (no .attrs, no temp files)", names, err)
	}
}

func TestOpenBucketURLPathIsAPrefix(t *testing.T) {
	ctx := t.Context()
	s3 := storagetest.S3(t)
	u, err := url.Parse(s3)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/some/prefix/"
	prefixed := open(t, u.String())
	if err := storage.WriteAtomic(ctx, prefixed, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	whole := open(t, s3)
	if got, err := storage.ReadAll(ctx, whole, "some/prefix/k"); err != nil || string(got) != "v" {
		t.Fatalf("bucket root sees %q, %v", got, err)
	}
}

func TestExperimentBucketLeavesParentOpen(t *testing.T) {
	ctx := t.Context()
	parent := open(t, t.TempDir())
	exp := storage.ExperimentBucket(parent, "exp")
	if err := storage.WriteAtomic(ctx, exp, "a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_, err := storage.ReadAll(ctx, exp, "missing")
	if !errors.Is(err, fs.ErrNotExist) || gcerrors.Code(err) != gcerrors.NotFound {
		t.Fatalf("missing object: %v (code %v), want fs.ErrNotExist and NotFound", err, gcerrors.Code(err))
	}
	if n := strings.Count(err.Error(), "code=NotFound"); n != 1 {
		t.Fatalf("error %q wraps the blob error %d times, want once", err, n)
	}
	if err := exp.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := storage.ReadAll(ctx, parent, "exp/a"); err != nil || string(got) != "x" {
		t.Fatalf("parent after closing the experiment bucket: %q, %v", got, err)
	}
}

// TestWriteAtomicFileNeverPartial checks fileblob with no_tmp_dir: while a
// write is open nothing is visible at the key, and a reader racing with
// rewrites sees one whole version or the other.
func TestWriteAtomicFileNeverPartial(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	b := open(t, dir)
	w, err := b.NewWriter(ctx, "state.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(bytes.Repeat([]byte("a"), 4096)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a half-written object is visible: %v", err)
	}
	if ok, err := b.Exists(ctx, "state.json"); ok || err != nil {
		t.Fatalf("Exists during the write = %v, %v", ok, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	small, large := bytes.Repeat([]byte("s"), 1<<10), bytes.Repeat([]byte("L"), 1<<20)
	done := make(chan error, 1)
	go func() {
		for i := range 40 {
			data := small
			if i%2 == 1 {
				data = large
			}
			if err := storage.WriteAtomic(ctx, b, "state.json", data); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for reads := 0; ; reads++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
		got, err := storage.ReadAll(ctx, b, "state.json")
		if err != nil {
			t.Fatalf("read %d: %v", reads, err)
		}
		if first := bytes.Repeat([]byte("a"), 4096); !bytes.Equal(got, small) && !bytes.Equal(got, large) && !bytes.Equal(got, first) {
			t.Fatalf("read %d saw a partial object of %d bytes", reads, len(got))
		}
	}
}

func TestCheckShared(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	err := storage.CheckShared(dir, "exp")
	if !errors.Is(err, storage.ErrNotShared) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("CheckShared without a marker = %v, want ErrNotShared wrapping fs.ErrNotExist", err)
	}
	for _, want := range []string{
		"unable to set up cluster storage", dir, filepath.Join(dir, "exp", storage.MarkerFile),
		"Every host that runs a runner or syncer must see the same storage", "NFS", "s3://", "gs://",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CheckShared error %q does not contain %q", err, want)
		}
	}
	if err := storage.CheckShared("file://"+dir, "exp"); !errors.Is(err, storage.ErrNotShared) {
		t.Fatalf("CheckShared(file://) without a marker = %v", err)
	}
	if err := storage.WriteMarker(ctx, storage.ExperimentBucket(open(t, dir), "exp")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, "file://" + dir, "s3://bucket/x", "gs://bucket", "mem://x"} {
		if err := storage.CheckShared(p, "exp"); err != nil {
			t.Errorf("CheckShared(%q) = %v, want nil", p, err)
		}
	}
}
