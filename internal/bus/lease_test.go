package bus_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// leaseKV is a lease bucket whose entries never expire on the server: the
// case of a stream leader that expires a dead holder's entry late.
func leaseKV(t *testing.T) jetstream.KeyValue {
	t.Helper()
	kv, err := bustest.Start(t).JetStream().CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "leases", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

func TestLeaseIsExclusiveWhileRenewed(t *testing.T) {
	kv := leaseKV(t)
	ctx := t.Context()
	a, b := bus.NewLease(kv, "exp", "a"), bus.NewLease(kv, "exp", "b")
	if !a.Acquire(ctx) {
		t.Fatal("a could not take a free lease")
	}
	// b keeps trying for longer than LeaseTTL while a renews: it never
	// gets the lease.
	renew := time.NewTicker(bus.LeaseTTL / 6)
	defer renew.Stop()
	for deadline := time.Now().Add(bus.LeaseTTL + 2*time.Second); time.Now().Before(deadline); <-renew.C {
		if b.Acquire(ctx) {
			t.Fatal("b took a lease that a kept renewing")
		}
		if !a.Acquire(ctx) {
			t.Fatal("a lost the lease it kept renewing")
		}
	}
}

func TestStandbyTakesOverALeaseNobodyRenews(t *testing.T) {
	kv := leaseKV(t)
	ctx := t.Context()
	dead, standby := bus.NewLease(kv, "exp", "dead"), bus.NewLease(kv, "exp", "standby")
	if !dead.Acquire(ctx) {
		t.Fatal("could not take a free lease")
	}
	bustest.Eventually(t, 4*bus.LeaseTTL, "the standby to take over the lease nobody renews", func() bool {
		return standby.Acquire(ctx)
	})
	e, err := kv.Get(ctx, "exp")
	if err != nil || string(e.Value()) != "standby" {
		t.Fatalf("the lease entry: %v, %v; want the standby's", e, err)
	}
	if dead.Acquire(ctx) {
		t.Fatal("the old holder renewed a lease the standby had taken over")
	}
}

// TestLapsedLeaseIsTakenBackIfFree: a holder whose renewal comes after its
// entry expired (deleted here, as the server's expiry does) takes the
// lease again with one Acquire, as nobody else took it.
func TestLapsedLeaseIsTakenBackIfFree(t *testing.T) {
	kv := leaseKV(t)
	ctx := t.Context()
	late := bus.NewLease(kv, "exp", "late")
	if !late.Acquire(ctx) {
		t.Fatal("could not take a free lease")
	}
	if err := kv.Delete(ctx, "exp"); err != nil {
		t.Fatal(err)
	}
	if !late.Acquire(ctx) {
		t.Fatal("the lapsed holder did not take back a lease nobody held")
	}
	if e, err := kv.Get(ctx, "exp"); err != nil || string(e.Value()) != "late" {
		t.Fatalf("the lease entry: %v, %v; want the holder's", e, err)
	}
	other := bus.NewLease(kv, "exp", "other")
	if other.Acquire(ctx) {
		t.Fatal("another holder took a lease that was taken back")
	}
}
