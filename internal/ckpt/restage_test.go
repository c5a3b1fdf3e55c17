package ckpt_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/ckpt/ckpttest"
)

// TestAttemptsStageTheirOwnCopies: a retry resumes from the last
// checkpoint it knew of while an attempt presumed lost goes on, so two
// attempts stage checkpoint_000024 with other bytes. Each event must name
// its own bytes.
func TestAttemptsStageTheirOwnCopies(t *testing.T) {
	obs := store(t)
	ctx := t.Context()
	name := ckpt.Name(24)
	staged := map[int]ckpt.Staged{}
	for attempt := 1; attempt <= 2; attempt++ {
		src := t.TempDir()
		ckpttest.Write(t, src, ckpttest.Tree{"step": []byte(strings.Repeat("x", attempt))})
		s, err := ckpt.Stage(ctx, obs, ckpt.AttemptObjectName("t1", attempt, name), src)
		if err != nil {
			t.Fatal(err)
		}
		staged[attempt] = s
	}
	for attempt, s := range staged {
		dst := filepath.Join(t.TempDir(), "x")
		if err := ckpt.Fetch(ctx, obs, ckpt.AttemptObjectName("t1", attempt, name), s.Digest, dst); err != nil {
			t.Errorf("attempt %d's %s: %v", attempt, name, err)
		}
	}
}

// TestRestagedCopyStandsForTheOriginal: storage keeps a checkpoint's
// files, not its archive, so a copy staged again from storage has another
// digest; Fetch accepts it for the digest it was persisted from, and for
// no other.
func TestRestagedCopyStandsForTheOriginal(t *testing.T) {
	obs := store(t)
	ctx := t.Context()
	src := t.TempDir()
	ckpttest.Write(t, src, ckpttest.Tree{"model.bin": []byte("weights")})
	orig, err := ckpt.Stage(ctx, obs, "t1/checkpoint_000001", src)
	if err != nil {
		t.Fatal(err)
	}
	if err := obs.Delete(ctx, "t1/checkpoint_000001"); err != nil {
		t.Fatal(err)
	}
	persisted := t.TempDir()
	ckpttest.Write(t, persisted, ckpttest.Tree{"model.bin": []byte("weights")})
	if err := os.Chtimes(filepath.Join(persisted, "model.bin"), time.Time{}, time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	again, err := ckpt.Restage(ctx, obs, "t1/checkpoint_000001", persisted, orig.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest == orig.Digest {
		t.Fatalf("the restaged archive has the original's digest %s; the test needs another", orig.Digest)
	}
	dst := filepath.Join(t.TempDir(), "x")
	if err := ckpt.Fetch(ctx, obs, "t1/checkpoint_000001", orig.Digest, dst); err != nil {
		t.Fatalf("Fetch for the original digest: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "model.bin")); err != nil || string(b) != "weights" {
		t.Fatalf("model.bin = %q, %v", b, err)
	}
	other := "sha256:" + strings.Repeat("0", 64)
	if err := ckpt.Fetch(ctx, obs, "t1/checkpoint_000001", other, filepath.Join(t.TempDir(), "y")); !errors.Is(err, ckpt.ErrDigestMismatch) {
		t.Fatalf("Fetch for another digest: %v, want ErrDigestMismatch", err)
	}
}

// TestFetchOfAGoneCheckpoint: a checkpoint marked gone fails Fetch with
// ErrGone and the reason, so a runner can end the trial instead of
// retrying.
func TestFetchOfAGoneCheckpoint(t *testing.T) {
	obs := store(t)
	ctx := t.Context()
	if err := ckpt.MarkGone(ctx, obs, "t1/checkpoint_000003", "its staged copy was removed and it was never persisted"); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "x")
	err := ckpt.Fetch(ctx, obs, "t1/checkpoint_000003", "sha256:"+strings.Repeat("0", 64), dst)
	if !errors.Is(err, ckpt.ErrGone) || !strings.Contains(err.Error(), "never persisted") {
		t.Fatalf("Fetch: %v, want ErrGone with the reason", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Fetch left %s behind", dst)
	}
}
