// Package ckpt moves checkpoint directories through the experiment's
// JetStream Object Store. A runner that reaches the experiment's storage
// writes its checkpoints there instead, with internal/ckpt/direct.
//
// # Format
//
// A checkpoint is one object: a tar archive of the directory (regular
// files, folders — empty ones too — and relative symlinks that stay inside
// it), streamed without a temporary copy. The archive's SHA-256 is the
// checkpoint's digest: the object's own Object Store digest, computed once
// as the archive is put. Fetch refuses an object whose digest is not the
// event's, and nats.go's Get refuses bytes that do not match the object's
// digest, so a damaged checkpoint is an error, never a silent resume.
// Extraction refuses entries that would leave the target directory.
package ckpt

import (
	"archive/tar"
	"bytes"
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

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/clock"
)

// ErrDigestMismatch is wrapped when a fetched checkpoint is not the one
// that was staged.
var ErrDigestMismatch = errors.New("checkpoint digest mismatch")

// ErrUnsafeEntry is wrapped when an archive entry would leave its directory.
var ErrUnsafeEntry = errors.New("checkpoint entry escapes its directory")

// Bucket is the Object Store bucket of an experiment's staged checkpoints.
func Bucket(exp string) string { return "ckpt_" + exp }

// LegacyObjectName is the legacy object of one checkpoint of a trial, one
// per checkpoint name (events.LegacyCheckpointObject): read and restaged
// only for a checkpoint reference that names no object. New checkpoints
// are staged under AttemptObjectName.
func LegacyObjectName(trialID, checkpoint string) string {
	return events.LegacyCheckpointObject(trialID, checkpoint)
}

// Name is checkpoint_NNNNNN for index (events.CheckpointName).
func Name(index int) string { return events.CheckpointName(index) }

// The Object Store's types, named here so that the services that use a
// checkpoint bucket import no NATS package.
type (
	// Objects is an experiment's checkpoint bucket.
	Objects = jetstream.ObjectStore
	// ObjectInfo describes one object of it.
	ObjectInfo = jetstream.ObjectInfo
)

// ErrObjectNotFound is wrapped when an object is not in the bucket.
var ErrObjectNotFound = jetstream.ErrObjectNotFound

// Opener opens experiments' checkpoint buckets: the bus does
// (bus.Bus.Checkpoints), with its connection and replicas.
type Opener interface {
	Checkpoints(ctx context.Context, exp string) (jetstream.ObjectStore, error)
}

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
	return &store{ObjectStore: obs, js: js, bucket: Bucket(exp)}, nil
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

// replicaLag is how long Open keeps looking for an object of which the
// store shows no trace. Object Store reads are direct gets that any replica
// may answer, and a replica that was just restarted, or is busy, may not
// have applied a put the stream's leader acknowledged.
const replicaLag = 2 * time.Second

// Open opens a staged object for reading within OpenTimeout; reading it
// then follows ctx. Close the result. An object not found is looked for
// again for up to replicaLag, unless it was removed (its delete marker is
// there).
func Open(ctx context.Context, obs jetstream.ObjectStore, name string) (jetstream.ObjectResult, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(OpenTimeout, func() { cancel(ErrOpenTimeout) })
	r, err := lookAgain(ctx, obs, name, func() (jetstream.ObjectResult, error) { return obs.Get(ctx, name) })
	if !timer.Stop() {
		if err == nil {
			_ = r.Close()
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

// ErrRemoved is wrapped, with jetstream.ErrObjectNotFound, by Open and
// Info when the object was removed: its latest version is a delete marker.
var ErrRemoved = errors.New("the staged copy was removed")

// Info is obs.GetInfo looking again, as Open does, for an object not
// found that was not removed.
func Info(ctx context.Context, obs jetstream.ObjectStore, name string) (*jetstream.ObjectInfo, error) {
	return lookAgain(ctx, obs, name, func() (*jetstream.ObjectInfo, error) { return obs.GetInfo(ctx, name) })
}

// lookAgain calls get until it finds name, name turns out removed (the
// error then wraps ErrRemoved), or replicaLag has passed.
func lookAgain[T any](ctx context.Context, obs jetstream.ObjectStore, name string, get func() (T, error)) (T, error) {
	v, err := get()
	for wait, giveUp := 50*time.Millisecond, time.Now().Add(replicaLag); errors.Is(err, jetstream.ErrObjectNotFound); wait *= 2 {
		if removed(ctx, obs, name) {
			return v, fmt.Errorf("%s: %w: %w", name, ErrRemoved, err)
		}
		if !time.Now().Before(giveUp) {
			break
		}
		if clock.Sleep(ctx, wait) != nil {
			return v, err
		}
		v, err = get()
	}
	return v, err
}

// removed reports whether name's latest version is a delete marker.
func removed(ctx context.Context, obs jetstream.ObjectStore, name string) bool {
	info, err := obs.GetInfo(ctx, name, jetstream.GetObjectInfoShowDeleted())
	return err == nil && info.Deleted
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
// The archive is read straight from the files into the Object Store's
// chunks (no pipe) and hashed once as it is put: the digest returned is
// the object's own SHA-256, which nats.go checks again on every Get. A
// handle from Store is written by put, in ChunkSize chunks with a bounded
// window; any other by nats.go's Put, in safeChunkSize chunks.
//
// Unlike Fetch, a put gets no TransferTimeout: it is bounded per chunk
// (each acknowledgement within ackTimeout, nats.go's Put within its 5 s
// request timeout), not as a whole. Under an overall deadline nats.go
// waits for acknowledgements until the deadline: a put whose stream leader
// died with chunks in flight hung for the hour, and the trial with it.
func StageFiles(ctx context.Context, obs jetstream.ObjectStore, name, dir string, files []string) (Staged, error) {
	return stageFiles(ctx, obs, jetstream.ObjectMeta{Name: name}, dir, files)
}

// stageFiles is StageFiles with the object's metadata.
func stageFiles(ctx context.Context, obs jetstream.ObjectStore, meta jetstream.ObjectMeta, dir string, files []string) (Staged, error) {
	name := meta.Name
	info, err := os.Stat(dir)
	if err != nil {
		return Staged{}, fmt.Errorf("stage checkpoint %s: %w", name, err)
	}
	if !info.IsDir() {
		return Staged{}, fmt.Errorf("stage checkpoint %s: %s is not a directory", name, dir)
	}
	entries, err := listEntries(dir, files)
	if err != nil {
		return Staged{}, fmt.Errorf("stage checkpoint %s: %w", name, err)
	}
	// A put gives up when its window of chunks in flight stays full
	// (stallWait; nats.go's Put: 200 ms), or a chunk goes unacknowledged
	// (ackTimeout; nats.go's: 5 s); a large checkpoint on a busy server, or
	// a lost stream leader, can meet that, so the whole put is tried again.
	var staged Staged
	for try := 1; try <= stallRetries; try++ {
		staged, err = stageOnce(ctx, obs, meta, entries)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) && !errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
			break
		}
	}
	if err != nil {
		return Staged{}, fmt.Errorf("stage checkpoint %s: %w", name, err)
	}
	return staged, nil
}

// stallRetries is how many times a stalled put is tried.
const stallRetries = 3

func stageOnce(ctx context.Context, obs jetstream.ObjectStore, meta jetstream.ObjectMeta, entries []entry) (Staged, error) {
	ar := &archiveReader{entries: entries}
	defer ar.close()
	var info *jetstream.ObjectInfo
	var err error
	if s, ok := obs.(*store); ok {
		info, err = s.put(ctx, meta, ar)
	} else {
		meta.Opts = &jetstream.ObjectMetaOptions{ChunkSize: safeChunkSize}
		info, err = obs.Put(ctx, meta, ar)
	}
	if err != nil {
		return Staged{}, err
	}
	d, err := objectDigest(info)
	if err != nil {
		return Staged{}, err
	}
	return Staged{Size: ar.size, Digest: d}, nil
}

// objectDigest is an object's SHA-256 as "sha256:<hex>", the checkpoint
// events' form of nats.go's "SHA-256=<base64url>".
func objectDigest(info *jetstream.ObjectInfo) (string, error) {
	sum, err := jetstream.DecodeObjectDigest(info.Digest)
	if err != nil || len(sum) != sha256.Size {
		return "", fmt.Errorf("object %s has no valid digest (%q): %w", info.Name, info.Digest, errors.Join(err, jetstream.ErrInvalidDigestFormat))
	}
	return "sha256:" + hex.EncodeToString(sum), nil
}

// entry is one member of an archive: a file, folder or symlink of dir.
type entry struct {
	path string // on disk
	rel  string // slash-relative name in the archive
	info fs.FileInfo
}

// listEntries lists dir (or only files, when not nil) in archive order:
// lexical, as filepath.WalkDir visits it.
func listEntries(dir string, files []string) ([]entry, error) {
	var out []entry
	if files != nil {
		for _, rel := range files {
			p := filepath.Join(dir, filepath.FromSlash(rel))
			info, err := os.Lstat(p)
			if err != nil {
				return nil, err
			}
			out = append(out, entry{path: p, rel: rel, info: info})
		}
		return out, nil
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, entry{path: p, rel: filepath.ToSlash(rel), info: info})
		return nil
	})
	return out, err
}

// header is the tar header block(s) of an entry.
func header(e entry) ([]byte, error) {
	link := ""
	if e.info.Mode()&fs.ModeSymlink != 0 {
		var err error
		if link, err = os.Readlink(e.path); err != nil {
			return nil, err
		}
	}
	hdr, err := tar.FileInfoHeader(e.info, link)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.rel, err)
	}
	hdr.Name = e.rel
	if e.info.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uname, hdr.Gname = "", ""
	var buf bytes.Buffer
	// The writer is dropped after the header: the body is read by
	// archiveReader, not written through it.
	if err := tar.NewWriter(&buf).WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("%s: %w", e.rel, err)
	}
	return buf.Bytes(), nil
}

// archiveReader reads entries as a tar stream: each entry's header, then
// a regular file's bytes read straight from the file into the caller's
// buffer, then the padding to 512 bytes; at the end the two zero blocks.
// Each Read fills its buffer unless the stream ends, so nats.go's Put
// sends whole chunks. A file that changes size while it is read is an
// error, as with archive/tar's writer.
type archiveReader struct {
	entries []entry
	next    int      // the entry to start after the current one
	pending []byte   // header or padding bytes still to return
	file    *os.File // the regular file being read
	left    int64    // bytes of file still to read
	pad     int      // zero bytes after file
	size    int64    // bytes of regular files read
	ended   bool     // the trailer has been queued
}

var zeros [1024]byte

func (a *archiveReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		switch {
		case len(a.pending) > 0:
			c := copy(p[n:], a.pending)
			a.pending = a.pending[c:]
			n += c
		case a.file != nil && a.left > 0:
			want := p[n:]
			if int64(len(want)) > a.left {
				want = want[:a.left]
			}
			c, err := a.file.Read(want)
			n += c
			a.left -= int64(c)
			a.size += int64(c)
			if errors.Is(err, io.EOF) && a.left > 0 {
				return n, fmt.Errorf("%s: %w (the file shrank while it was staged)", a.entries[a.next-1].rel, io.ErrUnexpectedEOF)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return n, fmt.Errorf("%s: %w", a.entries[a.next-1].rel, err)
			}
		case a.file != nil:
			var one [1]byte
			if c, _ := a.file.Read(one[:]); c > 0 {
				return n, fmt.Errorf("%s: %w (the file grew while it was staged)", a.entries[a.next-1].rel, tar.ErrWriteTooLong)
			}
			_ = a.file.Close() // read to its end
			a.file = nil
			a.pending = zeros[:a.pad]
		case a.next < len(a.entries):
			e := a.entries[a.next]
			a.next++
			hdr, err := header(e)
			if err != nil {
				return n, err
			}
			a.pending = hdr
			if e.info.Mode().IsRegular() {
				f, err := os.Open(e.path)
				if err != nil {
					return n, err
				}
				a.file, a.left = f, e.info.Size()
				a.pad = int(-e.info.Size() & 511)
			}
		case !a.ended:
			a.ended = true
			a.pending = zeros[:]
		default:
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
	}
	return n, nil
}

func (a *archiveReader) close() {
	if a.file != nil {
		_ = a.file.Close()
	}
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
			_ = os.RemoveAll(dir) // best effort: err says what went wrong
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
//
// When r is an Object Store object (what ObjectStore.Get returns), its
// bytes are hashed once, by nats.go, which fails the read at the end of a
// copy that does not match the object's digest; Walk checks that digest
// against want before reading (a copy Restage put back from storage
// stands for the digest it was persisted from), and refuses a checkpoint
// MarkGone marked with ErrGone. Any other reader is hashed here.
func Walk(r io.Reader, want string, fn func(hdr *tar.Header, rel string, body io.Reader) error) error {
	var h hash.Hash
	if obj, ok := r.(jetstream.ObjectResult); ok {
		info, err := obj.Info()
		if err != nil {
			return err
		}
		if reason, ok := info.Metadata[goneKey]; ok {
			return fmt.Errorf("%s: %w: %s", info.Name, ErrGone, reason)
		}
		got, err := objectDigest(info)
		if err != nil {
			return err
		}
		if got != want && info.Metadata[restagedFromKey] != want {
			return fmt.Errorf("%w: the event says %s, the stored object is %s", ErrDigestMismatch, want, got)
		}
	} else {
		h = sha256.New()
		r = io.TeeReader(r, h)
	}
	err := walk(r, fn)
	if err == nil {
		_, err = io.Copy(io.Discard, r) // the trailing padding; nats.go checks the digest at its end
	}
	if errors.Is(err, jetstream.ErrDigestMismatch) {
		return fmt.Errorf("%w: the copy read does not match the stored object's %s", ErrDigestMismatch, want)
	}
	if err != nil {
		return err
	}
	if h != nil {
		if got := digest(h); got != want {
			return fmt.Errorf("%w: the event says %s, the copy is %s", ErrDigestMismatch, want, got)
		}
	}
	return nil
}

func walk(r io.Reader, fn func(hdr *tar.Header, rel string, body io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := RelPath(hdr.Name)
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
}

func digest(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

// copyBody copies a file's body of size bytes with a buffer of up to one
// Object Store chunk, so that one write takes a whole chunk.
func copyBody(dst io.Writer, body io.Reader, size int64) error {
	buf := make([]byte, min(max(size, 32<<10), 1<<20))
	_, err := io.CopyBuffer(struct{ io.Writer }{dst}, body, buf)
	return err
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
		if err := copyBody(f, body, hdr.Size); err != nil {
			_ = f.Close()
			return err
		}
		return f.Close()
	case tar.TypeSymlink:
		if filepath.IsAbs(hdr.Linkname) {
			return fmt.Errorf("%w: symlink to absolute path %q", ErrUnsafeEntry, hdr.Linkname)
		}
		if _, err := RelPath(path.Join(path.Dir(hdr.Name), hdr.Linkname)); err != nil {
			return err
		}
		return os.Symlink(hdr.Linkname, target)
	}
	return fmt.Errorf("unsupported entry type %q", hdr.Typeflag)
}

// RelPath cleans a checkpoint's path (an archive entry's, or a direct
// checkpoint's manifest entry) and refuses, with ErrUnsafeEntry, one that
// leaves its directory.
func RelPath(name string) (string, error) {
	clean := path.Clean(strings.TrimSuffix(filepath.ToSlash(name), "/"))
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: %q", ErrUnsafeEntry, name)
	}
	return clean, nil
}
