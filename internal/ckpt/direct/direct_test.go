package direct_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"

	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/ckpt/ckpttest"
	"github.com/tunejet/tunejet/internal/ckpt/direct"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
)

// directs are the storages a checkpoint goes straight to: a folder (with
// the checksum read back after a kernel copy, and computed while copying)
// and S3 (gofakes3 on loopback).
func directs(t *testing.T) map[string]func(t *testing.T) direct.Storage {
	return map[string]func(t *testing.T) direct.Storage{
		"folder": func(t *testing.T) direct.Storage { return &direct.FileSystem{Root: t.TempDir()} },
		"folder/crc-on-copy": func(t *testing.T) direct.Storage {
			return &direct.FileSystem{Root: t.TempDir(), ChecksumWhileCopying: true}
		},
		"s3": func(t *testing.T) direct.Storage {
			url := storagetest.S3(t)
			b, err := storage.OpenBucket(t.Context(), url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			return &direct.BlobStore{B: storage.ExperimentBucket(b, "exp"), URL: storage.Join(url, "exp")}
		},
	}
}

func TestDirectRoundTrip(t *testing.T) {
	for name, open := range directs(t) {
		t.Run(name, func(t *testing.T) {
			d := open(t)
			src := t.TempDir()
			ckpttest.Write(t, src, ckpttest.Tree{"model.bin": ckpttest.Random(t, 3<<20+17), "opt/state.pt": []byte("state"), "empty.txt": nil})
			want := ckpttest.Read(t, src)
			m, err := d.Write(t.Context(), src, "trial_dir/checkpoint_000002", 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Files) != 3 || m.Size() != 3<<20+17+5 || !strings.HasPrefix(m.Digest(), "crc32c:") {
				t.Fatalf("manifest %+v (size %d, digest %s)", m.Files, m.Size(), m.Digest())
			}
			if len(m.Inline()) != 3 {
				t.Errorf("a small manifest is not carried inline: %v", m.Inline())
			}
			if err := os.RemoveAll(src); err != nil { // the trainable may delete it right away
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "restored")
			if err := d.Read(t.Context(), "trial_dir/checkpoint_000002", m.Digest(), dst); err != nil {
				t.Fatal(err)
			}
			got := ckpttest.Read(t, dst)
			delete(want, "opt/")
			delete(got, "opt/")
			if len(got) != len(want) {
				t.Fatalf("restored %v, wrote %v", keys(got), keys(want))
			}
			for p, sum := range want {
				if got[p] != sum {
					t.Errorf("%s differs after the round trip", p)
				}
			}
			// Another digest is another checkpoint.
			err = d.Read(t.Context(), "trial_dir/checkpoint_000002", "crc32c:00000000", filepath.Join(t.TempDir(), "x"))
			if !errors.Is(err, ckpt.ErrDigestMismatch) {
				t.Errorf("read with another digest: %v, want ErrDigestMismatch", err)
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A file changed after the checkpoint was written is caught on read.
func TestDirectReadCatchesADamagedFile(t *testing.T) {
	root := t.TempDir()
	d := &direct.FileSystem{Root: root}
	src := t.TempDir()
	ckpttest.Write(t, src, ckpttest.Tree{"a.bin": []byte("0123456789"), "b.bin": []byte("x")})
	m, err := d.Write(t.Context(), src, "trial/checkpoint_000000", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "trial", "checkpoint_000000", "a.bin"), []byte("0123456780"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	err = d.Read(t.Context(), "trial/checkpoint_000000", m.Digest(), dst)
	if !errors.Is(err, ckpt.ErrDigestMismatch) || !strings.Contains(err.Error(), "a.bin") {
		t.Fatalf("read of a damaged checkpoint: %v, want ErrDigestMismatch naming a.bin", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed read left %s: %v", dst, err)
	}
}

// A folder already at the target (an attempt killed before announcing it)
// is replaced whole: none of its files survive.
func TestDirectWriteReplacesAnEarlierFolder(t *testing.T) {
	for name, open := range directs(t) {
		t.Run(name, func(t *testing.T) {
			d := open(t)
			first := t.TempDir()
			ckpttest.Write(t, first, ckpttest.Tree{"old.bin": []byte("old"), "model.bin": []byte("first")})
			if _, err := d.Write(t.Context(), first, "trial/checkpoint_000001", 1); err != nil {
				t.Fatal(err)
			}
			second := t.TempDir()
			ckpttest.Write(t, second, ckpttest.Tree{"model.bin": []byte("second")})
			m, err := d.Write(t.Context(), second, "trial/checkpoint_000001", 2)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "restored")
			if err := d.Read(t.Context(), "trial/checkpoint_000001", m.Digest(), dst); err != nil {
				t.Fatal(err)
			}
			if got := keys(ckpttest.Read(t, dst)); !slices.Equal(got, []string{"./", "model.bin"}) {
				t.Errorf("restored %v, want model.bin alone", got)
			}
			if fs, ok := d.(*direct.FileSystem); ok {
				if got := dirEntries(t, filepath.Join(fs.Root, "trial", "checkpoint_000001")); !slices.Equal(got, []string{direct.ManifestFile, "model.bin"}) {
					t.Errorf("the folder holds %v", got)
				}
			}
		})
	}
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// What a write killed before its rename leaves is a temporary folder no
// reader takes for the checkpoint; CleanTemporary removes it.
func TestDirectTemporaryFoldersAreCleanedUp(t *testing.T) {
	root := t.TempDir()
	d := &direct.FileSystem{Root: root}
	trial := filepath.Join(root, "trial")
	left := filepath.Join(trial, ".checkpoint_000004.tmp-3-0a0b0c0d")
	ckpttest.Write(t, left, ckpttest.Tree{"model.bin": []byte("half")})
	src := t.TempDir()
	ckpttest.Write(t, src, ckpttest.Tree{"model.bin": []byte("whole")})
	m, err := d.Write(t.Context(), src, "trial/checkpoint_000003", 4)
	if err != nil {
		t.Fatal(err)
	}
	err = d.Read(t.Context(), "trial/checkpoint_000004", "crc32c:00000000", filepath.Join(t.TempDir(), "x"))
	if !errors.Is(err, direct.ErrIncomplete) {
		t.Errorf("read of a checkpoint only a killed write began: %v, want ErrIncomplete", err)
	}
	if err := d.CleanTemporary(t.Context(), "trial"); err != nil {
		t.Fatal(err)
	}
	if got := dirEntries(t, trial); !slices.Equal(got, []string{"checkpoint_000003"}) {
		t.Errorf("after the clean-up the trial folder holds %v", got)
	}
	if err := d.Read(t.Context(), "trial/checkpoint_000003", m.Digest(), filepath.Join(t.TempDir(), "y")); err != nil {
		t.Errorf("the complete checkpoint after the clean-up: %v", err)
	}
}

// On a bucket the manifest is written last: files without it are an
// incomplete folder, never read as a checkpoint.
func TestDirectBucketWritesTheManifestLast(t *testing.T) {
	url := storagetest.S3(t)
	raw, err := storage.OpenBucket(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	counting, counter := storagetest.Counting(raw)
	var order []string
	b := blob.NewBucket(&orderDriver{Bucket: storage.DriverOf(counting), order: &order})
	d := &direct.BlobStore{B: storage.ExperimentBucket(b, "exp"), URL: url}
	src := t.TempDir()
	ckpttest.Write(t, src, ckpttest.Tree{"a.bin": ckpttest.Random(t, 1000), "b/c.bin": ckpttest.Random(t, 2000)})
	m, err := d.Write(t.Context(), src, "trial/checkpoint_000000", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(order) != 3 || order[2] != "exp/trial/checkpoint_000000/"+direct.ManifestFile {
		t.Fatalf("writes in order %v, want the manifest last", order)
	}
	if counter.Total() != 3 {
		t.Errorf("%d writes, want 3", counter.Total())
	}
	// Remove the manifest: the folder is incomplete.
	if err := raw.Delete(t.Context(), "exp/trial/checkpoint_000000/"+direct.ManifestFile); err != nil {
		t.Fatal(err)
	}
	err = d.Read(t.Context(), "trial/checkpoint_000000", m.Digest(), filepath.Join(t.TempDir(), "x"))
	if !errors.Is(err, direct.ErrIncomplete) {
		t.Errorf("read without the manifest: %v, want ErrIncomplete", err)
	}
}

// A manifest too large for an event stays in storage alone.
func TestLargeManifestIsNotInline(t *testing.T) {
	d := &direct.FileSystem{Root: t.TempDir()}
	src := t.TempDir()
	tr := ckpttest.Tree{}
	for i := range 1200 {
		tr[filepath.ToSlash(filepath.Join("shards", strings.Repeat("x", 200)+"-"+strconv.Itoa(i)))] = []byte{byte(i)}
	}
	ckpttest.Write(t, src, tr)
	m, err := d.Write(context.Background(), src, "trial/checkpoint_000000", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Encode()) <= direct.ManifestInlineBytes || m.Inline() != nil {
		t.Fatalf("manifest of %d bytes, inline %d files", len(m.Encode()), len(m.Inline()))
	}
	if err := d.Read(t.Context(), "trial/checkpoint_000000", m.Digest(), filepath.Join(t.TempDir(), "x")); err != nil {
		t.Fatal(err)
	}
}

// orderDriver records the keys of completed writes in order.
type orderDriver struct {
	driver.Bucket
	mu    sync.Mutex
	order *[]string
}

func (d *orderDriver) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	w, err := d.Bucket.NewTypedWriter(ctx, key, contentType, opts)
	if err != nil {
		return nil, err
	}
	return &orderWriter{Writer: w, key: key, d: d}, nil
}

type orderWriter struct {
	driver.Writer
	key string
	d   *orderDriver
}

func (w *orderWriter) Close() error {
	if err := w.Writer.Close(); err != nil {
		return err
	}
	w.d.mu.Lock()
	*w.d.order = append(*w.d.order, w.key)
	w.d.mu.Unlock()
	return nil
}

// TestDirectWriteFilesReplacesWholeFiles: artifacts written straight into
// a trial's folder, nested ones too; a file written again replaces the
// one there, and no temporary file stays beside it.
func TestDirectWriteFilesReplacesWholeFiles(t *testing.T) {
	for name, open := range directs(t) {
		t.Run(name, func(t *testing.T) {
			d := open(t)
			src := t.TempDir()
			readBack := func(rel string) string {
				switch d := d.(type) {
				case *direct.FileSystem:
					b, err := os.ReadFile(d.Where(rel))
					if err != nil {
						t.Fatal(err)
					}
					return string(b)
				case *direct.BlobStore:
					b, err := d.B.ReadAll(t.Context(), rel)
					if err != nil {
						t.Fatal(err)
					}
					return string(b)
				}
				t.Fatalf("a Storage of type %T", d)
				return ""
			}
			ckpttest.Write(t, src, ckpttest.Tree{"log.txt": []byte("one"), "plots/loss.svg": []byte("<svg/>")})
			if err := d.WriteFiles(t.Context(), src, []string{"log.txt", "plots/loss.svg"}, "trial_dir"); err != nil {
				t.Fatal(err)
			}
			ckpttest.Write(t, src, ckpttest.Tree{"log.txt": []byte("one, two")})
			if err := d.WriteFiles(t.Context(), src, []string{"log.txt"}, "trial_dir"); err != nil {
				t.Fatal(err)
			}
			if got := readBack("trial_dir/log.txt"); got != "one, two" {
				t.Errorf("log.txt = %q, want the file written last", got)
			}
			if got := readBack("trial_dir/plots/loss.svg"); got != "<svg/>" {
				t.Errorf("plots/loss.svg = %q", got)
			}
			if fsd, ok := d.(*direct.FileSystem); ok {
				if got := dirEntries(t, fsd.Where("trial_dir")); !slices.Equal(got, []string{"log.txt", "plots"}) {
					t.Errorf("the trial folder holds %v, want log.txt and plots alone", got)
				}
			}
		})
	}
}

// An artifact copy killed before its rename leaves a temporary file
// beside its place, at any depth of the trial folder; CleanTemporary
// removes those too, and nothing else: not the syncer's own temporary
// files (storage.Dir.WriteAtomic's os.CreateTemp names, whose random part
// is 8 decimal digits about one time in fifty), which it renames a moment
// later.
func TestDirectTemporaryArtifactFilesAreCleanedUp(t *testing.T) {
	root := t.TempDir()
	d := &direct.FileSystem{Root: root}
	trial := filepath.Join(root, "trial")
	ckpttest.Write(t, trial, ckpttest.Tree{
		"plots/.loss.png.artifact-0a0b0c0d": []byte("half"),
		".model.bin.artifact-1a2b3c4d":      []byte("half"),
		"plots/loss.png":                    []byte("whole"),
		".hidden.tmp-notours":               []byte("a user's"),
		".params.json.tmp-12345678":         []byte("the syncer's, in flight"),
		"progress.csv":                      []byte("a,b\n"),
	})
	if err := d.CleanTemporary(t.Context(), "trial"); err != nil {
		t.Fatal(err)
	}
	var left []string
	err := filepath.WalkDir(trial, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(trial, p)
			left = append(left, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(left)
	if want := []string{".hidden.tmp-notours", ".params.json.tmp-12345678", "plots/loss.png", "progress.csv"}; !slices.Equal(left, want) {
		t.Errorf("after the clean-up the trial folder holds %v, want %v", left, want)
	}
}
