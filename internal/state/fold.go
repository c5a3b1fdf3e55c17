package state

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tunejet/tunejet/events"
)

// apply folds one event, any but experiment.restored (Fold's), into the
// state and reports whether it changed anything. Events of other
// experiments, duplicates and fenced-off events change nothing. It never
// fails: the events were validated on decode.
func (e *Experiment) apply(ev *events.Event) bool {
	if ev.Experiment != e.Name {
		return false
	}
	if ev.Seq > e.LastSeq {
		e.LastSeq, e.LastEventID = ev.Seq, ev.ID
	}
	if _, start := ev.Data.(*events.ExperimentStarted); !start && ev.Time.After(e.LastEventTime) {
		e.LastEventTime = ev.Time
	}
	switch p := ev.Data.(type) {
	case *events.ExperimentSubmitted:
		return e.submitted(ev.Seq, p)
	case *events.ExperimentStarted:
		return e.started(ev, p)
	case *events.ExperimentStopRequested:
		return e.stopRequested(p.Reason)
	case *events.ExperimentInterrupted:
		return e.interrupted(p)
	case *events.ExperimentCompleted:
		return e.completed(ev, p)
	case *events.DriverAnswered:
		return e.driverAnswered(p)
	case *events.TrialCreated:
		if !e.trialCreated(p) {
			return false
		}
		e.tuneAdd(e.Trials[p.TrialID])
		return true
	}
	t := e.Trials[events.TrialOf(ev.Data)]
	if t == nil {
		return false
	}
	if ev.Writer == events.WriterRunner && ev.Seq != 0 {
		t.RunnerSeq = ev.Seq // the log's order: the newest so far
	}
	defer e.moved(t, e.standing(t)) // the tally follows whatever the event changes in the trial
	finished := t.Finished()
	changed := e.applyTrial(t, ev)
	if changed && !finished && t.Finished() {
		e.tuneEnded(t, ev)
	}
	return changed
}

// applyTrial applies an event about one trial.
func (e *Experiment) applyTrial(t *Trial, ev *events.Event) bool {
	switch p := ev.Data.(type) {
	case *events.TrialScheduled:
		return e.scheduled(t, ev, p)
	case *events.TrialStarted:
		paused := t.Status == events.StatusPaused
		if !t.started(ev, p) {
			return false
		}
		if paused {
			e.tuneResumed(t)
		}
		return true
	case *events.TrialReported:
		return e.reported(t, ev, p)
	case *events.TrialDecided:
		return e.published(p)
	case *events.TrialCheckpointed:
		results := t.NumResults
		changed := t.checkpointed(ev, p, e.checkpointConfig(), e.pinned(t.ID))
		if changed && t.ResumeFrom != nil { // its own checkpoint: retries resume from it now
			t.ResumeFrom = nil
			e.exploiting(t)
		}
		if t.NumResults > results { // the checkpoint's result is the trial's next
			e.checkMetrics(p.Checkpoint.Metrics)
			e.tuneResult(t, ev, p.Checkpoint.Metrics)
		}
		return changed
	case *events.TrialArtifacts:
		return t.artifacts(p)
	case *events.CheckpointPersisted:
		return t.persisted(p)
	case *events.CheckpointDeleted:
		return t.deleted(p)
	case *events.TrialFailed:
		return t.failed(ev, p)
	case *events.TrialStopRequested:
		if ev.Writer == events.WriterClient {
			return t.userStop()
		}
		if p.Pause {
			return e.pauseRequested(t, p)
		}
		return t.stopRequested(ev, p)
	case *events.TrialPaused:
		return e.paused(t, ev, p)
	case *events.TrialReturned:
		return e.returned(t, ev, p)
	case *events.TrialCompleted:
		if ev.Writer == events.WriterRunner && t.current(p.Attempt) && t.pausing() && !t.StopRequested {
			// It ended on its own (a stop criterion, or done) after it was
			// asked to pause: its results since do not count, so neither
			// does the end. It is paused, and resumes to end again.
			e.pause(t)
			return true
		}
		return t.completed(ev, p)
	}
	return false
}

func (e *Experiment) submitted(seq uint64, p *events.ExperimentSubmitted) bool {
	if e.Spec != nil {
		return false
	}
	spec := p.Spec
	e.Spec, e.SubmittedSeq = &spec, seq
	e.settings, e.settingsErr = nil, nil
	e.Status = ExperimentPending
	if len(e.Order) > 0 { // max_failures, which says which trials are out of failures, was unknown
		e.Recount()
	}
	return true
}

func (e *Experiment) started(ev *events.Event, p *events.ExperimentStarted) bool {
	if p.Run <= e.Run || e.Status != ExperimentPending {
		return false
	}
	if !e.StartTime.IsZero() && e.LastEventTime.After(e.StartTime) {
		e.RanBefore += e.LastEventTime.Sub(e.StartTime) // the previous run, to its last event
	}
	e.Run, e.Session, e.Seed = p.Run, p.Session, p.Seed
	e.TrialIDPrefix, e.NumTrials, e.StoragePath = p.TrialIDPrefix, p.NumTrials, p.StoragePath
	e.StartTime, e.LastEventTime = ev.Time, ev.Time
	e.Status = ExperimentRunning
	e.StopRequested, e.StopReason = false, ""
	e.MetricError = "" // a restored run is checked afresh
	return true
}

func (e *Experiment) stopRequested(reason string) bool {
	if e.StopRequested || e.Status == ExperimentCompleted {
		return false
	}
	e.StopRequested, e.StopReason = true, reason
	return true
}

func (e *Experiment) interrupted(p *events.ExperimentInterrupted) bool {
	if e.Status != ExperimentRunning {
		return false
	}
	e.Status = ExperimentInterrupted
	e.EndReason = p.Reason
	return true
}

func (e *Experiment) completed(ev *events.Event, p *events.ExperimentCompleted) bool {
	if e.Status == ExperimentCompleted {
		return false
	}
	e.Status, e.EndReason, e.Error, e.EndTime = ExperimentCompleted, p.Reason, p.Error, ev.Time
	return true
}

func (e *Experiment) trialCreated(p *events.TrialCreated) bool {
	if _, ok := e.Trials[p.TrialID]; ok {
		return false
	}
	t := &Trial{
		ID: p.TrialID, Index: p.Index, Name: p.TrialName, Tag: p.ExperimentTag,
		DirName: p.DirName, Config: p.Config, Status: events.StatusPending, pos: len(e.Order),
	}
	e.Trials[p.TrialID] = t
	e.Order = append(e.Order, p.TrialID)
	if e.tally.kept {
		e.tally.add(t.pos, e.standing(t))
	}
	if p.Index >= e.NextIndex {
		e.NextIndex = p.Index + 1
	}
	if e.Suggested != nil && e.Suggested.Index < e.NextIndex {
		e.Suggested = nil
	}
	return true
}

// driverAnswered folds an answer of the experiment's driver: a stop
// answer is judged (driverStop); a suggestion, or the sample_from values,
// become the config of trial NextIndex, and Searcher.FINISHED ends the
// search there.
func (e *Experiment) driverAnswered(p *events.DriverAnswered) bool {
	if p.Method == events.DriverStop || p.Method == events.DriverExplore {
		return e.driverStop(p)
	}
	if p.Index == nil || *p.Index != e.NextIndex || e.Spec == nil || e.Spec.Driver == nil {
		return false
	}
	if p.Answer.Finished {
		if e.NumTrials < 0 || *p.Index < e.NumTrials {
			e.NumTrials = *p.Index
		}
		return true
	}
	e.Suggested = &Suggested{Index: *p.Index, Config: p.Answer.Config, Seq: p.Through}
	return true
}

// scheduled takes the trial's new work. The work of a PBT exploit gives
// the trial its new config and the donor's checkpoint to resume from;
// training goes on from the donor's iteration.
func (e *Experiment) scheduled(t *Trial, ev *events.Event, p *events.TrialScheduled) bool {
	if t.Finished() || (t.Scheduled && p.AttemptBase <= t.AttemptBase) {
		return false
	}
	t.Scheduled, t.AttemptBase, t.WorkSeq = true, p.AttemptBase, ev.Seq
	if x := p.Exploit; x != nil && !sameCheckpoint(t.ResumeFrom, x) { // a retry's work names it again
		t.Config, t.Exploit = p.Config, nil
		resume := *x
		t.ResumeFrom = &resume
		t.Iteration, t.JudgedIteration = x.Checkpoint.Iteration, x.Checkpoint.Iteration
		e.exploiting(t)
	}
	return true
}

func (t *Trial) started(ev *events.Event, p *events.TrialStarted) bool {
	if t.Finished() || p.Attempt <= t.Attempt || ev.Writer != events.WriterRunner {
		return false
	}
	if p.WorkSeq != 0 && (!t.Scheduled || p.WorkSeq != t.WorkSeq) {
		return false // not the trial's current work: of a run before a restore, or rescheduled since
	}
	if t.Status == events.StatusRunning { // the previous attempt never said how it ended
		t.NumFailures++
		t.LastError = fmt.Sprintf("attempt %d was lost: runner %s stopped heartbeating", t.Attempt, t.Runner)
	}
	t.Attempt, t.Status, t.AttemptIteration = p.Attempt, events.StatusRunning, 0
	t.Runner, t.Hostname, t.PID, t.RestoredFrom = p.Runner, p.Hostname, p.PID, p.RestoredFrom
	if t.StartTime.IsZero() {
		t.StartTime = ev.Time
	}
	t.resumedFrom(p.RestoredFrom)
	return true
}

// resumedFrom takes the trial back to the kept checkpoint an attempt
// resumed from when it is not the latest: the runner could not fetch the
// newer ones (their staged bytes lost, or lied about), so they are no
// longer the trial's. The attempt numbers its checkpoints on from the one
// it resumed from, and those count; a checkpoint of the same name that
// retention dropped is not deleted from storage, where the new one goes.
func (t *Trial) resumedFrom(name string) {
	i := slices.IndexFunc(t.Checkpoints, func(c events.CheckpointRef) bool { return c.Name == name })
	if i < 0 || i == len(t.Checkpoints)-1 {
		return
	}
	from := t.Checkpoints[i].Index
	newer := func(c events.CheckpointRef) bool { return c.Index > from }
	for _, c := range t.Checkpoints[i+1:] {
		delete(t.Persisted, c.Name)
	}
	for _, c := range t.Dropped {
		if newer(c) {
			delete(t.Persisted, c.Name)
		}
	}
	t.Checkpoints = slices.Clone(t.Checkpoints[:i+1])
	t.Dropped = slices.DeleteFunc(slices.Clone(t.Dropped), newer)
	t.NextCheckpoint = from + 1
}

// current reports whether a runner event belongs to the trial's live attempt.
func (t *Trial) current(attempt int) bool {
	return t.Status == events.StatusRunning && attempt == t.Attempt
}

// reported takes each of the event's results (one, or several sent
// together) the current attempt has not reported yet.
func (e *Experiment) reported(t *Trial, ev *events.Event, p *events.TrialReported) bool {
	if !t.current(p.Attempt) || t.pausing() {
		return false
	}
	changed := false
	for _, r := range p.Results() {
		if t.result(ev, r) {
			changed = true
			e.checkMetrics(r)
			e.tuneResult(t, ev, r)
		}
	}
	return changed
}

func (t *Trial) result(ev *events.Event, r map[string]any) bool {
	it := intOf(r["training_iteration"])
	if it <= t.AttemptIteration {
		return false
	}
	t.AttemptIteration = it
	// A retry that resumed from a checkpoint older than the trial's last
	// result repeats iterations that are the trial's already: each is
	// taken once. One that started afresh (no checkpoint) runs anew, and
	// its results are the trial's again, as in Ray.
	if it <= t.Iteration && t.NumResults > 0 && t.RestoredFrom != "" {
		return false
	}
	t.LastResult, t.LastResultTime, t.Iteration = r, ev.Time, it
	t.NumResults++
	t.analyse("", r)
	return true
}

// analyse adds the result's numbers to the trial's metric analysis. A
// nested mapping's numbers go under their slash-joined names ("val/loss"),
// as Ray flattens a result before it analyses it.
func (t *Trial) analyse(prefix string, r map[string]any) {
	for k, v := range r {
		if nested, ok := v.(map[string]any); ok {
			t.analyse(prefix+k+"/", nested)
			continue
		}
		f, ok := v.(float64)
		if !ok || math.IsNaN(f) || autoField[prefix+k] {
			continue
		}
		if t.Metrics == nil {
			t.Metrics = map[string]*MetricStats{}
		}
		m := t.Metrics[prefix+k]
		if m == nil {
			m = &MetricStats{}
			t.Metrics[prefix+k] = m
		}
		m.add(f)
	}
}

// autoField are the result fields tunejet fills in; they are not metrics.
var autoField = map[string]bool{
	"timestamp": true, "pid": true, "time_this_iter_s": true, "time_total_s": true,
	"time_since_restore": true, "iterations_since_restore": true,
}

func (e *Experiment) checkpointConfig() events.CheckpointConfig {
	if e.Spec == nil {
		return events.CheckpointConfig{}
	}
	return e.Spec.RunConfig.CheckpointConfig
}

// checkpointed takes a checkpoint of the current attempt together with
// the result it was reported with (its metrics): in Ray a result and its
// checkpoint are one report, so neither may count without the other. The
// trial.reported event that follows with the same result is then a
// repeat; a runner that dies between the two loses nothing, and the next
// attempt resumes after that result.
func (t *Trial) checkpointed(ev *events.Event, p *events.TrialCheckpointed, cfg events.CheckpointConfig, pinned map[string]bool) bool {
	if !t.current(p.Attempt) || t.pausing() || p.Checkpoint.Index < t.NextCheckpoint {
		return false
	}
	if r := p.Checkpoint.Metrics; r != nil {
		t.result(ev, r)
	}
	t.NextCheckpoint = p.Checkpoint.Index + 1
	t.registerCheckpoint(p.Checkpoint, cfg, pinned)
	if p.Checkpoint.Location != "" {
		// Written straight to storage, complete before this event: durable
		// with it, no checkpoint.persisted follows.
		if t.Persisted == nil {
			t.Persisted = map[string]bool{}
		}
		t.Persisted[p.Checkpoint.Name] = true
	}
	return true
}

// artifacts accepts staged artifacts from the current attempt only.
func (t *Trial) artifacts(p *events.TrialArtifacts) bool {
	if !t.current(p.Attempt) || p.Object == t.LastArtifacts {
		return false
	}
	t.LastArtifacts = p.Object
	return true
}

func (t *Trial) persisted(p *events.CheckpointPersisted) bool {
	if t.Persisted[p.Name] {
		return false
	}
	if t.Persisted == nil {
		t.Persisted = map[string]bool{}
	}
	t.Persisted[p.Name] = true
	return true
}

func (t *Trial) deleted(p *events.CheckpointDeleted) bool {
	i := slices.IndexFunc(t.Dropped, func(c events.CheckpointRef) bool { return c.Name == p.Name })
	if i < 0 {
		return false
	}
	t.Dropped = slices.Delete(t.Dropped, i, i+1)
	delete(t.Persisted, p.Name)
	return true
}

func (t *Trial) failed(ev *events.Event, p *events.TrialFailed) bool {
	if t.Finished() || p.Attempt != t.Attempt || (p.Attempt > 0 && t.FailedAtt == p.Attempt) {
		return false
	}
	if ev.Writer == events.WriterRunner && t.Status != events.StatusRunning {
		return false
	}
	t.FailedAtt = p.Attempt
	if p.Counted {
		t.NumFailures++
	}
	t.LastError = p.Error
	switch {
	case p.Final:
		t.Status, t.EndReason, t.EndTime = events.StatusError, "failed", ev.Time
	case p.Cause == events.CausePreempted:
		// The runner handed the work back; the controller schedules it again
		// with a fresh delivery budget.
		t.Status, t.Scheduled = events.StatusPending, false
	default:
		t.Status = events.StatusPending
	}
	return true
}

// userStop records a client's request to stop the trial; a request for a
// trial that ended or is stopping changes nothing.
func (t *Trial) userStop() bool {
	if t.Finished() || t.StopRequested || t.UserStopRequested {
		return false
	}
	t.UserStopRequested = true
	return true
}

func (t *Trial) stopRequested(ev *events.Event, p *events.TrialStopRequested) bool {
	if t.Finished() || t.StopRequested {
		return false
	}
	t.StopRequested, t.StopReason = true, p.Reason
	if t.Status == events.StatusPending || t.Status == events.StatusPaused {
		t.Status, t.EndReason, t.EndTime = events.StatusTerminated, p.Reason, ev.Time
	}
	return true
}

func (t *Trial) completed(ev *events.Event, p *events.TrialCompleted) bool {
	if t.Finished() {
		return false
	}
	if ev.Writer == events.WriterRunner && !t.current(p.Attempt) {
		return false
	}
	t.Status, t.EndReason, t.EndTime = p.Status, p.Reason, ev.Time
	return true
}

// intOf reads a JSON number as an int (0 if it is not one).
func intOf(v any) int {
	switch x := v.(type) {
	case float64:
		return int(x)
	case int:
		return x
	case int64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return 0
}

// pausing reports whether the controller asked the running trial's
// runner to pause it: the rest of the attempt's results and checkpoints do
// not count. (The request, not the decision, is the cut: a runner's own
// fold of the trial, which holds no tuner, must agree on the checkpoint
// the trial resumes from.)
func (t *Trial) pausing() bool {
	return t.PauseRequested && t.Status == events.StatusRunning
}

// pauseRequested takes the controller's request to pause a trial. A
// running trial (or one whose work waits for a runner) is paused by its
// runner; one with no work is PAUSED at once.
func (e *Experiment) pauseRequested(t *Trial, p *events.TrialStopRequested) bool {
	if t.Finished() || t.Status == events.StatusPaused || t.PauseRequested {
		return false
	}
	if t.Status == events.StatusPending && !t.Scheduled {
		e.pause(t)
		return true
	}
	t.PauseRequested = true
	return true
}

// paused takes a runner's word that the current attempt paused. A trial
// whose stop was requested after its pause ends there, TERMINATED by the
// stop: its runner paused it on the request it got first, and nothing
// else would end a PAUSED trial whose stop is already requested.
func (e *Experiment) paused(t *Trial, ev *events.Event, p *events.TrialPaused) bool {
	if t.Status != events.StatusRunning || p.Attempt != t.Attempt || ev.Writer != events.WriterRunner {
		return false
	}
	e.pause(t)
	if t.StopRequested {
		t.Status, t.EndReason, t.EndTime = events.StatusTerminated, t.StopReason, ev.Time
	}
	return true
}

// returned takes a runner's hand-back of the trial's work, which it took
// but can never hold: the trial is unscheduled again, with no attempt
// counted, and the controller schedules it anew (a new work message, a
// fresh delivery budget). Only a hand-back of the trial's current work by
// a delivery later than its last started attempt counts: one of work the
// trial has left (a run before a restore, an earlier scheduling) is stale.
// A trial RUNNING on that work when a later delivery of it is handed back
// lost that attempt (its runner stopped heartbeating, or the work would
// not have been handed out again), which counts, as a later start counts
// it. A trial whose pause was requested is PAUSED: no runner will pause
// it now.
func (e *Experiment) returned(t *Trial, ev *events.Event, p *events.TrialReturned) bool {
	if t.Finished() || ev.Writer != events.WriterRunner || !t.Scheduled || p.WorkSeq != t.WorkSeq || p.Attempt <= t.Attempt {
		return false
	}
	if t.Status == events.StatusRunning {
		t.NumFailures++
		t.LastError = fmt.Sprintf("attempt %d was lost: runner %s stopped heartbeating", t.Attempt, t.Runner)
		t.Status = events.StatusPending
	}
	t.Scheduled = false
	t.Returns++
	if t.PauseRequested {
		e.pause(t)
	}
	return true
}

// pause makes the trial PAUSED: it holds no slot, and it resumes from its
// latest checkpoint (or an exploit's) when it is scheduled again.
func (e *Experiment) pause(t *Trial) {
	t.Status, t.Scheduled = events.StatusPaused, false
	t.PauseDecision, t.PauseOrdinal, t.PauseRequested = "", 0, false
	if tn := e.Judge; tn != nil {
		if i := slices.Index(tn.Stopping, t.ID); i >= 0 {
			tn.Stopping = slices.Delete(tn.Stopping, i, i+1)
		}
	}
}

// sameCheckpoint reports whether a names the staged copy x does.
func sameCheckpoint(a, x *events.Exploit) bool {
	return a != nil && a.Source == x.Source && a.Checkpoint.Name == x.Checkpoint.Name && a.Checkpoint.Object == x.Checkpoint.Object
}
