package restorer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
)

// TestARestoreTakesOverOnlyAFolderWhoseOwnerIsGone: a restore from
// another deployment than the one that owns the experiment's folder is
// refused, naming the owner, while the owner renews its claim; once the
// claim is stale, the restore takes the folder over and says from whom.
func TestARestoreTakesOverOnlyAFolderWhoseOwnerIsGone(t *testing.T) {
	storagePath := t.TempDir()
	expPath := storage.Join(storagePath, exp)
	lost := bustest.Start(t)
	h := &history{t: t, b: lost.Bus("history"), storage: storagePath, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), reports: 2}
	h.run1()
	store(t, storagePath, foldLog(t, h.b, 0), storage.StateFileName(session1))
	owner := storage.Owner{Deployment: "0123456789abcdef", Store: "nats://cluster-a:4222", Host: "elsewhere", PID: 42,
		Since: time.Now().Add(-time.Hour), Renewed: time.Now(), RenewEveryS: 300}
	data, err := json.Marshal(owner)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(storagePath, exp, storage.OwnerFile), data, 0o644); err != nil {
		t.Fatal(err)
	}

	srv := bustest.Start(t)
	s := New(srv.Bus("restorer"), Config{})
	req := api.RestoreRequest{Path: expPath, Resume: restore.FromFlags(true, false, false), Trainable: &genuine}
	rep := s.Handle(t.Context(), req, false)
	if rep.OK || rep.Code != api.CodeOwned || !strings.Contains(rep.Error, "nats://cluster-a:4222") || !strings.Contains(rep.Error, owner.Deployment) {
		t.Fatalf("restore while the owner renews: %+v; want refused with code owned, naming it", rep)
	}
	if last, err := s.bus.LastSeq(t.Context(), events.ExperimentSubjects(exp)); err != nil || last != 0 {
		t.Fatalf("a refused restore published up to %d (%v); want nothing", last, err)
	}

	storagetest.OwnerGone(t, storagePath, exp)
	rep = s.Handle(t.Context(), req, false)
	if !rep.OK || !strings.Contains(rep.TookOver, owner.Deployment) {
		t.Fatalf("restore once the owner is stale: %+v; want OK, saying it took the folder over from %s", rep, owner.Deployment)
	}
	b, err := os.ReadFile(filepath.Join(storagePath, exp, storage.OwnerFile))
	if err != nil {
		t.Fatal(err)
	}
	var now storage.Owner
	if err := json.Unmarshal(b, &now); err != nil || now.Deployment == owner.Deployment || now.PID != os.Getpid() {
		t.Fatalf("owner after the takeover: %+v (%v); want this deployment", now, err)
	}
}

// TestARestoreTakesOverTheFolderOfAnEmbeddedStoreNoServerRuns: the owner
// is an embedded store on this host, its claim fresh. While a server runs
// on it, a restore from another deployment is refused; once none does
// (the tunejet run that served it ended, however it ended), the restore
// takes the folder over at once.
func TestARestoreTakesOverTheFolderOfAnEmbeddedStoreNoServerRuns(t *testing.T) {
	storagePath := t.TempDir()
	lost := bustest.Start(t)
	h := &history{t: t, b: lost.Bus("history"), storage: storagePath, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), reports: 2}
	h.run1()
	store(t, storagePath, foldLog(t, h.b, 0), storage.StateFileName(session1))
	storeDir := t.TempDir()
	emb, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: storeDir})
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	owner := storage.Owner{Deployment: "fedcba9876543210", Store: "embedded store " + storeDir, Host: host, PID: os.Getpid(), Embedded: true,
		Since: time.Now(), Renewed: time.Now(), RenewEveryS: 300}
	data, err := json.Marshal(owner)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(storagePath, exp, storage.OwnerFile), data, 0o644); err != nil {
		t.Fatal(err)
	}

	s := New(bustest.Start(t).Bus("restorer"), Config{})
	req := api.RestoreRequest{Path: storage.Join(storagePath, exp), Resume: restore.FromFlags(true, false, false), Trainable: &genuine}
	if rep := s.Handle(t.Context(), req, false); rep.OK || rep.Code != api.CodeOwned || !strings.Contains(rep.Error, "--store-dir "+storeDir) {
		t.Fatalf("restore while a server runs the owner's store: %+v; want refused, naming the store", rep)
	}
	emb.Shutdown()
	if rep := s.Handle(t.Context(), req, false); !rep.OK || !strings.Contains(rep.TookOver, owner.Deployment) {
		t.Fatalf("restore once no server runs the owner's store: %+v; want OK, taken over from %s", rep, owner.Deployment)
	}
}
