package state

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/sched"
	"github.com/tunejet/tunejet/internal/stopper"
	"github.com/tunejet/tunejet/internal/tuning"
)

// Judge is the experiment's scheduler and stoppers, kept by the fold. They
// judge each result in log order, so every reader of the log (and a
// restore, from the log or a snapshot) holds the same ones and makes the
// same decisions: a restored experiment goes on exactly as if nothing had
// happened. The fold draws no random number of its own: a decision that
// needs one (ASHA's bracket among several) seeds a fresh generator from
// (experiment seed, decision kind, ordinal).
//
// Each decision that asks for something, or records a judgement, is kept
// pending until the controller has published it as trial.decided, before it
// acts on it (a stop is followed by trial.stop_requested).
type Judge struct {
	// Scheduler is the scheduler's state (its config is the spec's);
	// Stoppers is the stoppers' config and state.
	Scheduler json.RawMessage `json:"scheduler,omitempty"`
	Stoppers  json.RawMessage `json:"stoppers,omitempty"`
	// Judged counts the results fed to the scheduler: the ordinal of each
	// result's generator.
	Judged uint64 `json:"judged"`
	// Decisions counts the decisions made; each takes the next ordinal.
	Decisions int `json:"decisions"`
	// Pending are the decisions the log does not hold yet, oldest first.
	Pending []events.TrialDecided `json:"pending,omitempty"`
	// StopAll is the stoppers' reason to stop the whole experiment, once
	// they gave one.
	StopAll string `json:"stop_all,omitempty"`
	// Stopping are the trials a decision stops (or pauses) that have not
	// ended (or paused) yet.
	Stopping []string `json:"stopping,omitempty"`
	// Asks are the results the driver's stopper (spec driver.stopper) is
	// to judge, oldest first: the controller asks it, and its answer
	// (driver.answered) has the result judged on, by the scheduler too.
	Asks []Ask `json:"asks,omitempty"`
	// Exploiting are the trials with a PBT exploit pending or a donor's
	// checkpoint to resume from (Trial.Exploit, Trial.ResumeFrom), in the
	// order they exploited: retention keeps those checkpoints.
	Exploiting []string `json:"exploiting,omitempty"`

	sched sched.Scheduler
	stop  stopper.Stopper // nil: no stoppers
	err   error           // the spec's tuner could not be built
}

// Ask is a result waiting for the driver's stopper: Key names the
// question (driver.answered's key), Checkpoint is the trial's checkpoint
// as of the result.
type Ask struct {
	Key        string         `json:"key"`
	TrialID    string         `json:"trial_id"`
	Iteration  int            `json:"iteration,omitempty"`
	ResultSeq  uint64         `json:"result_seq,omitempty"`
	Result     map[string]any `json:"result,omitempty"`
	Checkpoint string         `json:"checkpoint,omitempty"`
	// Explore is set for a PBT exploit's config, Config as explored: the
	// driver finishes it (events.DriverExplore).
	Explore bool           `json:"explore,omitempty"`
	Config  map[string]any `json:"config,omitempty"`
	// Resample are the keys (nested ones dotted) whose function mutation
	// the driver calls, null in Config.
	Resample []string `json:"resample,omitempty"`
}

// Decision is what a trial keeps of a decision about it; the log's
// trial.decided holds its inputs too.
type Decision struct {
	Ordinal int    `json:"ordinal"`
	By      string `json:"by"`
	Action  string `json:"action"`
	Reason  string `json:"reason,omitempty"`
}

// tunes reports whether a spec asks for anything besides FIFO and the stop
// dict: without, the fold keeps no tuner and results cost nothing more.
func tunes(spec *events.ExperimentSpec) bool {
	s := spec.TuneConfig.Scheduler
	return (s != "" && s != "fifo") || spec.RunConfig.Stoppers != nil || spec.Driver.Stops()
}

// tuner returns the experiment's tuner, built from the spec (and the state
// a snapshot carried) on first use; nil when the spec asks for none or it
// cannot be built (Err says why).
func (e *Experiment) judge() *Judge {
	if e.Spec == nil || !tunes(e.Spec) {
		return nil
	}
	if e.Judge == nil {
		e.Judge = &Judge{}
	}
	tn := e.Judge
	if tn.sched == nil && tn.err == nil {
		tn.err = tn.build(e.Settings())
	}
	if tn.err != nil {
		return nil
	}
	return tn
}

// Settings returns the experiment's scheduler, search algorithm and
// stoppers as the spec sets them, read and checked on first use and kept:
// the fold and the controller read them from here, not from the spec.
func (e *Experiment) Settings() (*tuning.Settings, error) {
	if e.settings == nil && e.settingsErr == nil && e.Spec != nil {
		e.settings, e.settingsErr = tuning.Parse(e.Spec)
	}
	return e.settings, e.settingsErr
}

// build makes the scheduler and stoppers from the settings, restoring the
// state they had when Scheduler or Stoppers hold one.
func (tn *Judge) build(set *tuning.Settings, err error) error {
	if err != nil {
		return err
	}
	s, err := set.Scheduler.New()
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	if len(tn.Scheduler) > 0 {
		if err := s.UnmarshalJSON(tn.Scheduler); err != nil {
			return fmt.Errorf("scheduler state: %w", err)
		}
	}
	var st stopper.Stopper
	if len(tn.Stoppers) > 0 {
		st, err = stopper.Unmarshal(tn.Stoppers)
	} else {
		st, err = set.NewStopper()
	}
	if err != nil {
		return fmt.Errorf("stoppers: %w", err)
	}
	tn.sched, tn.stop = s, st
	return nil
}

// Judges reports whether the experiment has a scheduler or stoppers that
// judge its results.
func (e *Experiment) Judges() bool { return e.judge() != nil }

// JudgeErr says why the spec's scheduler or stoppers could not be built,
// or is nil.
func (e *Experiment) JudgeErr() error {
	if e.judge() == nil && e.Judge != nil {
		return e.Judge.err
	}
	return nil
}

// MarshalJSON writes the scheduler's and stoppers' current state.
func (tn *Judge) MarshalJSON() ([]byte, error) {
	type plain Judge
	if tn.sched != nil {
		b, err := tn.sched.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("scheduler state: %w", err)
		}
		tn.Scheduler = b
	}
	if tn.stop != nil {
		b, err := stopper.Marshal(tn.stop)
		if err != nil {
			return nil, fmt.Errorf("stoppers state: %w", err)
		}
		tn.Stoppers = b
	}
	return json.Marshal((*plain)(tn))
}

// tuneAdd enters a new trial into the scheduler.
func (e *Experiment) tuneAdd(t *Trial) {
	tn := e.judge()
	if tn == nil {
		return
	}
	d := tn.sched.Add(t.ID, tuning.Rand(e.Seed, "add", uint64(t.Index)))
	// ASHA's only bracket is no choice: not worth an event per trial.
	if !d.Quiet() && (d.Bracket == nil || d.Bracket.Probabilities == nil || len(d.Bracket.Probabilities) > 1) {
		e.decided(t, events.DecidedByScheduler, d, 0)
	}
}

// tuneResult has the stoppers and the scheduler judge one new result of a
// running trial, as Ray does: a result that ends the trial by the stop
// dict (done) is not judged, the stoppers come first, and a trial they or
// the scheduler stop is complete for the scheduler at that result.
func (e *Experiment) tuneResult(t *Trial, ev *events.Event, r map[string]any) {
	tn := e.judge()
	if tn == nil || t.JudgeDone || t.StopRequested || t.PauseDecision != "" || r["done"] == true {
		return
	}
	// Each iteration is judged once: a retry that started afresh reports
	// the trial's earlier iterations again.
	it := intOf(r["training_iteration"])
	if it <= t.JudgedIteration {
		return
	}
	t.JudgedIteration = it
	if v, ok := Lookup(r, e.Spec.TuneConfig.Metric).(float64); ok {
		t.JudgedValue = &v
	}
	res := sched.Result{Trial: t.ID, Metrics: numeric(r, tn.sched.Attrs()), Checkpoint: checkpointName(t)}
	if tn.stop != nil {
		d := tn.stop.StopTrial(t.ID, r)
		if sa := tn.stop.StopAll(e.Elapsed(ev.Time).Seconds()); sa.Stop && tn.StopAll == "" {
			tn.StopAll = sa.Reason
		}
		if d.Stop {
			e.decided(t, events.DecidedByStopper, sched.Decision{Trial: t.ID, Action: sched.Stop, Reason: d.Reason}, ev.Seq)
			e.letGo(t, tn.sched.Complete(res), ev.Seq)
			return
		}
	}
	if e.Spec.Driver.Stops() {
		// The driver's stopper judges it next, and the scheduler once the
		// log holds its answer (driverStop).
		was := e.standing(t)
		tn.Asks = append(tn.Asks, Ask{Key: StopKey(t.ID, it), TrialID: t.ID, Iteration: it, ResultSeq: ev.Seq, Result: r, Checkpoint: res.Checkpoint})
		e.moved(t, was)
		return
	}
	e.scheduleResult(t, res, ev.Seq)
}

// scheduleResult has the scheduler judge a result of trial t.
func (e *Experiment) scheduleResult(t *Trial, res sched.Result, resultSeq uint64) {
	tn := e.Judge
	tn.Judged++
	ds := tn.sched.Result(res, sched.Context{Rand: tuning.Rand(e.Seed, "result", tn.Judged), Waiting: e.othersWait(), Config: e.config})
	for _, d := range ds {
		about := e.Trials[d.Trial]
		if about == nil || d.Quiet() {
			continue
		}
		e.decided(about, events.DecidedByScheduler, d, resultSeq)
		if about == t && d.Action == sched.Stop {
			e.letGo(t, tn.sched.Complete(res), resultSeq)
		}
	}
}

// StopKey is the key of the driver's stop answer about trial's result of
// iteration.
func StopKey(trial string, iteration int) string { return fmt.Sprintf("stop/%s/%d", trial, iteration) }

// SuggestKey is the key of the driver's suggestion for trial index.
func SuggestKey(index int) string { return fmt.Sprintf("suggest/%d", index) }

// ExploreKey is the key of the driver's explored config of trial's PBT
// exploit decided by decision ordinal.
func ExploreKey(trial string, ordinal int) string {
	return fmt.Sprintf("explore/%s/%d", trial, ordinal)
}

// SampleKey is the key of the driver's sample_from values for trial index.
func SampleKey(index int) string { return fmt.Sprintf("sample/%d", index) }

// DriverAsks are the results waiting for the driver's stopper, oldest
// first.
func (e *Experiment) DriverAsks() []Ask {
	if e.Judge == nil {
		return nil
	}
	return e.Judge.Asks
}

// driverStop folds the driver's stopper's answer about a result: a stop
// is a stopper's decision, else the scheduler judges the result; a
// stop_all stops the experiment. An explore answer goes to driverExplore. An answer about a trial that ended or was
// stopped meanwhile changes nothing but its stop_all.
func (e *Experiment) driverStop(p *events.DriverAnswered) bool {
	tn := e.judge()
	if tn == nil {
		return false
	}
	i := slices.IndexFunc(tn.Asks, func(a Ask) bool { return a.Key == p.Key })
	if i < 0 {
		return false
	}
	a := tn.Asks[i]
	if t := e.Trials[a.TrialID]; t != nil && !a.Explore {
		defer e.moved(t, e.standing(t)) // it may run again once answered
	}
	tn.Asks = slices.Delete(tn.Asks, i, i+1)
	if a.Explore {
		return e.driverExplore(a, p)
	}
	if p.Answer.StopAll && tn.StopAll == "" {
		tn.StopAll = by(p) + " stopped the experiment (stop_all)"
	}
	t := e.Trials[a.TrialID]
	if t == nil || t.Finished() || t.JudgeDone || t.StopRequested || t.PauseDecision != "" {
		return true
	}
	res := sched.Result{Trial: t.ID, Metrics: numeric(a.Result, tn.sched.Attrs()), Checkpoint: a.Checkpoint}
	if p.Answer.Stop {
		reason := fmt.Sprintf("%s stopped the trial at training_iteration %d", by(p), a.Iteration)
		e.decided(t, events.DecidedByStopper, sched.Decision{Trial: t.ID, Action: sched.Stop, Reason: reason}, a.ResultSeq)
		e.letGo(t, tn.sched.Complete(res), a.ResultSeq)
		return true
	}
	e.scheduleResult(t, res, a.ResultSeq)
	return true
}

// driverExplore takes the driver's config for a PBT exploit: the trial
// runs again with it.
func (e *Experiment) driverExplore(a Ask, p *events.DriverAnswered) bool {
	t := e.Trials[a.TrialID]
	if t == nil || t.Exploit == nil || !t.Exploit.Driver || p.Answer.Config == nil {
		return true
	}
	defer e.moved(t, e.standing(t))
	t.Exploit.Config, t.Exploit.Driver = p.Answer.Config, false
	return true
}

// by names the driver's object that answered.
func by(p *events.DriverAnswered) string {
	if p.By != "" {
		return p.By
	}
	return "the driver's stopper"
}

// asking reports whether a result of trial id waits for the driver's
// stopper: the trial is not scheduled again before the answer.
func (e *Experiment) asking(id string) bool {
	return e.Judge != nil && slices.ContainsFunc(e.Judge.Asks, func(a Ask) bool { return a.TrialID == id && !a.Explore })
}

// dropAsks forgets the results of t waiting for the driver's stopper.
func (tn *Judge) dropAsks(t *Trial) {
	tn.Asks = slices.DeleteFunc(tn.Asks, func(a Ask) bool { return a.TrialID == t.ID })
	if len(tn.Asks) == 0 {
		tn.Asks = nil
	}
}

// tuneEnded tells the scheduler that a trial ended (unless a decision
// already let it go): complete at its last result if it ran, else removed.
func (e *Experiment) tuneEnded(t *Trial, ev *events.Event) {
	tn := e.judge()
	if tn == nil {
		return
	}
	if i := slices.Index(tn.Stopping, t.ID); i >= 0 {
		tn.Stopping = slices.Delete(tn.Stopping, i, i+1)
	}
	t.Exploit, t.ResumeFrom = nil, nil
	e.exploiting(t)
	tn.dropAsks(t)
	if t.JudgeDone {
		return
	}
	if t.Status == events.StatusTerminated && t.LastResult != nil {
		e.letGo(t, tn.sched.Complete(sched.Result{Trial: t.ID, Metrics: numeric(t.LastResult, tn.sched.Attrs()), Checkpoint: checkpointName(t)}), ev.Seq)
		return
	}
	e.letGo(t, tn.sched.Remove(t.ID), ev.Seq)
}

// JudgeRemove lets go of a trial a restore took out of the experiment (a
// restarted trial's old id, or a skipped unfinished trial).
func (e *Experiment) JudgeRemove(t *Trial) {
	if tn := e.judge(); tn != nil && !t.JudgeDone {
		tn.dropAsks(t)
		e.letGo(t, tn.sched.Remove(t.ID), 0)
	}
}

// JudgeAdd enters a trial a restore added (a restarted trial's new id).
func (e *Experiment) JudgeAdd(t *Trial) { e.tuneAdd(t) }

// letGo marks a trial as let go by the scheduler, recording what the
// scheduler decided as it did (a completed trial's final rung record).
func (e *Experiment) letGo(t *Trial, ds []sched.Decision, resultSeq uint64) {
	t.JudgeDone = true
	for _, d := range ds {
		if about := e.Trials[d.Trial]; about != nil && !d.Quiet() {
			e.decided(about, events.DecidedByScheduler, d, resultSeq)
		}
	}
}

// decided records a decision: pending until the log holds it, kept by its
// trial, and a stop the controller is to request.
func (e *Experiment) decided(t *Trial, by string, d sched.Decision, resultSeq uint64) {
	tn := e.Judge
	tn.Decisions++
	ev := events.TrialDecided{
		TrialID: t.ID, Ordinal: tn.Decisions, By: by, Action: string(d.Action), Reason: d.Reason,
		Detail: detail(d), ResultSeq: resultSeq,
	}
	tn.Pending = append(tn.Pending, ev)
	t.Decisions = append(t.Decisions, Decision{Ordinal: ev.Ordinal, By: by, Action: ev.Action, Reason: d.Reason})
	switch d.Action {
	case sched.Stop:
		if t.StopDecision == "" {
			t.StopDecision = ev.Quoted()
			t.JudgeDone = true
			tn.Stopping = append(tn.Stopping, t.ID)
		}
	case sched.Pause, sched.Exploit:
		if t.StopDecision != "" || t.PauseDecision != "" || t.Status != events.StatusRunning {
			return
		}
		t.PauseDecision, t.PauseOrdinal = ev.Quoted(), ev.Ordinal
		h, ok := tn.sched.(interface{ HoldsPaused() bool })
		t.Held = ok && h.HoldsPaused() && d.Action == sched.Pause
		if d.Action == sched.Exploit {
			t.Exploit = e.exploitOf(d.Exploit)
			e.exploiting(t)
			if t.Exploit != nil && d.Exploit.Driver && e.Spec.Driver != nil {
				// The driver finishes the explored config before the trial
				// runs again (driverExplore).
				t.Exploit.Driver = true
				var resample []string
				for k, op := range d.Exploit.Operations {
					if op == sched.OpDriverResample {
						resample = append(resample, k)
					}
				}
				slices.Sort(resample)
				tn.Asks = append(tn.Asks, Ask{Key: ExploreKey(t.ID, ev.Ordinal), TrialID: t.ID, Explore: true, Config: t.Exploit.Config, Resample: resample})
			}
		}
		if !slices.Contains(tn.Stopping, t.ID) {
			tn.Stopping = append(tn.Stopping, t.ID)
		}
	case sched.Resume:
		was := e.standing(t)
		t.Held = false
		e.moved(t, was)
	}
}

// FillConfig draws, into the config of a new trial of index, every key
// the scheduler mutates and the config lacks (PBT's hyperparam_mutations
// outside the param_space, as Ray's on_trial_add), and reports whether it
// drew any.
func (e *Experiment) FillConfig(config map[string]any, index int) bool {
	tn := e.judge()
	if tn == nil {
		return false
	}
	f, ok := tn.sched.(interface {
		FillConfig(map[string]any, *rand.Rand) map[string]any
	})
	if !ok {
		return false
	}
	filled := f.FillConfig(config, tuning.Rand(e.Seed, "fill", uint64(index)))
	if reflect.DeepEqual(filled, config) {
		return false
	}
	maps.Copy(config, filled)
	return true
}

// tuneResumed tells the scheduler that a paused trial runs again.
func (e *Experiment) tuneResumed(t *Trial) {
	if tn := e.judge(); tn != nil {
		tn.sched.Resumed(t.ID)
	}
}

// othersWait reports whether a trial waits for a slot (PENDING or PAUSED),
// as Ray's median rule and PBT ask before they pause one to let it run.
func (e *Experiment) othersWait() bool {
	c := e.counts()
	return c.status[events.StatusPending] > 0 || c.status[events.StatusPaused] > 0
}

// config is a trial's current config, for PBT's donor.
func (e *Experiment) config(trial string) map[string]any {
	if t := e.Trials[trial]; t != nil {
		return t.Config
	}
	return nil
}

// exploitOf finds the donor's checkpoint an exploit names: one of the
// donor's kept checkpoints, or the one the donor itself resumes from (a
// donor that exploited and has not checkpointed since). When retention
// has dropped the one named since the scheduler recorded it (num_to_keep,
// the donor checkpointed again), the donor's kept checkpoint nearest it
// stands in — the newest before it, else the oldest after — and the
// exploit is not lost.
func (e *Experiment) exploitOf(in *sched.ExploitInputs) *Exploit {
	if in == nil || e.Trials[in.Source] == nil {
		return nil
	}
	donor := e.Trials[in.Source]
	x := &Exploit{Config: in.NewConfig}
	if r := donor.ResumeFrom; r != nil && checkpointName(donor) == in.SourceCheckpoint {
		x.Exploit = *r
		return x
	}
	i := slices.IndexFunc(donor.Checkpoints, func(c events.CheckpointRef) bool { return c.Name == in.SourceCheckpoint })
	if i < 0 {
		i = nearestCheckpoint(donor.Checkpoints, in.SourceCheckpoint)
	}
	if i < 0 {
		return nil
	}
	x.Source, x.Checkpoint = donor.ID, donor.Checkpoints[i]
	if x.Checkpoint.Object == "" && x.Checkpoint.Location == "" { // a staged copy of a state that names none
		x.Checkpoint.Object = events.LegacyCheckpointObject(donor.ID, x.Checkpoint.Name)
	}
	return x
}

// nearestCheckpoint is the index in kept of the checkpoint nearest the one
// named: the newest before it, else the oldest after it; -1 when kept is
// empty or the name holds no checkpoint number.
func nearestCheckpoint(kept []events.CheckpointRef, name string) int {
	n, ok := events.CheckpointIndex(name)
	if !ok {
		return -1
	}
	before, after := -1, -1
	for i, c := range kept {
		switch {
		case c.Index < n && (before < 0 || c.Index > kept[before].Index):
			before = i
		case c.Index > n && (after < 0 || c.Index < kept[after].Index):
			after = i
		}
	}
	if before >= 0 {
		return before
	}
	return after
}

// exploiting keeps t in the Exploiting list while it has an exploit
// pending or a donor's checkpoint to resume from.
func (e *Experiment) exploiting(t *Trial) {
	tn := e.Judge
	if tn == nil {
		return
	}
	i := slices.Index(tn.Exploiting, t.ID)
	switch on := t.Exploit != nil || t.ResumeFrom != nil; {
	case on && i < 0:
		tn.Exploiting = append(tn.Exploiting, t.ID)
	case !on && i >= 0:
		tn.Exploiting = slices.Delete(tn.Exploiting, i, i+1)
	}
}

// pinned are the checkpoints of trial that an exploit resumes another
// trial from: retention keeps them.
func (e *Experiment) pinned(trial string) map[string]bool {
	if e.Judge == nil || len(e.Judge.Exploiting) == 0 {
		return nil
	}
	var out map[string]bool
	for _, id := range e.Judge.Exploiting {
		t := e.Trials[id]
		if t == nil {
			continue
		}
		for _, x := range []*events.Exploit{t.ResumeFrom, exploitRef(t.Exploit)} {
			if x != nil && x.Source == trial {
				if out == nil {
					out = map[string]bool{}
				}
				out[x.Checkpoint.Name] = true
			}
		}
	}
	return out
}

// PinnedObjects are the staged copies of the checkpoints that exploits
// resume trials from (decided, scheduled, or retried until the trial has
// a checkpoint of its own), sorted: the syncer keeps them in the Object
// Store, where the runner fetches them.
func (e *Experiment) PinnedObjects() []string {
	if e.Judge == nil || len(e.Judge.Exploiting) == 0 {
		return nil
	}
	var out []string
	for _, id := range e.Judge.Exploiting {
		if t := e.Trials[id]; t != nil {
			for _, x := range []*events.Exploit{t.ResumeFrom, exploitRef(t.Exploit)} {
				if x != nil && x.Checkpoint.Object != "" && !slices.Contains(out, x.Checkpoint.Object) {
					out = append(out, x.Checkpoint.Object)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func exploitRef(x *Exploit) *events.Exploit {
	if x == nil {
		return nil
	}
	return &x.Exploit
}

// Stopping returns the trials a decision stops or pauses whose stop or
// pause is not requested yet, in the order they were decided; a trial
// with a PauseDecision is to be paused, the others stopped.
func (e *Experiment) Stopping() []*Trial {
	if e.Judge == nil {
		return nil
	}
	var out []*Trial
	for _, id := range e.Judge.Stopping {
		t := e.Trials[id]
		if t == nil || t.Finished() || t.StopRequested {
			continue
		}
		if t.StopDecision != "" || (t.PauseDecision != "" && !t.PauseRequested && t.Status != events.StatusPaused) {
			out = append(out, t)
		}
	}
	return out
}

// published drops the decisions the log now holds from the pending ones.
func (e *Experiment) published(p *events.TrialDecided) bool {
	tn := e.Judge
	if tn == nil || len(tn.Pending) == 0 || p.Ordinal < tn.Pending[0].Ordinal {
		return false
	}
	i := sort.Search(len(tn.Pending), func(i int) bool { return tn.Pending[i].Ordinal > p.Ordinal })
	tn.Pending = tn.Pending[i:]
	if len(tn.Pending) == 0 {
		tn.Pending = nil
	}
	return true
}

// PendingDecisions are the decisions to publish, oldest first.
func (e *Experiment) PendingDecisions() []events.TrialDecided {
	if e.Judge == nil {
		return nil
	}
	return e.Judge.Pending
}

// StoppersStopAll is the stoppers' reason to stop the experiment at now
// (a timeout passes without a result too), or "".
func (e *Experiment) StoppersStopAll(now time.Time) string {
	tn := e.judge()
	if tn == nil {
		return ""
	}
	if tn.StopAll != "" {
		return tn.StopAll
	}
	if tn.stop != nil {
		if d := tn.stop.StopAll(e.Elapsed(now).Seconds()); d.Stop {
			return d.Reason
		}
	}
	return ""
}

// detail is a decision as trial.decided carries it: its JSON, read back as
// generic values, the way a reader of the event sees it.
func detail(d sched.Decision) map[string]any {
	b, err := json.Marshal(d)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// numeric reads the numbers of a result at keys, "a/b" nesting as Ray
// flattens results. A bool (Ray's done) is not a metric. Only the keys
// the scheduler reads: flattening the whole result was half of the fold's
// cost per result.
func numeric(r map[string]any, keys []string) map[string]float64 {
	out := make(map[string]float64, len(keys))
	for _, k := range keys {
		switch x := Lookup(r, k).(type) {
		case float64:
			out[k] = x
		case int:
			out[k] = float64(x)
		case int64:
			out[k] = float64(x)
		}
	}
	return out
}

// checkpointName is the name of the checkpoint the trial would resume
// from, or "": its latest, or "<donor>/<name>" when it resumes from a
// donor's (PBT hands it on to the trials that exploit this one).
func checkpointName(t *Trial) string {
	if r := t.ResumeFrom; r != nil {
		return r.Source + "/" + r.Checkpoint.Name
	}
	if c := t.LatestCheckpoint(); c != nil {
		return c.Name
	}
	return ""
}

// DriverWait says what a running experiment waits for from its driver:
// results its stopper is to judge, PBT exploits its functions are to
// explore, the next trial's config from its searcher or its sample_from
// values; "" when it waits for nothing of the driver's. While a driver
// answers, these come and go within moments; while none does, they stay.
func (e *Experiment) DriverWait() string {
	if e.Spec == nil || e.Spec.Driver == nil || e.Status != ExperimentRunning {
		return ""
	}
	d := e.Spec.Driver
	var parts []string
	results, explores := 0, 0
	for _, a := range e.DriverAsks() {
		if a.Explore {
			explores++
		} else {
			results++
		}
	}
	if results > 0 {
		parts = append(parts, fmt.Sprintf("%d result(s) for %s to judge", results, d.Stopper))
	}
	if explores > 0 {
		parts = append(parts, fmt.Sprintf("%d PBT exploit(s) to explore", explores))
	}
	if e.Suggested == nil && e.wantsTrial() {
		set, err := e.Settings() // read once and kept: no parse per call
		switch {
		case d.Searches():
			parts = append(parts, fmt.Sprintf("the config of trial %d from %s", e.NextIndex, d.Searcher))
		case err == nil && set.SampleFrom:
			parts = append(parts, fmt.Sprintf("the sample_from values of trial %d", e.NextIndex))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "waits for its driver: " + strings.Join(parts, "; ")
}

// wantsTrial reports whether the search has a trial left and room for it
// under max_concurrent_trials: then the next trial's config is due.
func (e *Experiment) wantsTrial() bool {
	if e.NumTrials >= 0 && e.NextIndex >= e.NumTrials {
		return false
	}
	limit := e.Spec.TuneConfig.MaxConcurrentTrials
	return limit <= 0 || e.Unfinished() < limit
}
