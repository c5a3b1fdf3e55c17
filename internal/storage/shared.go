package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
// experiment's marker holding Token.
type SharedCheck struct {
	StoragePath string `json:"storage_path"`
	Experiment  string `json:"experiment"`
	Token       string `json:"token"`
}

// SharedCheckReply is a syncer's answer: NotShared with the reason when it
// does not see the marker, Error for a request it cannot read.
type SharedCheckReply struct {
	NotShared bool   `json:"not_shared,omitempty"`
	Error     string `json:"error,omitempty"`
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

// Reach reports whether this host can write the experiment's part of
// storage itself: for a path on a file system, whether it sees the
// experiment's marker (CheckShared, as Ray tells shared storage from
// unshared); for a bucket URL, whether a probe object can be written and
// deleted under the experiment's prefix (the credentials and the network
// allow it). The error says why not.
func Reach(ctx context.Context, storagePath, experiment string) error {
	if _, ok := filesystem(storagePath); ok {
		return CheckShared(storagePath, experiment)
	}
	b, err := OpenBucket(ctx, storagePath)
	if err != nil {
		return err
	}
	defer b.Close()
	var r [8]byte
	_, _ = rand.Read(r[:])
	key := experiment + "/" + probeKey + hex.EncodeToString(r[:])
	if err := b.WriteAll(ctx, key, []byte("probe"), nil); err != nil {
		return fmt.Errorf("storage_path %q: cannot write %s: %w", storagePath, key, err)
	}
	if err := b.Delete(ctx, key); err != nil {
		return fmt.Errorf("storage_path %q: cannot delete %s: %w", storagePath, key, err)
	}
	return nil
}
