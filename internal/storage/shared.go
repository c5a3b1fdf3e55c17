package storage

import (
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
	if IsURL(localPath) {
		u, err := LocalPath(localPath)
		if err != nil {
			return nil // not a filesystem path: a bucket
		}
		localPath = u
	}
	marker := filepath.Join(localPath, experiment, MarkerFile)
	if _, err := os.Stat(marker); err != nil {
		return fmt.Errorf("%w: storage_path %q: %s is not visible on this host (%w). "+
			"Every host that runs a runner or syncer must see the same storage; "+
			"a local path on one machine is not visible on the others. "+
			"Set storage_path to a shared filesystem path (NFS, e.g. /mnt/nfs/tunejet_results) "+
			"or to a bucket URL (s3://bucket/path, gs://bucket/path)",
			ErrNotShared, localPath, marker, err)
	}
	return nil
}
