package bustest_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// The cluster replicates the log on every node, and the log keeps taking
// events while one node is down and catches that node up when it returns.
func TestClusterReplicatesAndSurvivesANode(t *testing.T) {
	c := bustest.StartCluster(t, 3)
	if got := len(c.URLs()); got != 3 {
		t.Fatalf("%d client URLs, want 3", got)
	}
	b := c.Bus("test")
	log, err := c.JetStream().Stream(t.Context(), bus.StreamName) // read behind the bus
	if err != nil {
		t.Fatal(err)
	}
	info := logInfo(t, log)
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("the log has %d replicas configured and cluster info %+v; want 3, a leader and 2 followers", info.Config.Replicas, info.Cluster)
	}
	publish := func(it int) {
		t.Helper()
		ev := b.Event("exp", events.WriterRunner, &events.TrialReported{TrialID: "t1", Attempt: 1, Result: map[string]any{"training_iteration": it}})
		if _, err := b.Publish(t.Context(), ev); err != nil {
			t.Fatalf("publish %d: %v", it, err)
		}
	}
	publish(1)

	// Kill the node that leads the log; the others elect a new leader.
	leader := -1
	for i := range 3 {
		if s := c.Server(i); s != nil && s.JetStreamIsStreamLeader("$G", bus.StreamName) {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no node leads the log")
	}
	c.Kill(leader)
	if got := len(c.URLs()); got != 2 {
		t.Fatalf("%d client URLs with a node down, want 2", got)
	}
	// One event, retried until stored: its id makes a retry of a publish
	// that was stored but not acknowledged a duplicate the log drops.
	ev := b.Event("exp", events.WriterRunner, &events.TrialReported{TrialID: "t1", Attempt: 1, Result: map[string]any{"training_iteration": 2}})
	bustest.Eventually(t, 30*time.Second, "a publish with a node down", func() bool {
		_, err := b.Publish(t.Context(), ev)
		return err == nil
	})

	c.Restart(leader)
	bustest.Eventually(t, 30*time.Second, "the restarted node to hold both events", func() bool {
		s := c.Server(leader)
		if s == nil || !s.JetStreamIsStreamCurrent("$G", bus.StreamName) {
			return false
		}
		info := logInfo(t, log)
		if info.State.Msgs != 2 || info.Cluster == nil {
			return false
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current {
				return false
			}
		}
		return len(info.Cluster.Replicas) == 2
	})
}

func logInfo(t *testing.T, s jetstream.Stream) *jetstream.StreamInfo {
	t.Helper()
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info
}
