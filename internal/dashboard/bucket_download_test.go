package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/dashboard"
	"github.com/tunejet/tunejet/internal/storage"
)

// TestCheckpointDownloadFromABucket: the storage dashboard of an
// experiment in a bucket (not a directory) hands out a checkpoint as a tar
// of the objects under its folder.
func TestCheckpointDownloadFromABucket(t *testing.T) {
	e := runFinished(t)
	b := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = b.Close() })
	host := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	storage.RegisterMem(host, b)
	if err := blobsync.SyncUp(t.Context(), e.expPath, b, e.name, nil); err != nil {
		t.Fatal(err)
	}
	srv, err := dashboard.NewStorage(t.Context(), "mem://"+host+"/"+e.name, dashboard.Config{Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	url := serveDashboard(t, srv).URL

	r1 := e.result(t, 1, "sgd")
	r := get(t, http.DefaultClient, url+"/api/experiments/"+e.name+"/trials/"+r1.TrialID+"/checkpoints/"+r1.Checkpoint.Name)
	if r.code != http.StatusOK || r.header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("download %s from the bucket: %s %s", r1.Checkpoint.Name, r.status, r.header)
	}
	if files, want := untar(t, r.body), weights(r1); files["weights"] != want {
		t.Errorf("the checkpoint's tar from the bucket holds %v; want weights %q", files, want)
	}
	if r := get(t, http.DefaultClient, url+"/api/experiments/"+e.name+"/trials/"+r1.TrialID+"/checkpoints/checkpoint_999999"); r.code != http.StatusNotFound {
		t.Errorf("a checkpoint not in the bucket: %s, want 404", r.status)
	}
}
