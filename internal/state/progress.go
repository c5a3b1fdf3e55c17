package state

import (
	"math"
	"time"

	"github.com/tunejet/tunejet/events"
)

// Progress is how far an experiment has come: the trials that ended of
// the number its search creates, and when the rest should be done.
type Progress struct {
	// Ended counts the trials TERMINATED or ERROR.
	Ended int
	// Total is the number of trials the search creates (grid points ×
	// num_samples): -1 when it is unbounded (num_samples -1), 0 while it
	// is not known (the experiment has not started).
	Total int
	// ETA is how long the trials not ended yet should take at the rate
	// trials ended since the current run started; 0 when that cannot be
	// told (no trial ended in this run, no total, or nothing to wait for).
	ETA time.Duration
}

// Progress is the experiment's progress at now.
func (e *Experiment) Progress(now time.Time) Progress {
	p := Progress{}
	if e.Run > 0 {
		p.Total = e.NumTrials
	}
	c := e.counts()
	p.Ended = c.status[events.StatusTerminated] + c.status[events.StatusError]
	remaining := p.Total - p.Ended
	if p.Total <= 0 || remaining <= 0 || e.Status != ExperimentRunning || !now.After(e.StartTime) {
		return p
	}
	endedThisRun := 0
	for _, t := range e.Trials {
		if t.Finished() && !t.EndTime.Before(e.StartTime) {
			endedThisRun++
		}
	}
	if endedThisRun == 0 {
		return p
	}
	eta := float64(now.Sub(e.StartTime)) * float64(remaining) / float64(endedThisRun)
	p.ETA = time.Duration(min(eta, math.MaxInt64))
	return p
}
