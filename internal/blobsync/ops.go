package blobsync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"mime"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"golang.org/x/sync/errgroup"

	"github.com/tunejet/tunejet/internal/storage"
)

// ErrUnsafeKey is wrapped by SyncDown when an object's key would land
// outside the local directory.
var ErrUnsafeKey = errors.New("key escapes the local directory")

// ErrEmptyPrefix is returned by Delete for an empty prefix.
var ErrEmptyPrefix = errors.New("refusing to delete with an empty prefix (the whole bucket)")

// parallelism is how many objects one operation moves at once.
const parallelism = 8

// dirPrefix makes a non-empty prefix end with "/", so "trial_1" never
// matches "trial_10/...".
func dirPrefix(prefix string) string {
	if prefix == "" || strings.HasSuffix(prefix, "/") {
		return prefix
	}
	return prefix + "/"
}

// SyncUp uploads every regular file under localDir (and every symlink to
// one) whose slash-separated relative path is not excluded, to the key
// prefix+rel ("/" is added to a prefix that lacks it). Empty directories
// are not uploaded. A missing localDir is an error wrapping fs.ErrNotExist.
func SyncUp(ctx context.Context, localDir string, dst *blob.Bucket, prefix string, exclude []string) error {
	files, err := localFiles(localDir, newExcluder(exclude))
	if err != nil {
		return fmt.Errorf("sync up %s: %w", localDir, err)
	}
	prefix = dirPrefix(prefix)
	err = forEach(ctx, files, func(ctx context.Context, rel string) error {
		return upload(ctx, dst, filepath.Join(localDir, filepath.FromSlash(rel)), prefix+rel)
	})
	if err != nil {
		return fmt.Errorf("sync up %s to %q: %w", localDir, prefix, err)
	}
	return nil
}

// localFiles lists the files to upload under root as slash paths; an
// excluded directory is skipped whole.
func localFiles(root string, ex excluder) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if ex.excluded(rel, true) {
				return filepath.SkipDir
			}
			return nil
		}
		if isRegular(p, d) && !ex.excluded(rel, false) {
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

// isRegular reports whether d is a regular file or a symlink to one.
func isRegular(p string, d fs.DirEntry) bool {
	if d.Type().IsRegular() {
		return true
	}
	if d.Type()&fs.ModeSymlink == 0 {
		return false
	}
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func upload(ctx context.Context, dst *blob.Bucket, file, key string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := dst.Upload(ctx, key, f, &blob.WriterOptions{ContentType: contentType(file)}); err != nil {
		return fmt.Errorf("upload %s: %w", file, err)
	}
	return nil
}

// contentType guesses a file's MIME type from its extension.
func contentType(file string) string {
	if t := mime.TypeByExtension(filepath.Ext(file)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// SyncDown downloads every object under the key prefix ("/" is added to a
// prefix that lacks it) whose relative key is not excluded to
// localDir/<relative key>, creating localDir and parent directories. Each
// file is written to a temporary name beside it and renamed, so it is
// complete or absent. Keys that would land outside localDir ("../x",
// "/abs") fail the whole sync before anything is written, with an error
// wrapping ErrUnsafeKey. Directory markers (keys ending in "/") only
// create directories; an object deleted between the listing and its
// download is skipped.
func SyncDown(ctx context.Context, src *blob.Bucket, prefix, localDir string, exclude []string) error {
	prefix = dirPrefix(prefix)
	keys, err := remoteKeys(ctx, src, prefix, newExcluder(exclude))
	if err != nil {
		return fmt.Errorf("sync down %q to %s: %w", prefix, localDir, err)
	}
	if err := os.MkdirAll(localDir, 0o755); err != nil {
		return fmt.Errorf("sync down %q: %w", prefix, err)
	}
	root, err := os.OpenRoot(localDir)
	if err != nil {
		return fmt.Errorf("sync down %q: %w", prefix, err)
	}
	defer root.Close()
	err = forEach(ctx, keys, func(ctx context.Context, rel string) error {
		return download(ctx, src, prefix+rel, root, rel)
	})
	if err != nil {
		return fmt.Errorf("sync down %q to %s: %w", prefix, localDir, err)
	}
	return nil
}

// remoteKeys lists the relative keys under prefix to download, checking
// that every one stays inside the local directory.
func remoteKeys(ctx context.Context, src *blob.Bucket, prefix string, ex excluder) ([]string, error) {
	var keys []string
	for obj, err := range storage.Objects(ctx, src, &blob.ListOptions{Prefix: prefix}) {
		if err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
		rel := strings.TrimPrefix(obj.Key, prefix)
		if obj.IsDir || rel == "" {
			continue
		}
		if !filepath.IsLocal(filepath.FromSlash(strings.TrimSuffix(rel, "/"))) || strings.HasPrefix(rel, "/") {
			return nil, fmt.Errorf("%w: %q", ErrUnsafeKey, obj.Key)
		}
		if !ex.excludedPath(rel) {
			keys = append(keys, rel)
		}
	}
	return keys, nil
}

// excludedPath reports whether a relative key, or one of the directories
// it is in, is excluded.
func (ex excluder) excludedPath(rel string) bool {
	isDir := strings.HasSuffix(rel, "/")
	rel = strings.TrimSuffix(rel, "/")
	for i := range len(rel) {
		if rel[i] == '/' && ex.excluded(rel[:i], true) {
			return true
		}
	}
	return ex.excluded(rel, isDir)
}

// download copies one object to root/rel through a temporary file.
func download(ctx context.Context, src *blob.Bucket, key string, root *os.Root, rel string) error {
	name := filepath.FromSlash(strings.TrimSuffix(rel, "/"))
	if strings.HasSuffix(rel, "/") {
		return root.MkdirAll(name, 0o755)
	}
	if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	r, err := src.NewReader(ctx, key, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil // deleted since the listing
	}
	if err != nil {
		return fmt.Errorf("download %q: %w", key, err)
	}
	defer r.Close()
	tmp := path.Join(path.Dir(rel), "."+path.Base(rel)+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
	if err := writeFile(root, filepath.FromSlash(tmp), r); err != nil {
		return fmt.Errorf("download %q: %w", key, err)
	}
	if err := root.Rename(filepath.FromSlash(tmp), name); err != nil {
		_ = root.Remove(filepath.FromSlash(tmp))
		return fmt.Errorf("download %q: %w", key, err)
	}
	return nil
}

// writeFile creates name under root and copies r into it; on error the
// file is removed.
func writeFile(root *os.Root, name string, r io.Reader) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = root.Remove(name)
	}
	return err
}

// Delete removes every object under the key prefix ("/" is added to a
// prefix that lacks it, so "trial_1" leaves "trial_10/" alone). Objects
// already gone are not an error. An empty prefix is refused
// (ErrEmptyPrefix): delete a whole bucket some other way.
func Delete(ctx context.Context, b *blob.Bucket, prefix string) error {
	if prefix == "" || prefix == "/" {
		return ErrEmptyPrefix
	}
	prefix = dirPrefix(prefix)
	var keys []string
	for obj, err := range storage.Objects(ctx, b, &blob.ListOptions{Prefix: prefix}) {
		if err != nil {
			return fmt.Errorf("delete %q: list: %w", prefix, err)
		}
		if !obj.IsDir {
			keys = append(keys, obj.Key)
		}
	}
	err := forEach(ctx, keys, func(ctx context.Context, key string) error {
		if err := b.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete %q: %w", prefix, err)
	}
	return nil
}

// forEach calls fn for every item, up to parallelism at once. The first
// error cancels the calls still running and is returned; so is the
// context's error when ctx ends first.
func forEach[T any](ctx context.Context, items []T, fn func(context.Context, T) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelism)
	for _, item := range items {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(gctx, item) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return context.Cause(ctx)
}
