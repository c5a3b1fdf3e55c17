package restore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/state"
)

func TestFromFlagsAsRay(t *testing.T) {
	tests := []struct {
		unfinished, errored, restart bool
		want                         events.ResumeConfig
	}{
		{true, false, false, events.ResumeConfig{Finished: Skip, Unfinished: Resume, Errored: Skip}},
		{false, false, false, events.ResumeConfig{Finished: Skip, Unfinished: Skip, Errored: Skip}},
		{true, true, false, events.ResumeConfig{Finished: Skip, Unfinished: Resume, Errored: Resume}},
		{true, false, true, events.ResumeConfig{Finished: Skip, Unfinished: Resume, Errored: Restart}},
		{true, true, true, events.ResumeConfig{Finished: Skip, Unfinished: Resume, Errored: Resume}}, // resume_errored wins
	}
	for _, tc := range tests {
		if got := FromFlags(tc.unfinished, tc.errored, tc.restart); got != tc.want {
			t.Errorf("FromFlags(%v, %v, %v) = %+v, want %+v", tc.unfinished, tc.errored, tc.restart, got, tc.want)
		}
	}
}

// crashed is an experiment that stopped with one trial in each status.
func crashed() *state.Experiment {
	st := state.New("exp")
	st.Spec = &events.ExperimentSpec{Name: "exp", Trainable: events.Trainable{Name: "fn"}}
	st.Status = state.ExperimentInterrupted
	for i, status := range []string{events.StatusTerminated, events.StatusRunning, events.StatusPending, events.StatusError} {
		id := []string{"done", "running", "pending", "failed"}[i]
		t := &state.Trial{ID: id, Name: "fn_" + id, DirName: "fn_" + id, Config: map[string]any{"i": float64(i)}, Status: status, Scheduled: true, Attempt: 1}
		if status == events.StatusError {
			t.NumFailures = 3
		}
		st.Trials[id] = t
		st.Order = append(st.Order, id)
	}
	return st
}

func restart(old *state.Trial) *state.Trial { return NewTrial(old, "n3w1d000", "fn", "fn_new") }

func TestApplyResumeTable(t *testing.T) {
	tests := []struct {
		name string
		cfg  events.ResumeConfig
		want map[string]string // trial id -> status after the restore
	}{
		{"defaults: unfinished resume, errored stays", FromFlags(true, false, false), map[string]string{
			"done": events.StatusTerminated, "running": events.StatusPending, "pending": events.StatusPending, "failed": events.StatusError}},
		{"resume_unfinished=false ends them TERMINATED", FromFlags(false, true, false), map[string]string{
			"done": events.StatusTerminated, "running": events.StatusTerminated, "pending": events.StatusTerminated, "failed": events.StatusPending}},
		{"restart_errored replaces the trial", FromFlags(true, false, true), map[string]string{
			"done": events.StatusTerminated, "running": events.StatusPending, "pending": events.StatusPending, "n3w1d000": events.StatusPending}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := crashed()
			got, err := Apply(before, tc.cfg, restart)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != state.ExperimentPending {
				t.Errorf("experiment status %s, want PENDING (a controller starts the next run)", got.Status)
			}
			if len(got.Trials) != len(tc.want) {
				t.Fatalf("%d trials, want %d: %v", len(got.Trials), len(tc.want), got.Order)
			}
			for id, status := range tc.want {
				tr := got.Trials[id]
				if tr == nil || tr.Status != status {
					t.Errorf("trial %s: %+v, want %s", id, tr, status)
				}
				if status == events.StatusPending && tr.Scheduled {
					t.Errorf("trial %s resumes but is still marked scheduled", id)
				}
			}
		})
	}
}

func TestApplyRefusesAnUnknownResumeTypeBeforeChangingAnything(t *testing.T) {
	st := crashed()
	cfg := FromFlags(true, false, false)
	cfg.Errored = "rerun"
	if _, err := Apply(st, cfg, restart); err == nil || !strings.Contains(err.Error(), `"rerun"`) {
		t.Fatalf("Apply with resume type rerun: %v, want an error naming it", err)
	}
	if st.Trials["running"].Status != events.StatusRunning || st.Status != state.ExperimentInterrupted {
		t.Errorf("a refused Apply changed the state: experiment %s, running trial %s", st.Status, st.Trials["running"].Status)
	}
}

func TestResumedErroredTrialKeepsItsTotalWithAFreshBudget(t *testing.T) {
	got, err := Apply(crashed(), FromFlags(true, true, false), restart)
	if err != nil {
		t.Fatal(err)
	}
	tr := got.Trials["failed"]
	if tr.NumFailures != 3 || tr.RunFailures() != 0 || tr.ID != "failed" {
		t.Fatalf("resumed errored trial: id %s, %d failures in total, %d this run; want the same id, 3, 0", tr.ID, tr.NumFailures, tr.RunFailures())
	}
}

func TestRestartedTrialStartsFresh(t *testing.T) {
	got, err := Apply(crashed(), FromFlags(true, false, true), restart)
	if err != nil {
		t.Fatal(err)
	}
	tr := got.Trials["n3w1d000"]
	if tr.NumFailures != 0 || tr.Attempt != 0 || tr.Config["i"] != 3.0 || got.Order[3] != "n3w1d000" {
		t.Fatalf("restarted trial %+v at order %v; want fresh, same config, in the old one's place", tr, got.Order)
	}
}

func TestChecksAsRay(t *testing.T) {
	if err := CheckTrainable(events.Trainable{Name: "a"}, events.Trainable{Name: "b"}); err == nil {
		t.Error("another trainable name was accepted")
	}
	if err := CheckTrainable(events.Trainable{Command: []string{"python3", "a.py"}}, events.Trainable{Command: []string{"python3", "a.py"}}); err != nil {
		t.Errorf("the same command was refused: %v", err)
	}
	if err := CheckParamSpace(map[string]any{"a": 1, "b": map[string]any{"c": 2}}, map[string]any{"a": 5, "b": map[string]any{"c": 9}}); err != nil {
		t.Errorf("same keys, other values refused: %v", err)
	}
	if err := CheckParamSpace(map[string]any{"a": 1}, map[string]any{"a": 1, "z": 2}); err == nil {
		t.Error("a new key was accepted")
	}
	broken := map[string]any{"a": map[string]any{"uniform": []any{1, 0}}}
	want := "param_space.a: uniform: low (1) must be <= high (0)"
	if err := CheckParamSpace(map[string]any{"a": 1}, broken); err == nil || err.Error() != want {
		t.Errorf("a broken space: %v, want %q", err, want)
	}
}

// Apply changes trials outside the fold; the state it returns counts them
// as they now are.
func TestApplyRecounts(t *testing.T) {
	st := state.New("exp")
	for i, status := range []string{events.StatusRunning, events.StatusError, events.StatusTerminated} {
		id := fmt.Sprintf("t%d", i)
		st.Trials[id] = &state.Trial{ID: id, Status: status, Scheduled: true, Attempt: 1}
		st.Order = append(st.Order, id)
	}
	st.Recount()
	got, err := Apply(st, events.ResumeConfig{Finished: Skip, Unfinished: Resume, Errored: Resume}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Counts(); c[events.StatusPending] != 2 || c[events.StatusTerminated] != 1 || c[events.StatusRunning] != 0 || c[events.StatusError] != 0 {
		t.Fatalf("counts %v after resuming the running and errored trials, want 2 PENDING, 1 TERMINATED", c)
	}
	if got.InFlight() != 0 {
		t.Fatalf("%d in flight after a restore, want 0", got.InFlight())
	}
}

// A restore keeps a PAUSED trial paused: one free to resume is scheduled
// again when a slot is free, one HyperBand holds waits for its resume; a
// pause decided and not carried out is requested again (the request is
// cleared, the decision kept).
func TestApplyKeepsPausedTrialsPaused(t *testing.T) {
	st := state.New("exp")
	for _, tr := range []*state.Trial{
		{ID: "free", Status: events.StatusPaused},
		{ID: "held", Status: events.StatusPaused, Held: true},
		{ID: "pausing", Status: events.StatusRunning, Scheduled: true, Attempt: 2, PauseDecision: "scheduler: paused", PauseRequested: true},
	} {
		st.Trials[tr.ID] = tr
		st.Order = append(st.Order, tr.ID)
	}
	st.Recount()
	got, err := Apply(st, FromFlags(true, false, false), restart)
	if err != nil {
		t.Fatal(err)
	}
	free, held, pausing := got.Trials["free"], got.Trials["held"], got.Trials["pausing"]
	if free.Status != events.StatusPaused || held.Status != events.StatusPaused || !held.Held {
		t.Errorf("free %s, held %s (held %v); want both PAUSED, held still held", free.Status, held.Status, held.Held)
	}
	if pausing.Status != events.StatusPending || pausing.PauseRequested || pausing.PauseDecision == "" {
		t.Errorf("pausing: %s, requested %v, decision %q; want PENDING with its decision, to be requested again",
			pausing.Status, pausing.PauseRequested, pausing.PauseDecision)
	}
	var ids []string
	for _, tr := range got.NeedingSchedule(10) {
		ids = append(ids, tr.ID)
	}
	if fmt.Sprint(ids) != "[free]" {
		t.Errorf("needing schedule %v, want [free]: the pausing trial waits for its pause", ids)
	}
	if got.Unfinished() != 3 {
		t.Errorf("%d unfinished, want 3", got.Unfinished())
	}
}

// A resumed trial's work must not tell its runner the history is known:
// the restored run may be on another log, whose sequences say nothing of
// the old one's. Its first attempt reads the history.
func TestAResumedTrialForgetsItsLastRunnerEvent(t *testing.T) {
	st := crashed()
	for _, tr := range st.Trials {
		tr.RunnerSeq = 42
	}
	got, err := Apply(st, FromFlags(true, true, false), restart)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"running", "failed"} {
		if tr := got.Trials[id]; tr.RunnerSeq != 0 {
			t.Errorf("resumed trial %s keeps RunnerSeq %d, want 0", id, tr.RunnerSeq)
		}
	}
}
