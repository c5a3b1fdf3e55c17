package ckpt

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
)

// ErrGone is wrapped by Fetch (and Walk) when the checkpoint is gone
// everywhere: its staged copy was lost or holds other bytes, and storage
// never received it. The syncer marks such a checkpoint with MarkGone, so
// that a runner resuming from it ends the trial, with the reason, rather
// than retrying what cannot succeed.
var ErrGone = errors.New("the checkpoint is gone: neither staged nor persisted")

// Object metadata keys of the copies the syncer puts back.
const (
	// restagedFromKey holds the digest of the archive a copy restaged
	// from storage was persisted from.
	restagedFromKey = "tunejet-restaged-from"
	// goneKey holds why a checkpoint is gone (MarkGone).
	goneKey = "tunejet-gone"
)

// AttemptObjectName is the object of one checkpoint of one attempt of a
// trial (events.CheckpointObject). Under LegacyObjectName (one object per
// checkpoint name) a retry's staging replaced the copy of an attempt
// presumed lost that goes on, and the accepted event's checkpoint could be
// neither persisted nor resumed from ("checkpoint digest mismatch"); under
// a name per attempt each event names its own bytes.
func AttemptObjectName(trialID string, attempt int, checkpoint string) string {
	return events.CheckpointObject(trialID, attempt, checkpoint)
}

// Restage stages dir, a checkpoint restored from storage, as object name
// again, for the checkpoint whose original archive had digest from: Fetch
// and Walk accept it for from. storage keeps a checkpoint's files, not its
// archive (folders, symlinks and file times are not kept), so the new
// archive's own digest differs; the copy in storage was checked against
// from when it was persisted.
func Restage(ctx context.Context, obs jetstream.ObjectStore, name, dir, from string) (Staged, error) {
	meta := jetstream.ObjectMeta{Name: name, Metadata: map[string]string{restagedFromKey: from}}
	return stageFiles(ctx, obs, meta, dir, nil)
}

// MarkGone records in place of object name that the checkpoint is gone
// for reason: Fetch then fails with ErrGone and the reason.
func MarkGone(ctx context.Context, obs jetstream.ObjectStore, name, reason string) error {
	meta := jetstream.ObjectMeta{Name: name, Metadata: map[string]string{goneKey: reason}}
	if _, err := obs.Put(ctx, meta, bytes.NewReader(nil)); err != nil {
		return fmt.Errorf("mark checkpoint %s gone: %w", name, err)
	}
	return nil
}

// Holds reports whether info is a usable staged copy of the checkpoint
// with digest want: its own bytes, or a copy restaged from storage for
// them; not one marked gone.
func Holds(info *jetstream.ObjectInfo, want string) bool {
	if _, gone := info.Metadata[goneKey]; gone {
		return false
	}
	got, err := objectDigest(info)
	return err == nil && (got == want || info.Metadata[restagedFromKey] == want)
}

// IsGone reports whether info is a MarkGone marker.
func IsGone(info *jetstream.ObjectInfo) bool {
	_, gone := info.Metadata[goneKey]
	return gone
}
