package runner

import (
	"context"
	"sync"
	"time"
)

// judgeWait bounds how long a report waits for its judgement: a runner
// that missed the controller's word (or whose controller is down) goes
// on, as it would without TuneConfig.WaitForDecisions.
const judgeWait = 10 * time.Second

// judgedMark is how far a waiting attempt's results are judged, as its
// controller announced (bus.AnnounceJudged).
type judgedMark struct {
	mu      sync.Mutex
	upTo    int
	changed chan struct{} // closed and replaced when upTo grows
	late    bool          // a wait ran out already (logged once)
}

func newJudgedMark() *judgedMark { return &judgedMark{changed: make(chan struct{})} }

// set records that the results up to iteration are judged.
func (m *judgedMark) set(iteration int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if iteration > m.upTo {
		m.upTo = iteration
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// wait returns once the result of iteration is judged (true), once ctx
// ends, the attempt stopped or paused (false), or after judgeWait (true;
// first reports whether this is the first wait to run out).
func (m *judgedMark) wait(ctx context.Context, iteration int) (judged, first bool) {
	timer := time.NewTimer(judgeWait)
	defer timer.Stop()
	for {
		m.mu.Lock()
		upTo, changed := m.upTo, m.changed
		m.mu.Unlock()
		if upTo >= iteration {
			return true, false
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false, false
		case <-timer.C:
			m.mu.Lock()
			first, m.late = !m.late, true
			m.mu.Unlock()
			return true, first
		}
	}
}
