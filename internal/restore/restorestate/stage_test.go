package restorestate

import (
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/state"
)

// A restore killed before its run started leaves experiment.restored
// naming its staged state; the next restore stages the same run number
// again. Both states stay readable: readers of the log meet the first
// event before the second.
func TestTwoRestoresOfOneRunKeepTheirStates(t *testing.T) {
	b := bustest.Start(t).Bus("restorer")
	first, second := state.New("exp"), state.New("exp")
	first.NextIndex, second.NextIndex = 3, 5
	var refs []*events.ExperimentRestored
	for _, st := range []*state.Experiment{first, second} {
		object, digest, err := Stage(t.Context(), b, st, 2)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, &events.ExperimentRestored{Object: object, Digest: digest})
	}
	if refs[0].Object == refs[1].Object {
		t.Fatalf("both restores staged %s", refs[0].Object)
	}
	for i, want := range []int{3, 5} {
		got, err := Load(t.Context(), b, "exp", refs[i])
		if err != nil {
			t.Fatalf("restore %d: %v", i+1, err)
		}
		if got.NextIndex != want {
			t.Fatalf("restore %d loaded next_index %d, want %d", i+1, got.NextIndex, want)
		}
	}
}
