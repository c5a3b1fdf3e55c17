package tune

import (
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/state"
)

// A trial whose GPUs no live runner has is shown PENDING with why, under
// the table, scheduled or not (the runners that could hold it may have
// left); one that fits is not.
func TestStatusTableSaysWhyATrialWaits(t *testing.T) {
	st := state.New("exp")
	st.Status = state.ExperimentRunning
	st.Spec = &events.ExperimentSpec{Name: "exp", Trainable: events.Trainable{Name: "train",
		Resources: map[string]events.ResourceAmount{"gpu": {Config: "gpus"}}}}
	for _, tr := range []*state.Trial{
		{ID: "a_00000", Name: "train_a_00000", Status: events.StatusPending, Config: map[string]any{"gpus": 2.0}},
		{ID: "a_00001", Name: "train_a_00001", Status: events.StatusPending, Config: map[string]any{"gpus": 1.0}},
		{ID: "a_00002", Name: "train_a_00002", Status: events.StatusPending, Config: map[string]any{"gpus": 4.0}, Scheduled: true},
	} {
		st.Trials[tr.ID] = tr
		st.Order = append(st.Order, tr.ID)
	}
	st.Recount()
	totals := []events.Resources{{"cpu": 8, "gpu": 1}, {"cpu": 2}}
	want := "Trial train_a_00000 is PENDING: needs gpu=2; the largest live runner has gpu=1\n" +
		"Trial train_a_00002 is PENDING: needs gpu=4; the largest live runner has gpu=1\n"
	if got := pendingReasons(st, totals); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := pendingReasons(st, nil); got != "" {
		t.Fatalf("with no runner registered: %q, want nothing (runners may come)", got)
	}
	table := &statusTable{verbose: VerboseStatus, totals: totals}
	if got := table.waiting(st); got != want {
		t.Fatalf("the table's lines: %q", got)
	}
}

// An experiment whose next trial waits for its driver's searcher says so
// under the table.
func TestStatusTableSaysTheExperimentWaitsForItsDriver(t *testing.T) {
	st := state.New("exp")
	st.Status = state.ExperimentRunning
	st.NumTrials = 4
	st.Spec = &events.ExperimentSpec{Name: "exp", Trainable: events.Trainable{Name: "train"},
		TuneConfig: events.TuneConfig{NumSamples: 4}, Driver: &events.DriverSpec{Searcher: "MySearcher"}}
	table := &statusTable{verbose: VerboseStatus}
	if got, want := table.waiting(st), "The experiment waits for its driver: the config of trial 0 from MySearcher\n"; got != want {
		t.Fatalf("the table's lines: %q, want %q", got, want)
	}
}
