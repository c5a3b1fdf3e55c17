package ckpt_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/ckpt/ckpttest"
)

// wait bounds what the cluster tests wait for.
const wait = 60 * time.Second

// TestStagedBytesAreTheEventsWhenTheLeaderDies stages a checkpoint of
// many chunks while the node leading the bucket's stream is killed, and
// stages again as the runner does when a put fails. Whatever chunk went
// unanswered or which node died, a put that returned a digest left
// exactly those bytes under the name: Fetch with that digest succeeds
// once the cluster has a leader again.
func TestStagedBytesAreTheEventsWhenTheLeaderDies(t *testing.T) {
	if os.Getenv("TUNEJET_SOAK") == "" {
		t.Skip("a 3-node cluster losing its leader mid-put takes minutes on a loaded machine: runs with make soak")
	}
	c := bustest.StartCluster(t, 3)
	js := c.JetStream()
	ctx := t.Context()
	obs, err := ckpt.StoreReplicated(ctx, js, "exp", c.Replicas())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	ckpttest.Write(t, src, ckpttest.Tree{"model.bin": ckpttest.Random(t, 24*ckpt.ChunkSize+17)})
	const name = "t1/checkpoint_000001"

	type result struct {
		staged ckpt.Staged
		err    error
	}
	done := make(chan result, 1)
	go func() {
		s, err := ckpt.Stage(ctx, obs, name, src)
		done <- result{s, err}
	}()
	// Kill the stream's leader once chunks are arriving.
	stream, err := js.Stream(ctx, "OBJ_"+ckpt.Bucket("exp"))
	if err != nil {
		t.Fatal(err)
	}
	var leader string
	bustest.Eventually(t, wait, "chunks stored", func() bool {
		info, err := stream.Info(ctx)
		if err != nil || info.Cluster == nil {
			return false
		}
		leader = info.Cluster.Leader
		return info.State.Msgs > 2
	})
	killed := -1
	for i := range 3 {
		if s := c.Server(i); s != nil && s.Name() == leader {
			killed = i
		}
	}
	if killed < 0 {
		t.Fatalf("no node is the leader %q", leader)
	}
	c.Kill(killed)
	r := <-done
	for try := 0; r.err != nil; try++ {
		if try == 20 {
			t.Fatalf("stage: %v", r.err)
		}
		t.Logf("stage failed while the leader was lost (staging again): %v", r.err)
		r.staged, r.err = ckpt.Stage(ctx, obs, name, src)
	}
	c.Restart(killed)
	dst := filepath.Join(t.TempDir(), "x")
	var ferr error
	bustest.Eventually(t, wait, "the staged checkpoint fetched", func() bool {
		ferr = ckpt.Fetch(ctx, obs, name, r.staged.Digest, dst)
		return ferr == nil || errors.Is(ferr, ckpt.ErrDigestMismatch) || errors.Is(ferr, jetstream.ErrDigestMismatch)
	})
	if ferr != nil {
		t.Fatalf("the bytes under %s are not the ones Stage returned: %v", name, ferr)
	}
}
