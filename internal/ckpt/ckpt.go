// Package ckpt moves checkpoint directories through the experiment's
// JetStream Object Store.
//
// # Format
//
// A checkpoint is one object: a tar archive of the directory (regular
// files, folders — empty ones too — and relative symlinks that stay inside
// it), streamed without a temporary copy. The archive's SHA-256 is the
// checkpoint's digest; Fetch recomputes it and refuses a copy that does not
// match, so a damaged checkpoint is an error, never a silent resume.
// Extraction refuses entries that would leave the target directory.
package ckpt

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrDigestMismatch is wrapped when a fetched checkpoint is not the one
// that was staged.
var ErrDigestMismatch = errors.New("checkpoint digest mismatch")

// ErrUnsafeEntry is wrapped when an archive entry would leave its directory.
var ErrUnsafeEntry = errors.New("checkpoint entry escapes its directory")

// Bucket is the Object Store bucket of an experiment's staged checkpoints.
func Bucket(exp string) string { return "ckpt_" + exp }

// ObjectName is the object of one checkpoint of a trial.
func ObjectName(trialID, checkpoint string) string { return trialID + "/" + checkpoint }

// Name is checkpoint_NNNNNN for index.
func Name(index int) string { return fmt.Sprintf("checkpoint_%06d", index) }

// Store opens (creating if needed) the experiment's checkpoint bucket.
func Store(ctx context.Context, js jetstream.JetStream, exp string) (jetstream.ObjectStore, error) {
	return StoreReplicated(ctx, js, exp, 1)
}

// StoreReplicated is Store creating the bucket with the given replicas.
// It creates the bucket only when it does not exist, never updates it: a
// lookup that failed (no answer while a NATS node is lost) must not turn
// an R3 bucket into the caller's R1.
func StoreReplicated(ctx context.Context, js jetstream.JetStream, exp string, replicas int) (jetstream.ObjectStore, error) {
	// The handle outlives ctx, which may be a long transfer's: the lookup
	// gets a request's time.
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	obs, err := js.ObjectStore(ctx, Bucket(exp))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      Bucket(exp),
			Description: "staged checkpoints of experiment " + exp,
			Storage:     jetstream.FileStorage,
			Replicas:    max(replicas, 1),
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			obs, err = js.ObjectStore(ctx, Bucket(exp)) // created meanwhile
		}
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint store of %s: %w", exp, err)
	}
	return obs, nil
}

// lookupTimeout bounds opening the bucket.
const lookupTimeout = 5 * time.Second

// TransferTimeout bounds one checkpoint transfer when the caller's context
// has no deadline. nats.go would otherwise bound the whole transfer by its
// 5 s request timeout, which a large checkpoint cannot meet.
const TransferTimeout = time.Hour

// transferContext applies TransferTimeout to a context without deadline.
func transferContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, TransferTimeout)
}

// OpenTimeout bounds opening a staged object for reading: nats.go looks
// up its info and creates the consumer that streams it under the
// transfer's context, and a request lost with a dying stream leader would
// wait for the whole transfer's deadline.
const OpenTimeout = 10 * time.Second

// ErrOpenTimeout is Open's error when the object store did not answer
// within OpenTimeout; trying again is safe.
var ErrOpenTimeout = errors.New("the object store did not answer")

// Open opens a staged object for reading within OpenTimeout; reading it
// then follows ctx. Close the result.
func Open(ctx context.Context, obs jetstream.ObjectStore, name string) (jetstream.ObjectResult, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(OpenTimeout, func() { cancel(ErrOpenTimeout) })
	r, err := obs.Get(ctx, name)
	if !timer.Stop() {
		if err == nil {
			r.Close()
		}
		cancel(nil)
		return nil, fmt.Errorf("open %s: %w within %v", name, ErrOpenTimeout, OpenTimeout)
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	return openResult{ObjectResult: r, cancel: cancel}, nil
}

// openResult ends the read's context with the read.
type openResult struct {
	jetstream.ObjectResult
	cancel context.CancelCauseFunc
}

func (r openResult) Close() error {
	err := r.ObjectResult.Close()
	r.cancel(nil)
	return err
}

// Staged describes a staged checkpoint.
type Staged struct {
	Size   int64  // bytes of the files
	Digest string // "sha256:<hex>" of the archive
}

// Stage archives dir into obs under name. It returns once the whole
// archive is stored, so the caller may delete dir right after.
func Stage(ctx context.Context, obs jetstream.ObjectStore, name, dir string) (Staged, error) {
	return StageFiles(ctx, obs, name, dir, nil)
}

// StageFiles is Stage restricted to the given slash-relative paths of
// regular files under dir (all of dir when files is nil).
//
// Unlike Fetch, a put gets no TransferTimeout: nats.go bounds a put
// without deadline per chunk (each acknowledgement, and the purge of a
// failed put, within its 5 s request timeout), not as a whole. With a
// deadline it waits for acknowledgements until the deadline: a put whose
// stream leader died with chunks in flight hung for the hour, and the
// trial with it.
func StageFiles(ctx context.Context, obs jetstream.ObjectStore, name, dir string, files []string) (Staged, error) {
	// nats.go's Put gives up when its window of in-flight chunks stalls
	// for 200 ms, or a chunk goes unacknowledged for 5 s (neither is
	// configurable); a large checkpoint on a busy server can meet that,
	// so the whole put is tried again.
	var staged Staged
	var err error
	for try := 1; try <= stallRetries; try++ {
		staged, err = stageOnce(ctx, obs, name, dir, files)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) && !errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
			return staged, err
		}
	}
	return staged, err
}

// stallRetries is how many times a stalled put is tried.
const stallRetries = 3

func stageOnce(ctx context.Context, obs jetstream.ObjectStore, name, dir string, files []string) (Staged, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return Staged{}, fmt.Errorf("stage checkpoint %s: %w", name, err)
	}
	if !info.IsDir() {
		return Staged{}, fmt.Errorf("stage checkpoint %s: %s is not a directory", name, dir)
	}
	pr, pw := io.Pipe()
	h := sha256.New()
	var size int64
	written := make(chan struct{})
	go func() {
		defer close(written)
		pw.CloseWithError(writeArchive(io.MultiWriter(pw, h), dir, files, &size))
	}()
	_, err = obs.Put(ctx, jetstream.ObjectMeta{Name: name}, pr)
	pr.CloseWithError(err) // unblocks the writer if Put gave up early
	<-written
	if err != nil {
		return Staged{}, fmt.Errorf("stage checkpoint %s: %w", name, err)
	}
	return Staged{Size: size, Digest: digest(h)}, nil
}

func digest(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

// writeArchive writes dir (or only files, when not nil) as a tar stream,
// in lexical order.
func writeArchive(w io.Writer, dir string, files []string, size *int64) error {
	tw := tar.NewWriter(w)
	if files != nil {
		for _, rel := range files {
			p := filepath.Join(dir, filepath.FromSlash(rel))
			info, err := os.Lstat(p)
			if err != nil {
				return err
			}
			if err := addEntry(tw, p, rel, fs.FileInfoToDirEntry(info), size); err != nil {
				return err
			}
		}
		return tw.Close()
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		return addEntry(tw, p, filepath.ToSlash(rel), d, size)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func addEntry(tw *tar.Writer, path, rel string, d fs.DirEntry, size *int64) error {
	info, err := d.Info()
	if err != nil {
		return err
	}
	link := ""
	if info.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(path); err != nil {
			return err
		}
	}
	hdr, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	hdr.Name = rel
	if info.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uname, hdr.Gname = "", ""
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(tw, f)
	*size += n
	return err
}

// Fetch downloads object name from obs into dir, which must not exist
// yet, and checks the archive against want ("sha256:<hex>"). On any error
// dir is removed.
func Fetch(ctx context.Context, obs jetstream.ObjectStore, name, want, dir string) (err error) {
	ctx, cancel := transferContext(ctx)
	defer cancel()
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("fetch checkpoint %s: %s already exists", name, dir)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	r, err := Open(ctx, obs, name)
	if err != nil {
		return fmt.Errorf("fetch checkpoint %s: %w", name, err)
	}
	defer r.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fetch checkpoint %s: %w", name, err)
	}
	err = Walk(r, want, func(hdr *tar.Header, rel string, body io.Reader) error {
		return extractEntry(body, hdr, dir, filepath.Join(dir, filepath.FromSlash(rel)))
	})
	if err != nil {
		return fmt.Errorf("fetch checkpoint %s: %w", name, err)
	}
	return nil
}

// Walk reads an archive, calling fn for each entry with its checked,
// slash-relative path, and verifies the whole archive against want. An
// entry that would leave its directory stops the walk with ErrUnsafeEntry.
// fn's effects stand even when the digest turns out wrong: callers write to
// a place they discard on error.
func Walk(r io.Reader, want string, fn func(hdr *tar.Header, rel string, body io.Reader) error) error {
	h := sha256.New()
	tr := tar.NewReader(io.TeeReader(r, h))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		rel, err := safeRel(hdr.Name)
		if err != nil {
			return err
		}
		if rel == "." {
			continue
		}
		if err := fn(hdr, rel, tr); err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
	}
	if _, err := io.Copy(h, r); err != nil { // the archive's trailing padding
		return err
	}
	if got := digest(h); got != want {
		return fmt.Errorf("%w: the event says %s, the copy is %s", ErrDigestMismatch, want, got)
	}
	return nil
}

func extractEntry(body io.Reader, hdr *tar.Header, dir, target string) error {
	mode := fs.FileMode(hdr.Mode).Perm()
	switch hdr.Typeflag {
	case tar.TypeDir:
		return os.MkdirAll(target, mode|0o700)
	case tar.TypeReg:
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode|0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, body); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	case tar.TypeSymlink:
		if filepath.IsAbs(hdr.Linkname) {
			return fmt.Errorf("%w: symlink to absolute path %q", ErrUnsafeEntry, hdr.Linkname)
		}
		if _, err := safeRel(path.Join(path.Dir(hdr.Name), hdr.Linkname)); err != nil {
			return err
		}
		return os.Symlink(hdr.Linkname, target)
	}
	return fmt.Errorf("unsupported entry type %q", hdr.Typeflag)
}

// safeRel cleans an archive path and refuses one that leaves its directory.
func safeRel(name string) (string, error) {
	clean := path.Clean(strings.TrimSuffix(filepath.ToSlash(name), "/"))
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: %q", ErrUnsafeEntry, name)
	}
	return clean, nil
}
