package direct

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt"
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
		return Manifest{}, fmt.Errorf("%w: the manifest is %s, the event says %s", ckpt.ErrDigestMismatch, got, want)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("read manifest: %w", err)
	}
	for _, f := range m.Files {
		if _, err := ckpt.RelPath(f.Path); err != nil || f.Path == ManifestFile {
			return Manifest{}, fmt.Errorf("%w: %q", ckpt.ErrUnsafeEntry, f.Path)
		}
	}
	return m, nil
}
