package ckpt

// Direct checkpoints: a runner that reaches the experiment's storage
// writes a reported checkpoint straight into
// <storage>/<experiment>/<trial dir>/checkpoint_NNNNNN/, once, instead of
// staging it in the Object Store for the syncer to copy again.
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
// check, and a restore falls back to the checkpoint before it. A folder of that name already there (left by an attempt killed
// before it announced it, or written by a fenced attempt) is moved aside
// and removed first: the log decides which checkpoint counts, and the
// manifest check catches a folder changed afterwards. Temporary folders
// left by a killed process are never referenced; CleanTemporary removes
// them.
//
// On a bucket the files are uploaded under the folder's prefix and the
// manifest last: a folder without its manifest is incomplete and never
// referenced. Objects of an earlier write of the same folder are removed
// first, the manifest first.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"golang.org/x/sys/unix"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/storage"
)

// ManifestFile is the manifest's name in a direct checkpoint's folder.
// Restores leave it out of the copy the trainable sees.
const ManifestFile = ".tunejet_manifest.json"

// ManifestInlineBytes bounds the manifest a trial.checkpointed event
// carries (events.CheckpointRef.Files): a larger one (tens of thousands of
// files) stays in the folder alone, and the event's digest checks it. An
// event must fit the server's 1 MiB message.
const ManifestInlineBytes = 256 << 10

// castagnoli is the CRC-32C table (hardware-accelerated on amd64/arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Manifest lists a direct checkpoint's files.
type Manifest struct {
	Files []events.CheckpointFile `json:"files"`
}

// Encode is the manifest's canonical form: files sorted by path.
func (m Manifest) Encode() []byte {
	files := slices.Clone(m.Files)
	slices.SortFunc(files, func(a, b events.CheckpointFile) int { return strings.Compare(a.Path, b.Path) })
	b, _ := json.Marshal(Manifest{Files: files}) // cannot fail: strings and integers
	return b
}

// Digest is "crc32c:<8 hex>" of the canonical form.
func (m Manifest) Digest() string { return crcDigest(m.Encode()) }

func crcDigest(b []byte) string {
	return fmt.Sprintf("crc32c:%08x", crc32.Checksum(b, castagnoli))
}

// Size is the bytes of the files.
func (m Manifest) Size() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// Inline is the files an event carries: all of them, or none when the
// manifest exceeds ManifestInlineBytes.
func (m Manifest) Inline() []events.CheckpointFile {
	if len(m.Encode()) > ManifestInlineBytes {
		return nil
	}
	return m.Files
}

// ParseManifest reads a manifest and checks it against want (its digest).
func ParseManifest(data []byte, want string) (Manifest, error) {
	if got := crcDigest(data); got != want {
		return Manifest{}, fmt.Errorf("%w: the manifest is %s, the event says %s", ErrDigestMismatch, got, want)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("read manifest: %w", err)
	}
	for _, f := range m.Files {
		if _, err := safeRel(f.Path); err != nil || f.Path == ManifestFile {
			return Manifest{}, fmt.Errorf("%w: %q", ErrUnsafeEntry, f.Path)
		}
	}
	return m, nil
}

// ErrIncomplete is wrapped when a direct checkpoint's folder has no
// manifest: it was never completed, or was removed.
var ErrIncomplete = errors.New("the checkpoint's folder is incomplete or missing")

// Direct is an experiment's storage, written and read by runners that
// reach it. rel names a checkpoint's folder relative to the experiment's
// (<trial dir>/checkpoint_NNNNNN).
type Direct interface {
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

// FileSystem is a Direct on a file system: Root is the experiment's
// folder.
type FileSystem struct {
	Root string
	// ChecksumWhileCopying computes each file's CRC-32C from the bytes as
	// they are copied through user space, instead of copying with the
	// kernel (reflink, copy_file_range) and reading the copy back.
	ChecksumWhileCopying bool
}

// Where implements Direct.
func (d *FileSystem) Where(rel string) string { return filepath.Join(d.Root, filepath.FromSlash(rel)) }

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// temporaryName names a temporary folder of a checkpoint's write (kind
// "tmp") or one moved aside ("old"): .checkpoint_NNNNNN.<kind>-<tag>-<random>.
func temporaryName(name, kind string, tag int) string {
	return "." + name + "." + kind + "-" + strconv.Itoa(tag) + "-" + randomSuffix()
}

// artifactTmp marks the temporary copy of an artifact file. The trial
// folder has other writers (the syncer's storage.Dir.WriteAtomic writes
// .<name>.tmp-<digits>), and CleanTemporary must remove only its own.
const artifactTmp = ".artifact-"

// temporaryFileName names the temporary copy of an artifact file beside
// it: .<name>.artifact-<8 hex>.
func temporaryFileName(name string) string { return "." + name + artifactTmp + randomSuffix() }

// isTemporaryFile reports whether a file in a trial folder is the
// temporary copy of an artifact (temporaryFileName).
func isTemporaryFile(name string) bool {
	i := strings.LastIndex(name, artifactTmp)
	if !strings.HasPrefix(name, ".") || i < 2 {
		return false
	}
	suffix := name[i+len(artifactTmp):]
	_, err := hex.DecodeString(suffix)
	return len(suffix) == 8 && err == nil
}

// isTemporary reports whether a trial folder's entry is a temporary
// folder of a direct write.
func isTemporary(entry string) bool {
	return strings.HasPrefix(entry, ".checkpoint_") && (strings.Contains(entry, ".tmp-") || strings.Contains(entry, ".old-"))
}

// Write implements Direct.
func (d *FileSystem) Write(ctx context.Context, src, rel string, tag int) (Manifest, error) {
	files, err := listSource(src)
	if err != nil {
		return Manifest{}, err
	}
	target := d.Where(rel)
	parent, name := filepath.Dir(target), filepath.Base(target)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return Manifest{}, fmt.Errorf("write checkpoint %s: %w", target, err)
	}
	tmp := filepath.Join(parent, temporaryName(name, "tmp", tag))
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(tmp) // best effort; CleanTemporary removes what is left
		}
	}()
	m := Manifest{Files: make([]events.CheckpointFile, len(files))}
	if err := copyFiles(ctx, files, func(i int, f sourceFile) error {
		crc, n, err := d.copyFile(f.abs, filepath.Join(tmp, filepath.FromSlash(f.rel)))
		m.Files[i] = events.CheckpointFile{Path: f.rel, Size: n, CRC32C: fmt.Sprintf("%08x", crc)}
		return err
	}); err != nil {
		return Manifest{}, fmt.Errorf("write checkpoint %s: %w", target, err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil { // an empty checkpoint
		return Manifest{}, fmt.Errorf("write checkpoint %s: %w", target, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, ManifestFile), m.Encode(), 0o644); err != nil {
		return Manifest{}, fmt.Errorf("write checkpoint %s: %w", target, err)
	}
	if err := moveAside(target, tag); err != nil {
		return Manifest{}, err
	}
	if err := os.Rename(tmp, target); err != nil {
		return Manifest{}, fmt.Errorf("write checkpoint %s: %w", target, err)
	}
	done = true
	return m, nil
}

// WriteFiles implements Direct: each file is copied under a temporary
// name beside its place, then renamed over it, so a reader sees the old
// file or the new one, whole.
func (d *FileSystem) WriteFiles(ctx context.Context, src string, files []string, rel string) error {
	root := d.Where(rel)
	err := copyFiles(ctx, artifactSources(src, files), func(_ int, f sourceFile) error {
		dst := filepath.Join(root, filepath.FromSlash(f.rel))
		tmp := filepath.Join(filepath.Dir(dst), temporaryFileName(filepath.Base(dst)))
		if err := copyPlain(f.abs, tmp); err != nil {
			_ = os.Remove(tmp)
			return err
		}
		if err := os.Rename(tmp, dst); err != nil {
			_ = os.Remove(tmp)
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write artifacts into %s: %w", root, err)
	}
	return nil
}

// copyPlain copies src to the new file dst with the kernel's copy path.
func copyPlain(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := kernelCopy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// moveAside removes a folder at target, renaming it first so that no
// reader sees it half removed.
func moveAside(target string, tag int) error {
	if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	old := filepath.Join(filepath.Dir(target), temporaryName(filepath.Base(target), "old", tag))
	if err := os.Rename(target, old); err != nil {
		return fmt.Errorf("move the earlier %s aside: %w", target, err)
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("remove the earlier %s: %w", target, err)
	}
	return nil
}

// copyConcurrency bounds the files copied at once.
const copyConcurrency = 4

// copyFiles runs fn for every file, a few at a time.
func copyFiles(ctx context.Context, files []sourceFile, fn func(int, sourceFile) error) error {
	if len(files) <= 1 {
		for i, f := range files {
			if err := fn(i, f); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, copyConcurrency)
	for i, f := range files {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(i, f); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// copyFile copies src to a new file dst (creating its folder) and returns the copy's CRC-32C and size. Without
// ChecksumWhileCopying the kernel copies (a reflink where the file system
// shares blocks, else copy_file_range through io.Copy) and the copy is
// read back for its checksum, from the page cache.
func (d *FileSystem) copyFile(src, dst string) (uint32, int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, 0, err
	}
	out, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, 0, err
	}
	defer out.Close()
	var crc uint32
	var n int64
	if d.ChecksumWhileCopying {
		h := crc32.New(castagnoli)
		n, err = io.CopyBuffer(io.MultiWriter(out, h), in, make([]byte, 1<<20))
		crc = h.Sum32()
	} else {
		n, err = kernelCopy(out, in)
		if err == nil {
			crc, err = checksumFile(out)
		}
	}
	if err != nil {
		return 0, 0, err
	}
	return crc, n, out.Close()
}

// kernelCopy copies in to out with a reflink when the file system can
// share the blocks (FICLONE), else io.Copy, which uses copy_file_range
// between files on Linux.
func kernelCopy(out, in *os.File) (int64, error) {
	if err := unix.IoctlFileClone(int(out.Fd()), int(in.Fd())); err == nil {
		info, err := out.Stat()
		if err != nil {
			return 0, err
		}
		return info.Size(), nil
	}
	return io.Copy(out, in)
}

// checksumFile is the CRC-32C of f's content, read from its start.
func checksumFile(f *os.File) (uint32, error) {
	h := crc32.New(castagnoli)
	buf := make([]byte, 1<<20)
	var off int64
	for {
		n, err := f.ReadAt(buf, off)
		h.Write(buf[:n])
		off += int64(n)
		if errors.Is(err, io.EOF) {
			return h.Sum32(), nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// Read implements Direct.
func (d *FileSystem) Read(ctx context.Context, rel, digest, dst string) (err error) {
	from := d.Where(rel)
	data, err := os.ReadFile(filepath.Join(from, ManifestFile))
	m, err := startRead(from, data, err, errors.Is(err, fs.ErrNotExist), digest, dst)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dst)
		}
	}()
	// The local copy need not survive a crash of this host: the next
	// attempt fetches again.
	err = copyFiles(ctx, manifestSources(m, from), func(i int, f sourceFile) error {
		crc, n, err := d.copyFile(f.abs, filepath.Join(dst, filepath.FromSlash(f.rel)))
		if err != nil {
			return err
		}
		return checkFile(m.Files[i], crc, n)
	})
	if err != nil {
		return fmt.Errorf("read checkpoint %s: %w", from, err)
	}
	return nil
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
		return fmt.Errorf("%w: %s is %d bytes with crc32c %s, the manifest says %d bytes with %s", ErrDigestMismatch, f.Path, n, got, f.Size, f.CRC32C)
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

// CleanTemporary implements Direct.
func (d *FileSystem) CleanTemporary(_ context.Context, dir string) error {
	p := d.Where(dir)
	entries, err := os.ReadDir(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("clean %s: %w", p, err)
	}
	for _, e := range entries {
		if isTemporary(e.Name()) {
			if err := os.RemoveAll(filepath.Join(p, e.Name())); err != nil {
				return fmt.Errorf("clean %s: %w", p, err)
			}
		}
	}
	// Artifact copies killed before their rename, at any depth outside
	// the checkpoints.
	err = filepath.WalkDir(p, func(path string, e fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case e.IsDir() && path != p && strings.HasPrefix(e.Name(), "checkpoint_"):
			return filepath.SkipDir
		case !e.IsDir() && isTemporaryFile(e.Name()):
			return os.Remove(path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("clean %s: %w", p, err)
	}
	return nil
}

// BlobStore is a Direct on a bucket: B is the experiment's part of it
// (storage.ExperimentBucket), URL its storage path for messages.
type BlobStore struct {
	B   *blob.Bucket
	URL string
}

// Where implements Direct.
func (d *BlobStore) Where(rel string) string { return strings.TrimSuffix(d.URL, "/") + "/" + rel }

// uploadConcurrency bounds the files uploaded at once.
const uploadConcurrency = 8

// Write implements Direct.
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
	sem := make(chan struct{}, uploadConcurrency)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for i, f := range files {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			crc, n, err := d.upload(ctx, f.abs, prefix+f.rel)
			m.Files[i] = events.CheckpointFile{Path: f.rel, Size: n, CRC32C: fmt.Sprintf("%08x", crc)}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return Manifest{}, fmt.Errorf("write checkpoint %s: %w", d.Where(rel), first)
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

// WriteFiles implements Direct: a bucket publishes each object whole when
// its upload ends.
func (d *BlobStore) WriteFiles(ctx context.Context, src string, files []string, rel string) error {
	err := copyFiles(ctx, artifactSources(src, files), func(_ int, f sourceFile) error {
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

// Read implements Direct.
func (d *BlobStore) Read(ctx context.Context, rel, digest, dst string) (err error) {
	return ReadBucket(ctx, d.B, rel, digest, dst)
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

// ReadBucket copies the direct checkpoint rel of the experiment bucket b
// into dst (see Direct.Read).
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
	err = copyFiles(ctx, manifestSources(m, ""), func(i int, f sourceFile) error {
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
	n, err := io.CopyBuffer(io.MultiWriter(out, h), r, make([]byte, 1<<20))
	if err != nil {
		return 0, 0, err
	}
	return h.Sum32(), n, out.Close()
}

// CleanTemporary implements Direct: a bucket has no temporary folders (a
// folder without its manifest is rewritten whole by the next write).
func (d *BlobStore) CleanTemporary(context.Context, string) error { return nil }

// IsDirect reports whether ref is a checkpoint a runner wrote straight to
// storage.
func IsDirect(ref *events.CheckpointRef) bool { return ref != nil && ref.Location != "" }

// StorageCopyObject is the Object Store object the syncer stages a
// checkpoint in storage as, for a runner that cannot read storage:
// <location>/storage-<crc>, named by its digest so that a checkpoint
// written again with other bytes gets its own.
func StorageCopyObject(ref *events.CheckpointRef) string {
	return ref.Location + "/storage-" + strings.TrimPrefix(ref.Digest, "crc32c:")
}
