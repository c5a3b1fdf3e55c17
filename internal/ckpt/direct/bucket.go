package direct

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/storage"
)

// BlobStore is a Storage on a bucket: B is the experiment's part of it
// (storage.ExperimentBucket), URL its storage path for messages.
type BlobStore struct {
	B   *blob.Bucket
	URL string
}

// Where implements Storage.
func (d *BlobStore) Where(rel string) string { return strings.TrimSuffix(d.URL, "/") + "/" + rel }

// uploadConcurrency bounds the files uploaded at once.
const uploadConcurrency = 8

// Write implements Storage.
func (d *BlobStore) Write(ctx context.Context, src, rel string, _ int) (Manifest, error) {
	files, err := listSource(src)
	if err != nil {
		return Manifest{}, err
	}
	prefix := rel + "/"
	if err := d.remove(ctx, prefix); err != nil {
		return Manifest{}, err
	}
	m := Manifest{Files: make([]events.CheckpointFile, len(files))}
	err = copyFiles(ctx, uploadConcurrency, files, func(i int, f sourceFile) error {
		crc, n, err := d.upload(ctx, f.abs, prefix+f.rel)
		m.Files[i] = events.CheckpointFile{Path: f.rel, Size: n, CRC32C: fmt.Sprintf("%08x", crc)}
		return err
	})
	if err != nil {
		return Manifest{}, fmt.Errorf("write checkpoint %s: %w", d.Where(rel), err)
	}
	// Last: the manifest makes the folder complete.
	if err := d.B.WriteAll(ctx, prefix+ManifestFile, m.Encode(), nil); err != nil {
		return Manifest{}, fmt.Errorf("write checkpoint %s: %w", d.Where(rel), err)
	}
	return m, nil
}

// upload streams a file to key, computing its CRC-32C as it goes.
func (d *BlobStore) upload(ctx context.Context, src, key string) (uint32, int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := d.B.NewWriter(wctx, key, nil)
	if err != nil {
		return 0, 0, err
	}
	h := crc32.New(castagnoli)
	n, err := io.Copy(w, io.TeeReader(in, h))
	if err != nil {
		cancel() // abandons the upload
		_ = w.Close()
		return 0, 0, err
	}
	if err := w.Close(); err != nil {
		return 0, 0, err
	}
	return h.Sum32(), n, nil
}

// WriteFiles implements Storage: a bucket publishes each object whole when
// its upload ends.
func (d *BlobStore) WriteFiles(ctx context.Context, src string, files []string, rel string) error {
	err := copyFiles(ctx, copyConcurrency, artifactSources(src, files), func(_ int, f sourceFile) error {
		_, _, err := d.upload(ctx, f.abs, rel+"/"+f.rel)
		return err
	})
	if err != nil {
		return fmt.Errorf("write artifacts into %s: %w", d.Where(rel), err)
	}
	return nil
}

// remove deletes the objects under prefix, the manifest first: one list
// request when there are none (the usual case).
func (d *BlobStore) remove(ctx context.Context, prefix string) error {
	var keys []string
	for obj, err := range storage.Objects(ctx, d.B, &blob.ListOptions{Prefix: prefix}) {
		if err != nil {
			return fmt.Errorf("remove the earlier %s: %w", prefix, err)
		}
		keys = append(keys, obj.Key)
	}
	if i := slices.Index(keys, prefix+ManifestFile); i > 0 {
		keys[0], keys[i] = keys[i], keys[0]
	}
	for _, k := range keys {
		if err := d.B.Delete(ctx, k); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("remove the earlier %s: %w", prefix, err)
		}
	}
	return nil
}

// Read implements Storage.
func (d *BlobStore) Read(ctx context.Context, rel, digest, dst string) (err error) {
	return ReadBucket(ctx, d.B, rel, digest, dst)
}

// ReadBucket copies the direct checkpoint rel of the experiment bucket b
// into dst (see Storage.Read).
func ReadBucket(ctx context.Context, b *blob.Bucket, rel, digest, dst string) (err error) {
	prefix := rel + "/"
	data, err := b.ReadAll(ctx, prefix+ManifestFile)
	m, err := startRead(rel, data, err, gcerrors.Code(err) == gcerrors.NotFound, digest, dst)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dst)
		}
	}()
	err = copyFiles(ctx, copyConcurrency, manifestSources(m, ""), func(i int, f sourceFile) error {
		crc, n, err := download(ctx, b, prefix+f.rel, filepath.Join(dst, filepath.FromSlash(f.rel)))
		if err != nil {
			return err
		}
		return checkFile(m.Files[i], crc, n)
	})
	if err != nil {
		return fmt.Errorf("read checkpoint %s: %w", rel, err)
	}
	return nil
}

func download(ctx context.Context, b *blob.Bucket, key, dst string) (uint32, int64, error) {
	r, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, 0, err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, 0, err
	}
	defer out.Close()
	// Large reads: the default 32 KiB buffer makes many small reads of
	// the response and writes of the file.
	h := crc32.New(castagnoli)
	n, err := copyBuffer(io.MultiWriter(out, h), r)
	if err != nil {
		return 0, 0, err
	}
	return h.Sum32(), n, out.Close()
}

// CleanTemporary implements Storage: a bucket has no temporary folders (a
// folder without its manifest is rewritten whole by the next write).
func (d *BlobStore) CleanTemporary(context.Context, string) error { return nil }
