package state

import (
	"maps"
	"slices"

	"github.com/tunejet/tunejet/events"
)

// tally is what the controller asks of the trials after every batch of
// events: how many are in each status, how many are in flight, which wait
// for a work message. The fold keeps it up to date, so asking costs the
// same at 10 trials as at 10,000; walking every trial once per batch made
// the controller's work over an experiment grow with the square of its
// trials. It is not part of the snapshot: Load and a restored state count
// it afresh (Recount).
type tally struct {
	kept     bool           // false in a state built by hand: answers walk the trials
	trials   int            // trials counted, to notice trials added by hand
	status   map[string]int // trials by status; no zero entries
	inFlight int            // scheduled and not finished
	// waiting, paused and spent are the positions in Order of the trials
	// that wait for a work message (NeedsSchedule), ascending: spent those
	// whose failures since the last restore used up max_failures (they
	// end ERROR instead), paused the PAUSED ones free to resume (after the
	// waiting ones, as Ray runs PENDING trials before PAUSED ones),
	// waiting the others.
	waiting, paused, spent []int
	held                   int // PAUSED until the scheduler resumes them
}

// standing is what the tally knows of one trial.
type standing struct {
	status string
	queue  queue
}

// queue is where a trial stands in the tally besides its status.
type queue int

const (
	queueEnded    queue = iota // finished
	queueInFlight              // scheduled, not finished
	queueWaiting               // waits for a work message
	queueSpent                 // waits for a work message, out of failures
	queuePaused                // PAUSED, waits for a work message to resume
	queueHeld                  // PAUSED until the scheduler resumes it, or to be paused
)

func newTally() tally { return tally{kept: true, status: map[string]int{}} }

// standing is where t stands now.
func (e *Experiment) standing(t *Trial) standing {
	s := standing{status: t.Status}
	switch {
	case t.Finished():
		s.queue = queueEnded
	case t.Scheduled:
		s.queue = queueInFlight
	case e.failureConfig().Exhausted(t.RunFailures()):
		s.queue = queueSpent
	case (t.Status == events.StatusPaused && t.Held) || t.PauseDecision != "" || (t.Exploit != nil && t.Exploit.Driver) || e.asking(t.ID):
		// A trial to be paused (a restore or a lost runner left it PENDING
		// before its pause was requested) waits for its pause, not for work;
		// one whose result waits for the driver's stopper, for the answer.
		s.queue = queueHeld
	case t.Status == events.StatusPaused:
		s.queue = queuePaused
	default:
		s.queue = queueWaiting
	}
	return s
}

func (e *Experiment) failureConfig() events.FailureConfig {
	if e.Spec == nil {
		return events.FailureConfig{}
	}
	return e.Spec.RunConfig.FailureConfig
}

func (c *tally) add(pos int, s standing) {
	c.trials++
	c.status[s.status]++
	switch s.queue {
	case queueInFlight:
		c.inFlight++
	case queueWaiting:
		c.waiting = insertSorted(c.waiting, pos)
	case queueSpent:
		c.spent = insertSorted(c.spent, pos)
	case queuePaused:
		c.paused = insertSorted(c.paused, pos)
	case queueHeld:
		c.held++
	}
}

func (c *tally) remove(pos int, s standing) {
	c.trials--
	if c.status[s.status]--; c.status[s.status] == 0 {
		delete(c.status, s.status)
	}
	switch s.queue {
	case queueInFlight:
		c.inFlight--
	case queueWaiting:
		c.waiting = deleteSorted(c.waiting, pos)
	case queueSpent:
		c.spent = deleteSorted(c.spent, pos)
	case queuePaused:
		c.paused = deleteSorted(c.paused, pos)
	case queueHeld:
		c.held--
	}
}

func insertSorted(s []int, v int) []int {
	i, found := slices.BinarySearch(s, v)
	if found {
		return s
	}
	return slices.Insert(s, i, v)
}

func deleteSorted(s []int, v int) []int {
	i, found := slices.BinarySearch(s, v)
	if !found {
		return s
	}
	return slices.Delete(s, i, i+1)
}

// moved updates the tally after t, which stood at was, may have changed.
// Every change the fold makes to a trial's Status, Scheduled or failures
// goes through here.
func (e *Experiment) moved(t *Trial, was standing) {
	now := e.standing(t)
	if now == was || !e.tally.kept {
		return
	}
	e.tally.remove(t.pos, was)
	e.tally.add(t.pos, now)
}

// count counts the trials afresh, in creation order.
func (e *Experiment) count() tally {
	c := newTally()
	for i, id := range e.Order {
		c.add(i, e.standing(e.Trials[id]))
	}
	return c
}

// Recount counts the trials afresh. The fold keeps the counts behind
// Counts, InFlight, Unfinished and NeedingSchedule up to date; code that
// changes a trial's Status, Scheduled or failures itself, or adds or
// replaces trials, calls Recount before the state is asked again. Load
// and Fold's restored state are recounted.
func (e *Experiment) Recount() {
	for i, id := range e.Order {
		e.Trials[id].pos = i
	}
	e.tally = e.count()
}

// counts is the tally, or one counted now when the state's own is not
// kept (a state built by hand) or has missed trials added by hand.
func (e *Experiment) counts() *tally {
	if e.tally.kept && e.tally.trials == len(e.Order) {
		return &e.tally
	}
	c := e.count()
	return &c
}

// Counts returns the number of trials in each status.
func (e *Experiment) Counts() map[string]int { return maps.Clone(e.counts().status) }

// InFlight counts trials that hold or wait for a runner slot: scheduled and
// not finished.
func (e *Experiment) InFlight() int { return e.counts().inFlight }

// Unfinished counts trials that have not ended.
func (e *Experiment) Unfinished() int {
	c := e.counts()
	return c.inFlight + len(c.waiting) + len(c.paused) + len(c.spent) + c.held
}

// NeedingSchedule returns the trials that wait for a work message
// (NeedsSchedule): in creation order, every one whose failures since the
// last restore used up max_failures and the first room of the others that
// are not PAUSED; then, while room is left, PAUSED ones free to resume.
func (e *Experiment) NeedingSchedule(room int) []*Trial {
	c := e.counts()
	room = max(room, 0)
	waiting := c.waiting[:min(room, len(c.waiting))]
	paused := c.paused[:min(room-len(waiting), len(c.paused))]
	pos := slices.Concat(c.spent, waiting)
	slices.Sort(pos)
	out := make([]*Trial, 0, len(pos)+len(paused))
	for _, p := range slices.Concat(pos, paused) {
		out = append(out, e.Trials[e.Order[p]])
	}
	return out
}
