package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gocloud.dev/gcerrors"
)

// ErrNotShared is wrapped by CheckShared when this host cannot see the
// experiment's marker: the storage path is local to another host.
var ErrNotShared = errors.New("unable to set up cluster storage")

// CheckShared checks, for a storage path on a filesystem (a local path or
// a file:// URL), that this host sees <path>/<experiment>/.validate_storage_marker,
// which the experiment wrote when it started. A runner or syncer on a host
// that does not see it would write results nobody else reads, so it must
// stop (Ray's "Unable to set up cluster storage"). Bucket URLs (s3://, gs://,
// mem://, ...) are shared by construction, and CheckShared returns nil.
func CheckShared(localPath string, experiment string) error {
	dir, ok := filesystem(localPath)
	if !ok {
		return nil
	}
	marker := filepath.Join(dir, experiment, MarkerFile)
	if _, err := os.Stat(marker); err != nil {
		return notShared(dir, marker, err)
	}
	return nil
}

func notShared(dir, marker string, err error) error {
	return fmt.Errorf("%w: storage_path %q: %s is not visible on this host (%w). "+
		"Every host that runs a runner or syncer must see the same storage; "+
		"a local path on one machine is not visible on the others. "+
		"Set storage_path to a shared filesystem path (NFS, e.g. /mnt/nfs/tunejet_results) "+
		"or to a bucket URL (s3://bucket/path, gs://bucket/path)",
		ErrNotShared, dir, marker, err)
}

// filesystem is the directory a storage path names on a filesystem (a
// path or a file:// URL); ok is false for a bucket URL.
func filesystem(storagePath string) (dir string, ok bool) {
	if !IsURL(storagePath) {
		return storagePath, true
	}
	dir, err := LocalPath(storagePath)
	return dir, err == nil
}

// SharedCheckSubject is where a syncer answers whether it sees the storage
// marker a client wrote (SharedCheck), before the client submits.
const SharedCheckSubject = "tunejet.api.storage_check"

// SharedCheck asks a syncer whether it sees, under StoragePath, the
// experiment's marker holding Token (a path on a file system), or whether
// it can write to the bucket StoragePath names (Reach; Token is empty).
type SharedCheck struct {
	StoragePath string `json:"storage_path"`
	Experiment  string `json:"experiment"`
	Token       string `json:"token,omitempty"`
}

// SharedCheckReply is a syncer's answer: NotShared with the reason when it
// does not see the marker; Unreachable when it cannot write to the bucket,
// with Reason (ErrNoCredentials' text, ...; empty for another failure) and
// Detail as in a *ReachError; Error for a request it cannot read.
type SharedCheckReply struct {
	NotShared   bool   `json:"not_shared,omitempty"`
	Unreachable bool   `json:"unreachable,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Detail      string `json:"detail,omitempty"`
	Error       string `json:"error,omitempty"`
}

// IsBucket reports whether a storage path names a bucket (s3://, gs://,
// mem://, ...), not a directory on a file system.
func IsBucket(storagePath string) bool {
	_, fs := filesystem(storagePath)
	return !fs
}

// Unreachable is the reply that carries a failed Reach of a bucket: a
// *ReachError as Unreachable, any other error (a storage path that does
// not parse) as Error.
func Unreachable(err error) SharedCheckReply {
	var re *ReachError
	if !errors.As(err, &re) {
		return SharedCheckReply{Error: err.Error()}
	}
	r := SharedCheckReply{Unreachable: true, Detail: re.Detail, Error: err.Error()}
	if re.Reason != nil {
		r.Reason = re.Reason.Error()
	}
	return r
}

// Err is the refusal the reply carries for storagePath, nil for none: a
// *ReachError for an Unreachable bucket, ErrNotShared for a marker not
// seen.
func (r SharedCheckReply) Err(storagePath string) error {
	switch {
	case r.Unreachable:
		e := &ReachError{StoragePath: storagePath, Detail: r.Detail, Err: errors.New(r.Detail)}
		for _, reason := range []error{ErrNoCredentials, ErrAccessDenied, ErrNoSuchBucket, ErrUnreachable} {
			if r.Reason == reason.Error() {
				e.Reason = reason
			}
		}
		return e
	case r.NotShared:
		return fmt.Errorf("%w: %s", ErrNotShared, r.Error)
	case r.Error != "":
		return fmt.Errorf("storage check: %s", r.Error)
	}
	return nil
}

// WriteToken writes the experiment's marker, holding a new random token,
// under a storage path on a filesystem, and returns the token; a syncer
// that sees the same file system finds the same token (CheckToken). For a
// bucket it writes nothing and returns "": buckets are shared by
// construction.
func WriteToken(storagePath, experiment string) (string, error) {
	dir, ok := filesystem(storagePath)
	if !ok {
		return "", nil
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	if err := os.MkdirAll(filepath.Join(dir, experiment), 0o755); err != nil {
		return "", fmt.Errorf("storage_path %q: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, experiment, MarkerFile), []byte(token), 0o644); err != nil {
		return "", fmt.Errorf("storage_path %q: %w", dir, err)
	}
	return token, nil
}

// CheckToken checks that this host sees the experiment's marker holding
// token under storagePath: the file the client that asked wrote, not one
// that only has the same name here.
func CheckToken(storagePath, experiment, token string) error {
	dir, ok := filesystem(storagePath)
	if !ok {
		return nil
	}
	marker := filepath.Join(dir, experiment, MarkerFile)
	got, err := os.ReadFile(marker)
	if err == nil && !bytes.Equal(bytes.TrimSpace(got), []byte(token)) {
		err = errors.New("it holds another client's token: a different file of the same name")
	}
	if err != nil {
		return notShared(dir, marker, err)
	}
	return nil
}

// probeKey is the object Reach writes and deletes under an experiment's
// prefix in a bucket.
const probeKey = ".tunejet_probe-"

// ReachTimeout bounds Reach's probe of a bucket: an endpoint that does not
// answer, or a credential chain that waits on a metadata service, is
// reported as unreachable or missing credentials within it.
const ReachTimeout = 5 * time.Second

// Why a bucket cannot be written, as Reach names it: errors.Is matches one
// of them on a *ReachError.
var (
	ErrNoCredentials = errors.New("no credentials")
	ErrAccessDenied  = errors.New("access denied")
	ErrNoSuchBucket  = errors.New("no such bucket")
	ErrUnreachable   = errors.New("unreachable endpoint")
)

// ReachError is a bucket that Reach could not write a probe object to.
type ReachError struct {
	// StoragePath is the bucket URL.
	StoragePath string
	// Reason is ErrNoCredentials, ErrAccessDenied, ErrNoSuchBucket or
	// ErrUnreachable; nil when the SDK's error is none of those.
	Reason error
	// Detail is the SDK's own words for it, on one line.
	Detail string
	// Err is the SDK's error.
	Err error
}

func (e *ReachError) Error() string {
	if e.Reason == nil {
		return fmt.Sprintf("storage_path %s: cannot write a probe object: %s", e.StoragePath, e.Detail)
	}
	return fmt.Sprintf("storage_path %s: %v (%s)", e.StoragePath, e.Reason, e.Detail)
}

func (e *ReachError) Unwrap() []error {
	if e.Reason == nil {
		return []error{e.Err}
	}
	return []error{e.Reason, e.Err}
}

// Reach reports whether this host can write the experiment's part of
// storage itself: for a path on a file system, whether it sees the
// experiment's marker (CheckShared, as Ray tells shared storage from
// unshared); for a bucket URL, whether a probe object can be written and
// deleted under the experiment's prefix within ReachTimeout (the
// credentials and the network allow it). For a bucket the error is a
// *ReachError naming why not.
func Reach(ctx context.Context, storagePath, experiment string) error {
	if _, ok := filesystem(storagePath); ok {
		return CheckShared(storagePath, experiment)
	}
	pctx, cancel := context.WithTimeout(ctx, ReachTimeout)
	defer cancel()
	err := probe(pctx, storagePath, experiment)
	if err == nil || ctx.Err() != nil || errors.Is(err, ErrInvalidURL) {
		return err
	}
	return classify(storagePath, err)
}

// probe writes and deletes an object under the experiment's prefix.
func probe(ctx context.Context, storagePath, experiment string) error {
	b, err := OpenBucket(ctx, storagePath)
	if err != nil {
		return err
	}
	defer b.Close()
	var r [8]byte
	_, _ = rand.Read(r[:])
	key := experiment + "/" + probeKey + hex.EncodeToString(r[:])
	if err := b.WriteAll(ctx, key, []byte("probe"), nil); err != nil {
		return err
	}
	return b.Delete(ctx, key)
}

// classify names why the SDK's err kept a probe from a bucket.
func classify(storagePath string, err error) *ReachError {
	e := &ReachError{StoragePath: storagePath, Err: err, Detail: innermost(err).Error()}
	var op *net.OpError
	switch {
	case credentialsMissing(err, &e.Detail):
		e.Reason = ErrNoCredentials
	case gcerrors.Code(err) == gcerrors.PermissionDenied:
		e.Reason = ErrAccessDenied
	case gcerrors.Code(err) == gcerrors.NotFound:
		e.Reason = ErrNoSuchBucket
	case errors.As(err, &op):
		e.Reason, e.Detail = ErrUnreachable, op.Error()
	case errors.Is(err, context.DeadlineExceeded):
		e.Reason, e.Detail = ErrUnreachable, fmt.Sprintf("no answer within %v", ReachTimeout)
	}
	e.Detail = strings.Join(strings.Fields(e.Detail), " ")
	return e
}

// Explain is err, a failure to reach the bucket at storagePath, as one
// line naming why (a *ReachError) when it is one of the reasons Reach
// names; any other err is returned as it is.
func Explain(storagePath string, err error) error {
	if err == nil || !IsBucket(storagePath) {
		return err
	}
	if e := classify(storagePath, err); e.Reason != nil {
		return e
	}
	return err
}

// credentialsMissing reports whether err is the SDK's failure to find
// credentials, setting detail to its words. The AWS SDK (v2) wraps every
// credential provider's failure in "get identity: ..." when it signs a
// request, and Google's in "could not find default credentials"; neither
// has a type of its own to match.
func credentialsMissing(err error, detail *string) bool {
	for e := err; e != nil; e = unwrapFirst(e) {
		if msg, ok := strings.CutPrefix(e.Error(), "get identity: "); ok {
			*detail = msg
			return true
		}
		if strings.Contains(e.Error(), "could not find default credentials") {
			*detail = innermost(e).Error()
			return true
		}
	}
	return false
}

// innermost is the error at the end of err's chain (the first of a join).
func innermost(err error) error {
	for next := unwrapFirst(err); next != nil; next = unwrapFirst(err) {
		err = next
	}
	return err
}

func unwrapFirst(err error) error {
	switch u := err.(type) { //nolint:errorlint // one step down the chain, on purpose
	case interface{ Unwrap() error }:
		return u.Unwrap()
	case interface{ Unwrap() []error }:
		if errs := u.Unwrap(); len(errs) > 0 {
			return errs[0]
		}
	}
	return nil
}
