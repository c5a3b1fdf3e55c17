package bus_test

import (
	"testing"

	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// TestDriverCursorIsKeptAndForgotten: an experiment's driver cursor reads
// 0 until set, then what was last set, per experiment; Forget deletes it,
// and says so.
func TestDriverCursorIsKeptAndForgotten(t *testing.T) {
	ctx := t.Context()
	b := bustest.Start(t).Bus("test")
	if seq, err := b.DriverCursor(ctx, "e1"); err != nil || seq != 0 {
		t.Fatalf("DriverCursor before any ack = %d, %v; want 0", seq, err)
	}
	for _, seq := range []uint64{7, 12} {
		if err := b.SetDriverCursor(ctx, "e1", seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SetDriverCursor(ctx, "e2", 3); err != nil {
		t.Fatal(err)
	}
	if seq, err := b.DriverCursor(ctx, "e1"); err != nil || seq != 12 {
		t.Fatalf("DriverCursor(e1) = %d, %v; want 12", seq, err)
	}
	f, err := b.Forget(ctx, "e1")
	if err != nil {
		t.Fatal(err)
	}
	if !f.DriverCursor {
		t.Errorf("Forget(e1) = %+v: says it deleted no driver cursor", f)
	}
	if seq, err := b.DriverCursor(ctx, "e1"); err != nil || seq != 0 {
		t.Fatalf("DriverCursor(e1) after Forget = %d, %v; want 0", seq, err)
	}
	if seq, err := b.DriverCursor(ctx, "e2"); err != nil || seq != 3 {
		t.Fatalf("DriverCursor(e2) after forgetting e1 = %d, %v; want 3 (untouched)", seq, err)
	}
}
