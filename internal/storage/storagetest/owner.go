package storagetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/storage"
)

// OwnerGone makes the claim on <storagePath>/<name> stale, if there is
// one, as if the deployment that made it had not renewed it for a day:
// that deployment is gone for good (a test's earlier server), and a
// restore from another takes the folder over (storage.ClaimRestore).
func OwnerGone(t testing.TB, storagePath, name string) {
	t.Helper()
	ctx := t.Context()
	b, err := storage.OpenBucket(ctx, storagePath)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	exp := storage.ExperimentBucket(b, name)
	defer exp.Close()
	o, err := storage.ReadOwner(ctx, exp)
	if err != nil || o == nil {
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	o.Renewed = time.Now().Add(-24 * time.Hour)
	data, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := storage.WriteAtomic(ctx, exp, storage.OwnerFile, data); err != nil {
		t.Fatal(err)
	}
}
