package storage

// Buckets: the storage path opened as a gocloud.dev/blob bucket.
//
// Every write through a *blob.Bucket is atomic: the object becomes visible
// only when its writer's Close succeeds, and a writer whose context ends
// first leaves nothing behind (fileblob renames a finished temporary file
// over the key; memblob swaps the whole object under a lock; S3 and GCS
// publish an object only when its upload completes). So the helpers below
// just check errors; they never stage through temporary keys of their own.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net/url"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob:// URLs
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob" // gs:// URLs
	"gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob" // s3:// URLs
	"gocloud.dev/gcerrors"

	"github.com/tunejet/tunejet/internal/state"
)

// ErrInvalidURL is wrapped when a storage path cannot be opened because of
// how it is written: an unknown scheme, a missing bucket name, a relative
// local path, or a query parameter that does not apply.
var ErrInvalidURL = errors.New("invalid storage path")

// Schemes lists the URL schemes OpenBucket understands; any other storage
// path must be an absolute local path.
var Schemes = []string{"file", "mem", "s3", "gs", "azblob"}

// fileDefaults are the fileblob options every local bucket gets unless the
// file:// URL sets them: create the directory, keep temporary files beside
// their target so the final rename never crosses filesystems, and write no
// .attrs sidecars so the directory holds exactly Ray's layout.
var fileDefaults = url.Values{
	"create_dir": {"true"},
	"no_tmp_dir": {"true"},
	"metadata":   {"skip"},
}

// OpenBucket opens a storage path, as Resolve returns it, as a bucket:
//
//   - an absolute local path or a file:// URL: a fileblob directory (created
//     if missing, no .attrs sidecars, temporary files beside their target);
//   - mem://NAME: an in-process bucket shared by every OpenBucket of the
//     same NAME for the life of the process (see the mem registry below);
//   - s3://BUCKET, gs://BUCKET, azblob://CONTAINER: gocloud's URL openers,
//     with their query parameters (for S3-compatible servers: endpoint,
//     use_path_style, disable_https, region).
//
// A path after the bucket name (s3://bkt/some/prefix) is a key prefix: the
// returned bucket sees only keys under "some/prefix/". The caller closes
// the bucket.
func OpenBucket(ctx context.Context, storagePath string) (*blob.Bucket, error) {
	if !IsURL(storagePath) {
		return openLocal(storagePath)
	}
	u, err := url.Parse(storagePath)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidURL, storagePath, err)
	}
	switch u.Scheme {
	case "file":
		return openFileURL(ctx, storagePath, u)
	case "mem":
		return openMem(storagePath, u)
	case "s3", "gs", "azblob":
		return openCloud(ctx, storagePath, u)
	default:
		return nil, fmt.Errorf("%w %q: unsupported scheme %q; use a local path or one of %s",
			ErrInvalidURL, storagePath, u.Scheme, schemeList())
	}
}

func schemeList() string {
	s := make([]string, len(Schemes))
	for i, sc := range Schemes {
		s[i] = sc + "://"
	}
	return strings.Join(s, ", ")
}

func openLocal(dir string) (*blob.Bucket, error) {
	if dir == "" || !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%w %q: a local storage path must be absolute (resolve it with storage.Resolve first)", ErrInvalidURL, dir)
	}
	b, err := fileblob.OpenBucket(dir, &fileblob.Options{
		CreateDir: true,
		NoTempDir: true,
		Metadata:  fileblob.MetadataDontWrite,
	})
	if err != nil {
		return nil, fmt.Errorf("open storage %q: %w", dir, err)
	}
	return b, nil
}

func openFileURL(ctx context.Context, storagePath string, u *url.URL) (*blob.Bucket, error) {
	if u.Path == "" || u.Path == "/" && u.Host == "" {
		return nil, fmt.Errorf("%w %q: no directory after file://", ErrInvalidURL, storagePath)
	}
	q := u.Query()
	for k, v := range fileDefaults {
		if _, set := q[k]; !set {
			q[k] = v
		}
	}
	withDefaults := *u
	withDefaults.RawQuery = q.Encode()
	b, err := blob.DefaultURLMux().OpenBucketURL(ctx, &withDefaults)
	if err != nil {
		return nil, fmt.Errorf("open storage %q: %w", storagePath, err)
	}
	return b, nil
}

func openCloud(ctx context.Context, storagePath string, u *url.URL) (*blob.Bucket, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("%w %q: no bucket name after %s://", ErrInvalidURL, storagePath, u.Scheme)
	}
	prefix, err := urlPrefix(storagePath, u)
	if err != nil {
		return nil, err
	}
	bucketOnly := *u
	bucketOnly.Path, bucketOnly.RawPath = "", ""
	b, err := blob.DefaultURLMux().OpenBucketURL(ctx, &bucketOnly)
	if err != nil {
		return nil, fmt.Errorf("open storage %q: %w", storagePath, err)
	}
	if prefix != "" {
		b = blob.PrefixedBucket(b, prefix)
	}
	return b, nil
}

// urlPrefix returns the key prefix a URL's path names ("" or "a/b/"),
// refusing the forms that cannot mean one.
func urlPrefix(storagePath string, u *url.URL) (string, error) {
	q := u.Query()
	if _, ok := q["key"]; ok {
		return "", fmt.Errorf("%w %q: query parameter \"key\" would make a single-object bucket; storage needs a directory", ErrInvalidURL, storagePath)
	}
	p := strings.Trim(u.Path, "/")
	if p == "" {
		return "", nil
	}
	if _, ok := q["prefix"]; ok {
		return "", fmt.Errorf("%w %q: give the key prefix either as a path or as ?prefix=, not both", ErrInvalidURL, storagePath)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("%w %q: the path after the bucket has an empty, \".\" or \"..\" segment", ErrInvalidURL, storagePath)
		}
	}
	return p + "/", nil
}

// memBuckets is the mem:// registry: one memblob bucket per name for the
// life of the process, so a writer and a reader in one process share it.
var memBuckets = struct {
	sync.Mutex
	m map[string]*blob.Bucket
}{m: map[string]*blob.Bucket{}}

// openMem returns a new handle onto the shared bucket named by the URL's
// host. Each handle may be closed independently; the storage stays.
// RegisterMem serves b at mem://name for the rest of the process, in place
// of a fresh in-memory bucket: tests use it to put a counting or
// fault-injecting bucket where a service opens its storage by URL.
func RegisterMem(name string, b *blob.Bucket) {
	memBuckets.Lock()
	defer memBuckets.Unlock()
	memBuckets.m[name] = b
}

func openMem(storagePath string, u *url.URL) (*blob.Bucket, error) {
	for k := range u.Query() {
		return nil, fmt.Errorf("%w %q: invalid query parameter %q (mem:// takes none)", ErrInvalidURL, storagePath, k)
	}
	prefix, err := urlPrefix(storagePath, u)
	if err != nil {
		return nil, err
	}
	memBuckets.Lock()
	shared, ok := memBuckets.m[u.Host]
	if !ok {
		shared = memblob.OpenBucket(nil)
		memBuckets.m[u.Host] = shared
	}
	memBuckets.Unlock()
	return View(shared, prefix), nil
}

// ExperimentBucket returns the experiment's part of a storage bucket: keys
// are relative to "<name>/". Unlike blob.PrefixedBucket it leaves b open
// and usable; closing the returned bucket does not close b, and b must
// stay open while the experiment bucket is in use.
func ExperimentBucket(b *blob.Bucket, name string) *blob.Bucket {
	return View(b, strings.TrimSuffix(name, "/")+"/")
}

// WriteAtomic writes data to key. Readers see the old object or the whole
// new one, never a part: every blob driver publishes an object only when
// its writer closes successfully (see the top of this file), and an
// abandoned or cancelled write publishes nothing.
func WriteAtomic(ctx context.Context, b *blob.Bucket, key string, data []byte) error {
	if err := b.WriteAll(ctx, key, data, nil); err != nil {
		return fmt.Errorf("storage: write %q: %w", key, err)
	}
	return nil
}

// ReadAll returns an object's content; a missing object wraps
// fs.ErrNotExist (and gcerrors.ErrNotFound).
func ReadAll(ctx context.Context, b *blob.Bucket, key string) ([]byte, error) {
	data, err := b.ReadAll(ctx, key)
	if err != nil {
		return nil, readError(key, err)
	}
	return data, nil
}

func readError(key string, err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("storage: read %q: %w: %w", key, fs.ErrNotExist, err)
	}
	return fmt.Errorf("storage: read %q: %w", key, err)
}

// NewestStateKey returns the lexicographically greatest
// experiment_state-*.json directly under the bucket's root (Ray's choice of
// the newest snapshot). With none it returns an error wrapping
// fs.ErrNotExist.
func NewestStateKey(ctx context.Context, b *blob.Bucket) (string, error) {
	keys, err := stateKeys(ctx, b)
	if err != nil {
		return "", err
	}
	if len(keys) == 0 {
		return "", fmt.Errorf("storage: no experiment_state-*.json in the experiment: %w", fs.ErrNotExist)
	}
	return keys[len(keys)-1], nil
}

// Skipped is a state file LoadNewestState passed over as unreadable, and
// why (the error wraps state.ErrCorrupt).
type Skipped struct {
	Key string
	Err error
}

func (s Skipped) String() string { return s.Key + ": " + s.Err.Error() }

// LoadNewestState reads the newest experiment_state-*.json under the
// bucket's root that loads and verifies (state.Load: whole JSON, its
// checksum, its format) and returns it with its key, and the newer ones
// it skipped as damaged, newest first: a snapshot cut short or edited
// must not hide an intact older one. A file that cannot be read at all
// (storage failing, not the file) is not skipped: the error is returned.
// With no state file the error wraps fs.ErrNotExist; when none loads, it
// is the newest's, wrapping state.ErrCorrupt, with the newest's key (the
// caller names the file: Join(dir, key)).
func LoadNewestState(ctx context.Context, b *blob.Bucket) (*state.Experiment, string, []Skipped, error) {
	keys, err := stateKeys(ctx, b)
	if err != nil {
		return nil, "", nil, err
	}
	if len(keys) == 0 {
		return nil, "", nil, fmt.Errorf("storage: no experiment_state-*.json in the experiment: %w", fs.ErrNotExist)
	}
	var skipped []Skipped
	for i := len(keys) - 1; i >= 0; i-- {
		data, err := ReadAll(ctx, b, keys[i])
		if err != nil {
			return nil, keys[i], skipped, err
		}
		st, err := state.Load(data)
		if err == nil {
			return st, keys[i], skipped, nil
		}
		if !errors.Is(err, state.ErrCorrupt) {
			return nil, keys[i], skipped, err
		}
		skipped = append(skipped, Skipped{Key: keys[i], Err: err})
	}
	return nil, skipped[0].Key, nil, skipped[0].Err
}

// Objects lists b as opts asks (nil: every object), in the bucket's
// order: each object with a nil error, or once the listing's error
// (unwrapped, for the caller to wrap), which ends it.
func Objects(ctx context.Context, b *blob.Bucket, opts *blob.ListOptions) iter.Seq2[*blob.ListObject, error] {
	return func(yield func(*blob.ListObject, error) bool) {
		it := b.List(opts)
		for {
			obj, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(obj, nil) {
				return
			}
		}
	}
}

// stateKeys lists the experiment_state-*.json keys at the root, sorted.
func stateKeys(ctx context.Context, b *blob.Bucket) ([]string, error) {
	var keys []string
	for obj, err := range Objects(ctx, b, &blob.ListOptions{Prefix: "experiment_state-", Delimiter: "/"}) {
		if err != nil {
			return nil, fmt.Errorf("storage: list experiment_state-*.json: %w", err)
		}
		if !obj.IsDir && !strings.Contains(obj.Key, "/") && path.Ext(obj.Key) == ".json" {
			keys = append(keys, obj.Key)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// WriteMarker writes the experiment's .validate_storage_marker (empty).
func WriteMarker(ctx context.Context, b *blob.Bucket) error {
	return WriteAtomic(ctx, b, MarkerFile, nil)
}

// CheckMarker returns nil when the experiment's .validate_storage_marker
// exists, and an error wrapping fs.ErrNotExist when it does not.
func CheckMarker(ctx context.Context, b *blob.Bucket) error {
	ok, err := b.Exists(ctx, MarkerFile)
	if err != nil {
		return fmt.Errorf("storage: check %s: %w", MarkerFile, err)
	}
	if !ok {
		return fmt.Errorf("storage: %s is missing: %w", MarkerFile, fs.ErrNotExist)
	}
	return nil
}
