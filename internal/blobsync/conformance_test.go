package blobsync_test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gocloud.dev/blob"

	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
)

// backends are the storage paths the conformance suite runs against: each
// returns a fresh, empty storage path for one test.
var backends = []struct {
	name string
	path func(t *testing.T) string
}{
	{"file", func(t *testing.T) string { return t.TempDir() }},
	{"mem", func(t *testing.T) string { return storagetest.Mem(t) }},
	{"s3", func(t *testing.T) string { return storagetest.S3(t) }},
	{"gs", func(t *testing.T) string { return storagetest.GCS(t) }},
}

// TestConformance runs every storage and sync operation against every
// backend, through storage.OpenBucket as the services use it.
func TestConformance(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, storagePath string)
	}{
		{"WriteAtomicAndReadAll", testWriteAtomicAndReadAll},
		{"NewestStateKey", testNewestStateKey},
		{"Marker", testMarker},
		{"SyncRoundTrip", testSyncRoundTrip},
		{"SyncUpExclude", testSyncUpExclude},
		{"SyncUp256Files", testSyncUp256Files},
		{"Delete", testDelete},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { c.run(t, be.path(t)) })
			}
		})
	}
}

func openExperiment(t *testing.T, storagePath string) (root, exp *blob.Bucket) {
	t.Helper()
	root, err := storage.OpenBucket(t.Context(), storagePath)
	if err != nil {
		t.Fatalf("OpenBucket(%q): %v", storagePath, err)
	}
	t.Cleanup(func() { _ = root.Close() })
	return root, storage.ExperimentBucket(root, "exp")
}

func testWriteAtomicAndReadAll(t *testing.T, storagePath string) {
	ctx := t.Context()
	root, exp := openExperiment(t, storagePath)
	if _, err := storage.ReadAll(ctx, exp, "params.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadAll of a missing key = %v, want fs.ErrNotExist", err)
	}
	for _, v := range []string{`{"lr": 0.1}`, `{"lr": 0.2, "momentum": 0.9}`, ""} {
		if err := storage.WriteAtomic(ctx, exp, "trial_0/params.json", []byte(v)); err != nil {
			t.Fatal(err)
		}
		got, err := storage.ReadAll(ctx, root, "exp/trial_0/params.json")
		if err != nil || string(got) != v {
			t.Fatalf("ReadAll = %q, %v; want %q", got, err, v)
		}
	}
}

func testNewestStateKey(t *testing.T, storagePath string) {
	ctx := t.Context()
	_, exp := openExperiment(t, storagePath)
	if _, err := storage.NewestStateKey(ctx, exp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("NewestStateKey of an empty experiment = %v, want fs.ErrNotExist", err)
	}
	for _, k := range []string{
		"experiment_state-2024-01-01_00-00-00.json",
		"experiment_state-2024-01-02_00-00-00.json",
		"experiment_state-2024-01-01_12-00-00.json",
		"experiment_state-2099-01-01_00-00-00.txt",
		"trial_0/experiment_state-2099-01-01_00-00-00.json",
		"experiment_state-2099-01-01_00-00-00.json/inner",
		"zz_experiment_state-2099-01-01_00-00-00.json",
	} {
		if err := storage.WriteAtomic(ctx, exp, k, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	got, err := storage.NewestStateKey(ctx, exp)
	if err != nil || got != "experiment_state-2024-01-02_00-00-00.json" {
		t.Fatalf("NewestStateKey = %q, %v", got, err)
	}
}

func testMarker(t *testing.T, storagePath string) {
	ctx := t.Context()
	_, exp := openExperiment(t, storagePath)
	if err := storage.CheckMarker(ctx, exp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("CheckMarker before WriteMarker = %v, want fs.ErrNotExist", err)
	}
	if err := storage.WriteMarker(ctx, exp); err != nil {
		t.Fatal(err)
	}
	if err := storage.CheckMarker(ctx, exp); err != nil {
		t.Fatalf("CheckMarker after WriteMarker = %v", err)
	}
}

// writeTree creates files (slash path → content) and empty dirs under dir.
func writeTree(t *testing.T, dir string, files map[string]string, emptyDirs ...string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range emptyDirs {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree returns every regular file under dir as slash path → content.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		got[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// keys lists every key in b.
func keys(t *testing.T, b *blob.Bucket) []string {
	t.Helper()
	var ks []string
	it := b.List(nil)
	for {
		obj, err := it.Next(t.Context())
		if errors.Is(err, io.EOF) {
			return ks
		}
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, obj.Key)
	}
}

func testSyncRoundTrip(t *testing.T, storagePath string) {
	ctx := t.Context()
	root, exp := openExperiment(t, storagePath)
	src := t.TempDir()
	files := map[string]string{
		"result.json":                   `{"loss": 0.5}` + "\n",
		"progress.csv":                  "loss\n0.5\n",
		"empty.txt":                     "",
		"checkpoint_000000/model.bin":   strings.Repeat("\x00\x01", 5000),
		"checkpoint_000000/deep/a/b.md": "# deep",
		"checkpoint_000000/deep/empty":  "",
	}
	writeTree(t, src, files, "empty_dir", "checkpoint_000000/empty_dir")

	if err := blobsync.SyncUp(ctx, src, exp, "trial_0", nil); err != nil {
		t.Fatal(err)
	}
	var want []string
	for rel := range files {
		want = append(want, "exp/trial_0/"+rel)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, keys(t, root)); diff != "" {
		t.Fatalf("keys after SyncUp (-want +got):\n%s", diff)
	}

	dst := filepath.Join(t.TempDir(), "not", "yet", "there")
	if err := blobsync.SyncDown(ctx, exp, "trial_0/", dst, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(files, readTree(t, dst)); diff != "" {
		t.Fatalf("tree after SyncDown (-want +got):\n%s", diff)
	}

	// SyncDown with excludes skips files and whole directories.
	dst2 := t.TempDir()
	if err := blobsync.SyncDown(ctx, exp, "trial_0", dst2, []string{"checkpoint_*/", "*.csv"}); err != nil {
		t.Fatal(err)
	}
	wantSome := map[string]string{"result.json": files["result.json"], "empty.txt": ""}
	if diff := cmp.Diff(wantSome, readTree(t, dst2)); diff != "" {
		t.Fatalf("tree after SyncDown with excludes (-want +got):\n%s", diff)
	}

	// A second SyncUp overwrites in place.
	writeTree(t, src, map[string]string{"result.json": "changed"})
	if err := blobsync.SyncUp(ctx, src, exp, "trial_0", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := storage.ReadAll(ctx, exp, "trial_0/result.json"); err != nil || string(got) != "changed" {
		t.Fatalf("after the second SyncUp: %q, %v", got, err)
	}
}

// testSyncUpExclude is Ray's test_sync_up_exclude.
func testSyncUpExclude(t *testing.T, storagePath string) {
	ctx := t.Context()
	root, _ := openExperiment(t, storagePath)
	src := t.TempDir()
	writeTree(t, src, map[string]string{
		"level0.txt": "", "level0_exclude.txt": "",
		"subdir/level1.txt": "", "subdir/level1_exclude.txt": "",
		"subdir/nested/level2.txt": "", "subdir_nested_level2_exclude.txt": "",
		"subdir_exclude/something/somewhere.txt": "",
	})
	if err := blobsync.SyncUp(ctx, src, root, "exp", []string{"*_exclude*"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"exp/level0.txt", "exp/subdir/level1.txt", "exp/subdir/nested/level2.txt"}
	if diff := cmp.Diff(want, keys(t, root)); diff != "" {
		t.Fatalf("keys (-want +got):\n%s", diff)
	}
}

func testSyncUp256Files(t *testing.T, storagePath string) {
	ctx := t.Context()
	root, exp := openExperiment(t, storagePath)
	src := t.TempDir()
	files := map[string]string{}
	for i := range 256 {
		files[fmt.Sprintf("d%d/file_%03d.txt", i%4, i)] = fmt.Sprint(i)
	}
	writeTree(t, src, files)
	if err := blobsync.SyncUp(ctx, src, exp, "many", nil); err != nil {
		t.Fatal(err)
	}
	got := keys(t, root)
	if len(got) != 256 {
		t.Fatalf("%d keys after uploading 256 files", len(got))
	}
	for _, k := range []string{"exp/many/d0/file_000.txt", "exp/many/d3/file_255.txt"} {
		if _, found := slices.BinarySearch(got, k); !found {
			t.Fatalf("%s missing after uploading 256 files", k)
		}
	}
}

func testDelete(t *testing.T, storagePath string) {
	ctx := t.Context()
	root, exp := openExperiment(t, storagePath)
	for _, k := range []string{"trial_1/a", "trial_1/ckpt/b", "trial_10/c", "trial_1x"} {
		if err := storage.WriteAtomic(ctx, exp, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := blobsync.Delete(ctx, exp, "trial_1"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"exp/trial_10/c", "exp/trial_1x"}, keys(t, root)); diff != "" {
		t.Fatalf("keys after Delete (-want +got):\n%s", diff)
	}
	if err := blobsync.Delete(ctx, exp, "trial_1"); err != nil {
		t.Fatalf("deleting nothing: %v", err)
	}
	if err := blobsync.Delete(ctx, exp, ""); !errors.Is(err, blobsync.ErrEmptyPrefix) {
		t.Fatalf("Delete with an empty prefix = %v", err)
	}
}

func TestSyncDownRefusesEscapingKeys(t *testing.T) {
	for _, key := range []string{"../evil", "p/../../evil", "/abs/evil"} {
		t.Run(key, func(t *testing.T) {
			ctx := t.Context()
			b, err := storage.OpenBucket(ctx, storagetest.Mem(t))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			for _, k := range []string{"good.txt", key} {
				if err := b.WriteAll(ctx, k, []byte("x"), nil); err != nil {
					t.Fatal(err)
				}
			}
			parent := t.TempDir()
			dst := filepath.Join(parent, "dst")
			err = blobsync.SyncDown(ctx, b, "", dst, nil)
			if !errors.Is(err, blobsync.ErrUnsafeKey) || !strings.Contains(err.Error(), key) {
				t.Fatalf("SyncDown = %v, want ErrUnsafeKey naming %q", err, key)
			}
			if got := readTree(t, parent); len(got) != 0 {
				t.Fatalf("SyncDown wrote %v before refusing", got)
			}
		})
	}
}

func TestSyncUpMissingDir(t *testing.T) {
	b, err := storage.OpenBucket(t.Context(), storagetest.Mem(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = blobsync.SyncUp(t.Context(), filepath.Join(t.TempDir(), "missing"), b, "x", nil)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncUp of a missing dir = %v, want fs.ErrNotExist", err)
	}
}
