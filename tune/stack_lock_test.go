package tune_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/tune"
)

// A second embedded stack on a store another one serves is refused, with
// what to do about it; the store is not touched.
func TestAStackOnAStoreInUseIsRefused(t *testing.T) {
	dir := t.TempDir()
	first, err := tune.StartStack(t.Context(), tune.StackConfig{StoreDir: dir, Slots: 1, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Close() }()
	second, err := tune.StartStack(t.Context(), tune.StackConfig{StoreDir: dir, Slots: 1, Log: zerolog.Nop()})
	if err == nil {
		_ = second.Close()
		t.Fatal("a second stack started on a store in use")
	}
	if !errors.Is(err, bus.ErrStoreInUse) || !strings.Contains(err.Error(), "--store-dir") {
		t.Errorf("error %q; want ErrStoreInUse saying how to give this one its own store", err)
	}
}
