package state

import (
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
)

func TestProgress(t *testing.T) {
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	// exp is a RUNNING experiment of total trials started at start, with
	// a trial for each end time given (zero: still running).
	exp := func(run, total int, ends ...time.Time) *Experiment {
		e := New("exp")
		e.Status, e.Run, e.NumTrials, e.StartTime = ExperimentRunning, run, total, start
		for i, end := range ends {
			id := string(rune('a' + i))
			tr := &Trial{ID: id, Status: events.StatusRunning}
			if !end.IsZero() {
				tr.Status, tr.EndTime = events.StatusTerminated, end
			}
			e.Trials[id], e.Order = tr, append(e.Order, id)
		}
		e.Recount()
		return e
	}
	at := func(d time.Duration) time.Time { return start.Add(d) }
	completed := exp(1, 2, at(time.Second), at(2*time.Second))
	completed.Status = ExperimentCompleted
	errored := exp(1, 4, at(10*time.Second), time.Time{})
	errored.Trials["a"].Status = events.StatusError
	tests := []struct {
		name string
		e    *Experiment
		now  time.Time
		want Progress
	}{
		{"not started: the total is not known", exp(0, -1), at(time.Minute), Progress{}},
		{"1 of 4 ended in 10 s: 30 s to go", exp(1, 4, at(10*time.Second), time.Time{}), at(10 * time.Second), Progress{Ended: 1, Total: 4, ETA: 30 * time.Second}},
		{"an errored trial has ended", errored, at(20 * time.Second), Progress{Ended: 1, Total: 4, ETA: 60 * time.Second}},
		{"none ended: no rate yet", exp(1, 4, time.Time{}), at(time.Minute), Progress{Total: 4}},
		{"unbounded", exp(1, -1, at(time.Second)), at(time.Minute), Progress{Ended: 1, Total: -1}},
		{"restored: trials ended in an earlier run count as ended, not in the rate", exp(2, 4, at(-time.Hour), at(-time.Hour), at(5*time.Second)), at(10 * time.Second), Progress{Ended: 3, Total: 4, ETA: 10 * time.Second}},
		{"completed: nothing to wait for", completed, at(time.Hour), Progress{Ended: 2, Total: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.Progress(tt.now); got != tt.want {
				t.Errorf("Progress = %+v, want %+v", got, tt.want)
			}
		})
	}
}
