package syncer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/ckpt"
)

// A donor's staged copy that a PBT exploit resumes another trial from is
// kept when storage holds it and the donor has a newer checkpoint; once
// nothing pins it, it goes like any other (the exploiting trial's runner
// found it removed, and waited for a restage that never came).
func TestPinnedStagedCopyIsKept(t *testing.T) {
	b := bustest.Start(t).Bus("syncer")
	ctx := t.Context()
	obs, err := b.Checkpoints(ctx, "exp")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w"), []byte("w"), 0o600); err != nil {
		t.Fatal(err)
	}
	old, newer := ckpt.LegacyObjectName("donor", ckpt.Name(1)), ckpt.LegacyObjectName("donor", ckpt.Name(2))
	for _, o := range []string{old, newer} {
		if _, err := ckpt.Stage(ctx, obs, o, dir); err != nil {
			t.Fatal(err)
		}
	}
	p := &persister{exp: "exp", bus: b, log: zerolog.Nop(),
		persisted: map[string]bool{old: true, newer: true}, staged: map[string][]string{"donor": {old, newer}},
		latest: map[string]string{"donor": newer}}
	p.pin([]string{old})
	p.removeStagedOf(ctx, "donor")
	if _, err := obs.GetInfo(ctx, old); err != nil {
		t.Fatalf("the pinned staged copy: %v; want it kept", err)
	}
	p.pin(nil)
	p.removeStagedOf(ctx, "donor")
	if info, err := obs.GetInfo(ctx, old, jetstream.GetObjectInfoShowDeleted()); err != nil || !info.Deleted {
		t.Errorf("the copy once unpinned: %+v, %v; want it removed", info, err)
	}
	if _, err := obs.GetInfo(ctx, newer); err != nil {
		t.Errorf("the latest staged copy: %v; want it kept", err)
	}
}
