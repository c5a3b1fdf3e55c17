package state

import (
	"testing"

	"github.com/tunejet/tunejet/events"
)

// schedule adds work for trial id that counts attempts on from base, and
// returns its log sequence.
func (l *log) schedule(id string, base int) uint64 {
	return l.add(events.WriterController, &events.TrialScheduled{TrialID: id, TrialName: "fn_" + id, DirName: "fn_" + id,
		Config: map[string]any{}, Trainable: events.Trainable{Name: "fn"}, AttemptBase: base, HeartbeatTimeoutS: 3}).Seq
}

func (l *log) handBack(id string, attempt int, work uint64) {
	l.add(events.WriterRunner, &events.TrialReturned{TrialID: id, Attempt: attempt, WorkSeq: work, Runner: "cpu", Reason: "needs gpu=1; runner cpu has gpu=0"})
}

// A runner that hands back the trial's current work, which it cannot hold,
// spends no attempt: the trial is PENDING and unscheduled, with no failure
// counted, and the work scheduled next starts in attempt 1.
func TestAHandBackCostsNoAttempt(t *testing.T) {
	l := newLog(t)
	l.create("a", 0)
	work := l.evs[len(l.evs)-1].Seq
	l.handBack("a", 1, work)
	tr := fold(l.evs).Trials["a"]
	if tr.Status != events.StatusPending || tr.Scheduled || !tr.NeedsSchedule() || tr.Attempt != 0 || tr.NumFailures != 0 || tr.LastError != "" {
		t.Fatalf("after the hand-back: %s scheduled %v attempt %d failures %d (%q); want PENDING, waiting to be scheduled, no attempt or failure",
			tr.Status, tr.Scheduled, tr.Attempt, tr.NumFailures, tr.LastError)
	}
	again := l.schedule("a", 0)
	l.handBack("a", 1, work) // the same hand-back, delivered again
	if tr := fold(l.evs).Trials["a"]; !tr.Scheduled || tr.WorkSeq != again {
		t.Fatalf("a hand-back of the earlier work unscheduled the new work (scheduled %v, work %d, want %d)", tr.Scheduled, tr.WorkSeq, again)
	}
	l.add(events.WriterRunner, &events.TrialStarted{TrialID: "a", Attempt: 1, Runner: "gpu", WorkSeq: again})
	l.add(events.WriterRunner, &events.TrialCompleted{TrialID: "a", Attempt: 1, Status: events.StatusTerminated, Reason: "finished"})
	if tr := fold(l.evs).Trials["a"]; tr.Status != events.StatusTerminated || tr.Attempt != 1 || tr.NumFailures != 0 {
		t.Fatalf("the new work: %s after attempt %d with %d failures; want TERMINATED after attempt 1, none", tr.Status, tr.Attempt, tr.NumFailures)
	}
}

// Hand-backs that do not speak for the trial's current, unstarted delivery
// change nothing: of earlier work, of work no longer scheduled, by an
// attempt that already started, from a writer other than a runner, or of
// a trial that ended.
func TestAStaleHandBackChangesNothing(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(l *log)
	}{
		{"earlier work", func(l *log) {
			l.create("a", 0)
			old := l.evs[len(l.evs)-1].Seq
			l.restore(2)
			l.schedule("a", 0)
			l.handBack("a", 1, old)
		}},
		{"no work named", func(l *log) {
			l.create("a", 0)
			l.handBack("a", 1, 0)
		}},
		{"an attempt that started", func(l *log) {
			l.create("a", 0)
			work := l.evs[len(l.evs)-1].Seq
			l.add(events.WriterRunner, &events.TrialStarted{TrialID: "a", Attempt: 1, Runner: "gpu", WorkSeq: work})
			l.handBack("a", 1, work)
		}},
		{"an ended trial", func(l *log) {
			l.create("a", 0)
			work := l.evs[len(l.evs)-1].Seq
			l.add(events.WriterController, &events.TrialStopRequested{TrialID: "a", Reason: "stopped"})
			l.handBack("a", 1, work)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLog(t)
			c.build(l)
			before := foldWith(l.evs[:len(l.evs)-1], l.load).Trials["a"]
			after := foldWith(l.evs, l.load).Trials["a"]
			if after.Status != before.Status || after.Scheduled != before.Scheduled || after.NumFailures != before.NumFailures || after.Attempt != before.Attempt {
				t.Fatalf("the hand-back changed the trial: %s scheduled %v attempt %d failures %d, was %s %v %d %d",
					after.Status, after.Scheduled, after.Attempt, after.NumFailures, before.Status, before.Scheduled, before.Attempt, before.NumFailures)
			}
		})
	}
}

// A later delivery of running work handed back means the running attempt
// was lost (its work was handed out again): that attempt counts as failed,
// as a later start would count it, and the trial waits to be scheduled.
// A trial whose pause was requested before its work was handed back is
// PAUSED: no runner holds it to pause it.
func TestAHandBackOfWorkHandedOutAgain(t *testing.T) {
	l := newLog(t)
	l.create("a", 0)
	work := l.evs[len(l.evs)-1].Seq
	l.add(events.WriterRunner, &events.TrialStarted{TrialID: "a", Attempt: 1, Runner: "gpu", WorkSeq: work})
	l.handBack("a", 2, work)
	tr := fold(l.evs).Trials["a"]
	if tr.Status != events.StatusPending || tr.Scheduled || tr.NumFailures != 1 || tr.Attempt != 1 {
		t.Fatalf("%s scheduled %v attempt %d failures %d; want PENDING, unscheduled, attempt 1 lost", tr.Status, tr.Scheduled, tr.Attempt, tr.NumFailures)
	}

	l = newLog(t)
	l.create("b", 0)
	work = l.evs[len(l.evs)-1].Seq
	l.add(events.WriterController, &events.TrialStopRequested{TrialID: "b", Reason: "paused", Pause: true})
	l.handBack("b", 1, work)
	if tr := fold(l.evs).Trials["b"]; tr.Status != events.StatusPaused || tr.Scheduled || tr.PauseRequested {
		t.Fatalf("a pause requested, then the work handed back: %s scheduled %v pause requested %v; want PAUSED", tr.Status, tr.Scheduled, tr.PauseRequested)
	}
}
