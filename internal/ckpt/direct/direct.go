// Package direct writes checkpoints straight into the experiment's
// storage: a runner that reaches it writes a reported checkpoint into
// <storage>/<experiment>/<trial dir>/checkpoint_NNNNNN/, once, instead of
// staging it in the Object Store (internal/ckpt) for the syncer to copy
// again.
//
// # Format
//
// The folder holds the checkpoint's regular files (symlinks are followed,
// empty folders are not kept) and ManifestFile, the manifest: every file's
// slash-relative path, size and CRC-32C (Castagnoli). The manifest is
// canonical JSON (files sorted by path, no spaces), so its own CRC-32C,
// "crc32c:<8 hex>", identifies the checkpoint: it is the Digest of the
// trial.checkpointed event. A reader checks the manifest against that
// digest and every file against the manifest.
//
// # Never mistaken for complete
//
// On a file system the files and the manifest are written in a temporary
// sibling .checkpoint_NNNNNN.tmp-<attempt>-<random>, which is then renamed
// to checkpoint_NNNNNN: a reader sees the whole folder or none, whenever
// the writing process is killed.
//
// Nothing is fsynced, as a plain copy (and Ray's) does not: the page
// cache outlives a killed process, and fsyncing every file cost 3 to 25
// times the copy itself. A folder that a power loss or a kernel crash
// leaves renamed but with files short or garbled fails its manifest
// check, and a restore falls back to the checkpoint before it. A folder
// of that name already there (left by an attempt killed before it
// announced it, or written by a fenced attempt) is moved aside and
// removed first: the log decides which checkpoint counts, and the
// manifest check catches a folder changed afterwards. Temporary folders
// left by a killed process are never referenced; CleanTemporary removes
// them.
//
// On a bucket the files are uploaded under the folder's prefix and the
// manifest last: a folder without its manifest is incomplete and never
// referenced. Objects of an earlier write of the same folder are removed
// first, the manifest first.
package direct

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt"
)

// ErrIncomplete is wrapped when a direct checkpoint's folder has no
// manifest: it was never completed, or was removed.
var ErrIncomplete = errors.New("the checkpoint's folder is incomplete or missing")

// Storage is an experiment's storage, written and read by runners that
// reach it. rel names a checkpoint's folder relative to the experiment's
// (<trial dir>/checkpoint_NNNNNN).
type Storage interface {
	// Write copies the checkpoint directory src into rel, complete or not
	// at all, and returns its manifest. tag (the attempt) names its
	// temporary folder.
	Write(ctx context.Context, src, rel string, tag int) (Manifest, error)
	// Read copies the checkpoint rel into dst (which must not exist),
	// checking its manifest against digest and every file against the
	// manifest; on error dst is removed.
	Read(ctx context.Context, rel, digest, dst string) error
	// CleanTemporary removes what interrupted writes left in the trial
	// folder dir: temporary folders on a file system (never referenced).
	CleanTemporary(ctx context.Context, dir string) error
	// Where is rel for messages: a path or URL.
	Where(rel string) string
	// WriteFiles copies files (slash-relative paths under src) into the
	// folder rel, each replacing the one there as a whole: artifacts,
	// which no event names, so no manifest.
	WriteFiles(ctx context.Context, src string, files []string, rel string) error
}

// Written reports whether ref is a checkpoint a runner wrote straight to
// storage.
func Written(ref *events.CheckpointRef) bool { return ref != nil && ref.Location != "" }

// StorageCopyObject is the Object Store object the syncer stages a
// checkpoint in storage as, for a runner that cannot read storage:
// <location>/storage-<crc>, named by its digest so that a checkpoint
// written again with other bytes gets its own.
func StorageCopyObject(ref *events.CheckpointRef) string {
	return ref.Location + "/storage-" + strings.TrimPrefix(ref.Digest, "crc32c:")
}

// artifactSources are the files of src named by files.
func artifactSources(src string, files []string) []sourceFile {
	out := make([]sourceFile, len(files))
	for i, f := range files {
		out[i] = sourceFile{rel: f, abs: filepath.Join(src, filepath.FromSlash(f))}
	}
	return out
}

// sourceFile is a file of a checkpoint directory to copy.
type sourceFile struct {
	rel  string // slash-relative
	abs  string
	size int64
}

// listSource lists the regular files under src (following symlinks).
func listSource(src string) ([]sourceFile, error) {
	info, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", src, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("checkpoint %s: not a directory", src)
	}
	var out []sourceFile
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == src {
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		info, err := os.Stat(p) // follows a symlink
		if err != nil {
			return err
		}
		switch {
		case info.IsDir() && d.Type()&fs.ModeSymlink != 0:
			return fmt.Errorf("checkpoint %s: %s links to a folder, which is not copied", src, rel)
		case info.IsDir():
			return nil
		case !info.Mode().IsRegular():
			return fmt.Errorf("checkpoint %s: %s is not a regular file", src, rel)
		case rel == ManifestFile:
			return nil // a checkpoint restored from storage and reported again
		}
		out = append(out, sourceFile{rel: rel, abs: p, size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list checkpoint %s: %w", src, err)
	}
	return out, nil
}

// copyConcurrency bounds the files copied at once.
const copyConcurrency = 4

// copyFiles runs fn for every file, limit at a time, and starts no more
// once one has failed or ctx has ended; it returns the first error.
func copyFiles(ctx context.Context, limit int, files []sourceFile, fn func(int, sourceFile) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for i, f := range files {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(i, f) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

func manifestSources(m Manifest, from string) []sourceFile {
	out := make([]sourceFile, len(m.Files))
	for i, f := range m.Files {
		out[i] = sourceFile{rel: f.Path, abs: filepath.Join(from, filepath.FromSlash(f.Path)), size: f.Size}
	}
	return out
}

func checkFile(f events.CheckpointFile, crc uint32, n int64) error {
	if got := fmt.Sprintf("%08x", crc); n != f.Size || got != f.CRC32C {
		return fmt.Errorf("%w: %s is %d bytes with crc32c %s, the manifest says %d bytes with %s", ckpt.ErrDigestMismatch, f.Path, n, got, f.Size, f.CRC32C)
	}
	return nil
}

// newDir creates dst, which must not exist.
func newDir(dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("%s already exists", dst)
	}
	return os.MkdirAll(dst, 0o755)
}

// startRead checks the manifest read from the checkpoint at where (its
// bytes, or the read's error, missing when there is none: an incomplete
// folder) against digest, and creates dst for the copy.
func startRead(where string, data []byte, err error, missing bool, digest, dst string) (Manifest, error) {
	if missing {
		return Manifest{}, fmt.Errorf("read checkpoint %s: %w: %w", where, ErrIncomplete, err)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("read checkpoint %s: %w", where, err)
	}
	m, err := ParseManifest(data, digest)
	if err == nil {
		err = newDir(dst)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("read checkpoint %s: %w", where, err)
	}
	return m, nil
}
