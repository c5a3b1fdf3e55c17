package storage_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
)

func TestDecideClaim(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	mine := storage.Owner{Deployment: "A", Host: "h1", PID: 10, RenewEveryS: 60}
	fresh := func(dep string, embedded bool) *storage.Owner {
		return &storage.Owner{Deployment: dep, Host: "h1", PID: 20, Embedded: embedded, Since: now.Add(-time.Hour), Renewed: now.Add(-time.Minute), RenewEveryS: 60}
	}
	stale := func(dep string) *storage.Owner {
		o := fresh(dep, false)
		o.Renewed = now.Add(-4 * time.Minute) // 3 periods of 60 s missed
		return o
	}
	otherHost := fresh("B", true)
	otherHost.Host = "h2"
	alive := func(storage.Owner) bool { return false }
	dead := func(storage.Owner) bool { return true }
	tests := []struct {
		name string
		cur  *storage.Owner
		how  storage.Claim
		gone func(storage.Owner) bool
		want string
	}{
		{"a run claims a folder nobody owns", nil, storage.ClaimRun, alive, "write A pid 10 since now"},
		{"a renewal claims a folder nobody owns", nil, storage.ClaimRenew, alive, "write A pid 10 since now"},
		{"a run of the owner passes", fresh("A", false), storage.ClaimRun, alive, "write A pid 10 since before"},
		{"the owner's restore passes", fresh("A", false), storage.ClaimRestore, alive, "write A pid 10 since before"},
		{"the owner's renewal keeps who claimed it", fresh("A", false), storage.ClaimRenew, alive, "write A pid 20 since before"},
		{"a run of another deployment is refused", fresh("B", false), storage.ClaimRun, alive, "refused"},
		{"a run is refused by a stale owner too", stale("B"), storage.ClaimRun, alive, "refused"},
		{"a renewal of another deployment is refused", stale("B"), storage.ClaimRenew, dead, "refused"},
		{"a restore is refused by a live owner", fresh("B", false), storage.ClaimRestore, alive, "refused"},
		{"a restore takes over a stale owner", stale("B"), storage.ClaimRestore, alive, "write A pid 10 since now, took B"},
		{"a restore takes over an embedded store on this host no server runs", fresh("B", true), storage.ClaimRestore, dead, "write A pid 10 since now, took B"},
		{"not an owner that is not an embedded store", fresh("B", false), storage.ClaimRestore, dead, "refused"},
		{"not a process on another host", otherHost, storage.ClaimRestore, dead, "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, took, err := storage.DecideClaim(tt.cur, mine, tt.how, now, tt.gone)
			got := "refused"
			if err == nil {
				since := "before"
				if next.Since.Equal(now) {
					since = "now"
				}
				got = fmt.Sprintf("write %s pid %d since %s", next.Deployment, next.PID, since)
				if !next.Renewed.Equal(now) {
					got += ", not renewed"
				}
				if took != nil {
					got += ", took " + took.Deployment
				}
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestClaimOwnerOnEveryStorage claims one experiment folder from two
// deployments on every kind of storage path: the second is refused naming
// the first, the first renews, and a restore takes over only a stale
// owner, saying whom from.
func TestClaimOwnerOnEveryStorage(t *testing.T) {
	kinds := []struct {
		name string
		path func(t *testing.T) string
	}{
		{"local", func(t *testing.T) string { return t.TempDir() }},
		{"file", func(t *testing.T) string { return "file://" + t.TempDir() }},
		{"mem", func(t *testing.T) string { return "mem://owner-" + strings.ReplaceAll(t.Name(), "/", "-") }},
		{"s3", func(t *testing.T) string { return storagetest.S3(t) }},
		{"gs", func(t *testing.T) string { return storagetest.GCS(t) }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			sp := k.path(t)
			a := storage.Owner{Deployment: "dep-a", Store: "embedded store /stores/a", Host: "h", PID: 1, Embedded: true, RenewEveryS: 60}
			b := storage.Owner{Deployment: "dep-b", Store: "embedded store /stores/b", Host: "h", PID: 2, Embedded: true, RenewEveryS: 60}
			if _, err := storage.ClaimOwner(ctx, sp, "exp", a, storage.ClaimRun, nil); err != nil {
				t.Fatalf("first claim: %v", err)
			}
			_, err := storage.ClaimOwner(ctx, sp, "exp", b, storage.ClaimRun, nil)
			var owned *storage.OwnedError
			if !errors.As(err, &owned) || !errors.Is(err, storage.ErrOwned) || owned.Owner.Deployment != "dep-a" ||
				!strings.Contains(err.Error(), "/stores/a") || !strings.Contains(err.Error(), "tunejet restore") {
				t.Fatalf("second deployment's run: %v; want refused naming dep-a and its store", err)
			}
			if _, err := storage.ClaimOwner(ctx, sp, "exp", a, storage.ClaimRenew, nil); err != nil {
				t.Fatalf("owner's renewal: %v", err)
			}
			if _, err := storage.ClaimOwner(ctx, sp, "exp", b, storage.ClaimRestore, nil); !errors.Is(err, storage.ErrOwned) {
				t.Fatalf("restore from another deployment while the owner renews: %v; want refused", err)
			}
			// The owner stops renewing: its last renewal is long past.
			cur := readOwner(t, sp)
			cur.Renewed = time.Now().Add(-time.Hour)
			writeOwner(t, sp, cur)
			took, err := storage.ClaimOwner(ctx, sp, "exp", b, storage.ClaimRestore, nil)
			if err != nil || took == nil || took.Deployment != "dep-a" {
				t.Fatalf("restore over a stale owner: took %+v, %v; want it taken over from dep-a", took, err)
			}
			if got := readOwner(t, sp); got.Deployment != "dep-b" || got.PID != 2 {
				t.Fatalf("owner after the takeover: %+v", got)
			}
			if _, err := storage.ClaimOwner(ctx, sp, "exp", a, storage.ClaimRenew, nil); !errors.Is(err, storage.ErrOwned) {
				t.Fatalf("the old owner's renewal after the takeover: %v; want refused", err)
			}
		})
	}
}

func readOwner(t *testing.T, sp string) storage.Owner {
	t.Helper()
	b := open(t, sp)
	data, err := storage.ReadAll(t.Context(), b, "exp/"+storage.OwnerFile)
	if err != nil {
		t.Fatal(err)
	}
	var o storage.Owner
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func writeOwner(t *testing.T, sp string, o storage.Owner) {
	t.Helper()
	data, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := storage.WriteAtomic(t.Context(), open(t, sp), "exp/"+storage.OwnerFile, data); err != nil {
		t.Fatal(err)
	}
}

// TestClaimOwnerRefusesAnUnreadableOwner: an owner file that is not one
// is never overwritten.
func TestClaimOwnerRefusesAnUnreadableOwner(t *testing.T) {
	sp := t.TempDir()
	if err := os.MkdirAll(filepath.Join(sp, "exp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sp, "exp", storage.OwnerFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := storage.ClaimOwner(t.Context(), sp, "exp", storage.Owner{Deployment: "a"}, storage.ClaimRun, nil)
	if err == nil || !strings.Contains(err.Error(), storage.OwnerFile) {
		t.Fatalf("claim over an unreadable owner file: %v; want an error naming it", err)
	}
}
