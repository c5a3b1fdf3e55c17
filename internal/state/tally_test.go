package state

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
)

// TestTallyMatchesARecount folds random event sequences — trials created,
// scheduled, started, handed back, failing (counted or not, final or
// not), stopped, completed by their runner or the controller, stale and
// repeated events, restores that resume, skip and restart trials — and
// after every event checks that the counts the fold keeps are what
// walking every trial gives.
func TestTallyMatchesARecount(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for run := range 100 {
		g := &tallyGen{t: t, r: r, e: New("exp")}
		g.fold(events.WriterClient, &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
			Name: "exp", Trainable: events.Trainable{Name: "fn"},
			RunConfig: events.RunConfig{FailureConfig: events.FailureConfig{MaxFailures: r.IntN(4) - 1}},
		}})
		g.fold(events.WriterController, &events.ExperimentStarted{Run: 1, TrialIDPrefix: "abcde", NumTrials: -1})
		for step := range 200 {
			what := g.step()
			if err := checkTally(g.e); err != nil {
				t.Fatalf("run %d step %d, after %s: %v", run, step, what, err)
			}
		}
	}
}

// tallyGen makes random events for TestTallyMatchesARecount.
type tallyGen struct {
	t    *testing.T
	r    *rand.Rand
	e    *Experiment
	seq  uint64
	last *events.Event
	run  int
}

func (g *tallyGen) fold(w events.Writer, p events.Payload) {
	g.seq++
	ev := events.New("exp", w, "test", p)
	ev.Seq = g.seq
	g.apply(ev)
}

func (g *tallyGen) apply(ev *events.Event) {
	e, _, err := Fold(context.Background(), g.e, ev, g.restored)
	if err != nil {
		g.t.Fatal(err)
	}
	g.e, g.last = e, ev
}

// restored is the loader: the state folded so far, changed by hand as a
// restore changes it (each unfinished trial resumed, skipped or replaced
// by a new one), and not recounted.
func (g *tallyGen) restored(context.Context, *events.ExperimentRestored) (*Experiment, error) {
	data, err := g.e.Snapshot()
	if err != nil {
		return nil, err
	}
	st, err := Load(data)
	if err != nil {
		return nil, err
	}
	for i, id := range st.Order {
		tr := st.Trials[id]
		switch g.r.IntN(3) {
		case 0:
			tr.Status, tr.Scheduled, tr.StopRequested, tr.FailuresAtRestore = events.StatusPending, false, false, tr.NumFailures
		case 1:
			if !tr.Finished() {
				tr.Status = events.StatusTerminated
			}
		case 2:
			nt := &Trial{ID: fmt.Sprintf("new%d_%d", g.seq, i), Index: tr.Index, Status: events.StatusPending}
			delete(st.Trials, id)
			st.Trials[nt.ID], st.Order[i] = nt, nt.ID
		}
	}
	st.Status = ExperimentPending
	return st, nil
}

// step folds one random event and says which.
func (g *tallyGen) step() string {
	r := g.r
	if len(g.e.Order) == 0 || r.IntN(8) == 0 {
		i := g.e.NextIndex
		if r.IntN(10) == 0 && i > 0 {
			i-- // created again
		}
		id := fmt.Sprintf("abcde_%05d", i)
		g.fold(events.WriterController, &events.TrialCreated{TrialID: id, Index: i, TrialName: "fn_" + id, DirName: "fn_" + id})
		return "trial.created " + id
	}
	tr := g.e.Trials[g.e.Order[r.IntN(len(g.e.Order))]]
	attempt := tr.Attempt + r.IntN(3) - 1 // mostly the current attempt or the next
	switch r.IntN(14) {
	case 0:
		g.fold(events.WriterController, &events.TrialScheduled{TrialID: tr.ID, AttemptBase: tr.Attempt + r.IntN(2)})
	case 1, 2:
		g.fold(events.WriterRunner, &events.TrialStarted{TrialID: tr.ID, Attempt: attempt, Runner: "r1"})
	case 3:
		g.fold(events.WriterRunner, &events.TrialReported{TrialID: tr.ID, Attempt: attempt, Result: map[string]any{"training_iteration": float64(tr.Iteration + 1)}})
	case 4, 5:
		causes := []string{events.CauseError, events.CauseLost, events.CausePreempted}
		w := []events.Writer{events.WriterRunner, events.WriterController}[r.IntN(2)]
		g.fold(w, &events.TrialFailed{TrialID: tr.ID, Attempt: attempt, Cause: causes[r.IntN(3)], Error: "x", Final: r.IntN(4) == 0, Counted: r.IntN(2) == 0})
	case 6:
		g.fold(events.WriterController, &events.TrialStopRequested{TrialID: tr.ID, Reason: "stopped"})
	case 7:
		g.fold(events.WriterRunner, &events.TrialCompleted{TrialID: tr.ID, Attempt: attempt, Status: events.StatusTerminated, Reason: "finished"})
	case 8:
		g.fold(events.WriterController, &events.TrialCompleted{TrialID: tr.ID, Status: events.StatusError, Reason: "max_failures"})
	case 9:
		if g.last != nil { // delivered again
			g.apply(g.last)
		}
		return "a repeat"
	case 10:
		if r.IntN(4) > 0 {
			return "nothing"
		}
		g.run++
		g.fold(events.WriterRestorer, &events.ExperimentRestored{Source: "log", Object: fmt.Sprint("restored/", g.seq)})
		g.fold(events.WriterController, &events.ExperimentStarted{Run: g.run + 1, TrialIDPrefix: "abcde", NumTrials: -1})
		return "a restore"
	case 11:
		g.fold(events.WriterRunner, &events.TrialFailed{TrialID: tr.ID, Attempt: attempt, Cause: events.CausePreempted, Error: "preempted", Counted: r.IntN(2) == 0})
	case 12:
		g.fold(events.WriterController, &events.TrialStopRequested{TrialID: tr.ID, Reason: "paused", Pause: true})
	case 13:
		g.fold(events.WriterRunner, &events.TrialPaused{TrialID: tr.ID, Attempt: attempt, Reason: "paused"})
	}
	return g.last.Type() + " " + tr.ID
}

// checkTally compares what the fold kept with a walk over every trial.
func checkTally(e *Experiment) error {
	if c := e.counts(); c != &e.tally {
		return fmt.Errorf("the fold's tally is not kept (kept %v, %d trials counted of %d)", e.tally.kept, e.tally.trials, len(e.Order))
	}
	counts, inFlight, unfinished := map[string]int{}, 0, 0
	var spentOnes, waitingOnes, pausedOnes []string
	fc := e.Spec.RunConfig.FailureConfig
	for _, t := range e.TrialList() {
		counts[t.Status]++
		if t.Scheduled && !t.Finished() {
			inFlight++
		}
		if !t.Finished() {
			unfinished++
		}
		switch {
		case !t.NeedsSchedule():
		case fc.Exhausted(t.RunFailures()):
			spentOnes = append(spentOnes, t.ID)
		case t.Status == events.StatusPaused:
			pausedOnes = append(pausedOnes, t.ID)
		default:
			waitingOnes = append(waitingOnes, t.ID)
		}
	}
	if diff := cmp.Diff(counts, e.Counts()); diff != "" {
		return fmt.Errorf("Counts (-recount +kept):\n%s", diff)
	}
	if e.InFlight() != inFlight || e.Unfinished() != unfinished {
		return fmt.Errorf("%d in flight, %d unfinished; a recount says %d, %d", e.InFlight(), e.Unfinished(), inFlight, unfinished)
	}
	for _, room := range []int{0, 1, len(waitingOnes) / 2, len(waitingOnes) + 1, len(waitingOnes) + len(pausedOnes)} {
		waiting := waitingOnes[:min(room, len(waitingOnes))]
		want := slices.Concat(spentOnes, waiting)
		slices.SortFunc(want, func(a, b string) int { return slices.Index(e.Order, a) - slices.Index(e.Order, b) })
		want = append(want, pausedOnes[:min(room-len(waiting), len(pausedOnes))]...)
		var got []string
		for _, t := range e.NeedingSchedule(room) {
			got = append(got, t.ID)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("NeedingSchedule(%d) (-recount +kept):\n%s", room, diff)
		}
	}
	for i, id := range e.Order {
		if p := e.Trials[id].pos; p != i {
			return fmt.Errorf("trial %s is at %d in Order, its tally position says %d", id, i, p)
		}
	}
	return nil
}
