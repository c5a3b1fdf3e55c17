// Package statetest folds experiments' logs for tests.
package statetest

import (
	"testing"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/state"
)

// FoldLog folds an experiment's whole log as every reader does (a
// restore's staged state loaded from the Object Store), and fails the test
// on an error.
func FoldLog(t testing.TB, b *bus.Bus, exp string) *state.Experiment {
	t.Helper()
	st := state.New(exp)
	for _, ev := range bustest.Log(t, b, exp) {
		var err error
		if st, _, err = state.Fold(t.Context(), st, ev, restorestate.Loader(b, exp)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}
