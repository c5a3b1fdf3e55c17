package direct

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/tunejet/tunejet/events"
)

// FileSystem is a Storage on a file system: Root is the experiment's
// folder.
type FileSystem struct {
	Root string
	// ChecksumWhileCopying computes each file's CRC-32C from the bytes as
	// they are copied through user space, instead of copying with the
	// kernel (reflink, copy_file_range) and reading the copy back.
	ChecksumWhileCopying bool
}

// Where implements Storage.
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

// Write implements Storage.
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
	if err := copyFiles(ctx, copyConcurrency, files, func(i int, f sourceFile) error {
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

// WriteFiles implements Storage: each file is copied under a temporary
// name beside its place, then renamed over it, so a reader sees the old
// file or the new one, whole.
func (d *FileSystem) WriteFiles(ctx context.Context, src string, files []string, rel string) error {
	root := d.Where(rel)
	err := copyFiles(ctx, copyConcurrency, artifactSources(src, files), func(_ int, f sourceFile) error {
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
		n, err = copyBuffer(io.MultiWriter(out, h), in)
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

// copyBufs are the 1 MiB buffers files are read with: a checkpoint of
// small files (a PBT trial's, one per iteration) would otherwise allocate
// and clear 1 MiB per file.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// copyBuffer is io.CopyBuffer with a buffer of copyBufs.
func copyBuffer(dst io.Writer, src io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	return io.CopyBuffer(dst, src, *bp)
}

// checksumFile is the CRC-32C of f's content, read from its start.
func checksumFile(f *os.File) (uint32, error) {
	h := crc32.New(castagnoli)
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
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

// Read implements Storage.
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
	err = copyFiles(ctx, copyConcurrency, manifestSources(m, from), func(i int, f sourceFile) error {
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

// CleanTemporary implements Storage.
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
