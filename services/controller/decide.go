package controller

import (
	"fmt"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/tpe"
	"github.com/tunejet/tunejet/internal/tuning"
)

// DefaultMaxPending bounds the trials created ahead of free runner slots
// when max_concurrent_trials is unset (Ray: max(200, 1.1 × CPUs)).
const DefaultMaxPending = 256

// Inputs are everything Decide needs besides the state: the clock and the
// random choices, passed in so that Decide stays a pure function.
type Inputs struct {
	Now   time.Time
	Space *search.Space
	// NewSeed and NewPrefix are used when the experiment starts.
	NewSeed   int64
	NewPrefix string
	// StoragePath is used when the spec names none.
	StoragePath string
	// MaxPending caps in-flight trials when max_concurrent_trials is 0.
	MaxPending int
	// Searcher suggests configs for search_alg tpe, bayesopt and nsga2; nil for random and
	// grid, whose configs Space draws.
	Searcher tuning.Suggester
	// Evaluated are tpe's points_to_evaluate with their
	// evaluated_rewards: TPE's history before the first trial, and no
	// trial runs them.
	Evaluated []tpe.Trial
	// Suggestion is an external searcher's config for trial st.NextIndex
	// (search_alg external), which the reconciler asked for; without it
	// Decide creates no trial.
	Suggestion *Suggestion
	// Runners are the total capacities of the live runners. A trial whose
	// shape fits none of them is created but not scheduled: it stays
	// PENDING (Unfit says why) until a runner that holds it registers.
	// Empty: no runner is registered, and trials are scheduled for the
	// runners that will come.
	Runners []events.Resources
}

// Suggestion is the config an external searcher suggested for the trial
// of Index, and the log sequence of the history it was asked with.
type Suggestion struct {
	Index  int
	Config map[string]any
	Seq    uint64
}

// Action is one decision: an event for the controller to publish.
type Action struct {
	ID      string // deterministic, so a repeated decision is de-duplicated
	Payload events.Payload
}

// Decide returns the decisions the state calls for, in order.
func Decide(st *state.Experiment, in Inputs) []Action {
	if st.Spec == nil || st.Status == state.ExperimentCompleted || st.Status == state.ExperimentInterrupted {
		return nil
	}
	if st.Status == state.ExperimentPending {
		return []Action{startAction(st, in)}
	}
	acts := append(tunerActions(st), userStopActions(st)...)
	if reason, errText := stopReason(st, in.Now); reason != "" {
		return append(acts, stopActions(st, reason, errText)...)
	}
	acts = append(acts, createActions(st, in)...)
	if len(acts) == 0 && searchDone(st) && st.Unfinished() == 0 {
		acts = append(acts, Action{ID: actionID(st, ".completed"), Payload: &events.ExperimentCompleted{Reason: "finished"}})
	}
	return acts
}

func actionID(st *state.Experiment, parts ...any) string {
	return runID(st, st.Run, parts...)
}

// runID is "<name>.<submitted seq>.run<N>...": names hold no '.', and the
// sequence of the experiment.submitted event tells apart two experiments
// of one name (a new run after the first was forgotten), so ids of
// different experiments or runs never collide in the stream-wide dedupe
// window.
func runID(st *state.Experiment, run int, parts ...any) string {
	return fmt.Sprint(append([]any{st.Name, ".", st.SubmittedSeq, ".run", run}, parts...)...)
}

func startAction(st *state.Experiment, in Inputs) Action {
	// A restored experiment keeps its seed and trial ids.
	seed, prefix := in.NewSeed, in.NewPrefix
	if st.Spec.TuneConfig.Seed != nil {
		seed = *st.Spec.TuneConfig.Seed
	}
	if st.Run > 0 {
		seed, prefix = st.Seed, st.TrialIDPrefix
	}
	storage := st.Spec.RunConfig.StoragePath
	if storage == "" {
		storage = in.StoragePath
	}
	return Action{ID: runID(st, st.Run+1, ".started"), Payload: &events.ExperimentStarted{
		Run: st.Run + 1, Session: nextSession(st.Session, in.Now), Seed: seed,
		TrialIDPrefix: prefix, NumTrials: in.Space.NumTrials(st.Spec.TuneConfig.NumSamples),
		StoragePath: storage,
	}}
}

// stopReason says why the experiment must stop now, if it must.
func stopReason(st *state.Experiment, now time.Time) (reason, errText string) {
	if st.MetricError != "" { // Ray's driver raises it at once
		return "invalid", st.MetricError
	}
	if st.StopRequested {
		return "stopped", ""
	}
	if ff := st.Spec.RunConfig.FailureConfig.FailFast; ff != events.FailFastOff && st.Counts()[events.StatusError] > 0 {
		for _, t := range st.TrialList() {
			if t.Status == events.StatusError {
				if ff == events.FailFastRaise {
					errText = t.LastError
				}
				return "fail_fast", errText
			}
		}
	}
	if b := st.Spec.TuneConfig.TimeBudgetS; b > 0 && st.Elapsed(now) >= events.Seconds(b) {
		return "time_budget", ""
	}
	if why := st.StoppersStopAll(now); why != "" {
		return "stopper: " + why, ""
	}
	return "", ""
}

// tunerActions publishes the decisions the scheduler and stoppers made in
// the fold, each before anything acts on it, then requests the stops and
// pauses they decided (again after a restore, which clears requests).
func tunerActions(st *state.Experiment) []Action {
	var acts []Action
	for _, d := range st.PendingDecisions() {
		acts = append(acts, Action{ID: actionID(st, ".decided.", d.Ordinal), Payload: &d})
	}
	if len(acts) > 0 {
		return acts // the stops follow once the fold holds their decisions
	}
	for _, t := range st.Stopping() {
		if t.StopDecision == "" {
			acts = append(acts, Action{ID: actionID(st, ".", t.ID, ".tuner-pause.", t.PauseOrdinal), Payload: &events.TrialStopRequested{
				TrialID: t.ID, Reason: t.PauseDecision, Pause: true}})
			continue
		}
		acts = append(acts, Action{ID: actionID(st, ".", t.ID, ".tuner-stop"), Payload: &events.TrialStopRequested{TrialID: t.ID, Reason: t.StopDecision}})
	}
	return acts
}

// userStopActions carries out the clients' requests to stop a trial: the
// runner running it, which reads the controller's requests only, stops it,
// and one not running ends TERMINATED in the fold.
func userStopActions(st *state.Experiment) []Action {
	var acts []Action
	for _, t := range st.TrialList() {
		if t.UserStopRequested && !t.Finished() && !t.StopRequested {
			acts = append(acts, Action{ID: actionID(st, ".", t.ID, ".user-stop"), Payload: &events.TrialStopRequested{TrialID: t.ID, Reason: "stopped"}})
		}
	}
	return acts
}

// stopActions stops every unfinished trial, then completes the experiment.
func stopActions(st *state.Experiment, reason, errText string) []Action {
	var acts []Action
	for _, t := range st.TrialList() {
		if !t.Finished() && !t.StopRequested {
			acts = append(acts, Action{ID: actionID(st, ".", t.ID, ".stop"), Payload: &events.TrialStopRequested{TrialID: t.ID, Reason: reason}})
		}
	}
	if len(acts) == 0 && st.Unfinished() == 0 {
		acts = append(acts, Action{ID: actionID(st, ".completed"), Payload: &events.ExperimentCompleted{Reason: reason, Error: errText}})
	}
	return acts
}

func searchDone(st *state.Experiment) bool {
	return st.NumTrials >= 0 && st.NextIndex >= st.NumTrials
}

// createActions schedules again the trials whose runner handed them back,
// then creates and schedules new trials, while the in-flight window has
// room and the search has trials left.
func createActions(st *state.Experiment, in Inputs) []Action {
	limit := windowLimit(st, in)
	acts, inFlight := rescheduleActions(st, in, st.InFlight(), limit)
	var search *searcher
	for i := st.NextIndex; inFlight < limit && (st.NumTrials < 0 || i < st.NumTrials); i++ {
		if waitsForHistory(st, in, i) {
			break // tune_config.reproducible: trial i's history has not all finished
		}
		if search == nil {
			search = newSearcher(st, in)
		}
		trial := trialActions(st, in, search, i)
		if trial == nil {
			break // an external searcher's config is not there yet
		}
		acts = append(acts, trial...)
		inFlight++
	}
	return acts
}

// waitsForHistory reports whether trial index must wait before it is
// created: with tune_config.reproducible, a model-based searcher's
// suggestion for it learns from the trials numbered up to index −
// max_concurrent_trials (reproducibleHistory), and waits until all of
// them have finished.
func waitsForHistory(st *state.Experiment, in Inputs, index int) bool {
	tc := st.Spec.TuneConfig
	upTo := index - tc.MaxConcurrentTrials
	if !tc.Reproducible || in.Searcher == nil || upTo < 0 {
		return false
	}
	for _, t := range st.TrialList() {
		if t.Index <= upTo && !t.Finished() {
			return true
		}
	}
	return false
}

// windowLimit is how many trials may be in flight at once.
func windowLimit(st *state.Experiment, in Inputs) int {
	limit := st.Spec.TuneConfig.MaxConcurrentTrials
	if limit <= 0 {
		limit = in.MaxPending
		if limit <= 0 {
			limit = DefaultMaxPending
		}
	}
	return limit
}

// wantsTrial reports whether Decide would create trial st.NextIndex now
// if it had its config: what the reconciler asks an external searcher for.
func wantsTrial(st *state.Experiment, in Inputs) bool {
	if st.Spec == nil || st.Status != state.ExperimentRunning || searchDone(st) {
		return false
	}
	if reason, _ := stopReason(st, in.Now); reason != "" {
		return false
	}
	limit := windowLimit(st, in)
	_, inFlight := rescheduleActions(st, in, st.InFlight(), limit)
	return inFlight < limit
}

// rescheduleActions gives preempted, resumed and paused trials, trials
// whose work a runner handed back, and trials that waited for a runner
// big enough, a new work message (a fresh
// delivery budget, attempts counting on from the last one) while the
// window has room, or ends them ERROR when counted preemptions have used
// up max_failures or their resources are invalid. A trial no live runner
// holds stays waiting, in the window.
func rescheduleActions(st *state.Experiment, in Inputs, inFlight, limit int) ([]Action, int) {
	var acts []Action
	fc := st.Spec.RunConfig.FailureConfig
	for _, t := range st.NeedingSchedule(limit - inFlight) {
		if fc.Exhausted(t.RunFailures()) {
			acts = append(acts, Action{ID: actionID(st, ".", t.ID, ".exhausted"), Payload: &events.TrialCompleted{
				TrialID: t.ID, Status: events.StatusError, Reason: "max_failures"}})
			continue
		}
		config := t.Config
		if x := t.Exploit; x != nil {
			config = x.Config
		}
		shape, err := st.Spec.Trainable.Shape(config)
		if err != nil {
			acts = append(acts, invalidResources(st, t.ID, err))
			continue
		}
		inFlight++
		if bus.Unfit(shape, in.Runners) != "" {
			continue // PENDING until a runner that holds it registers
		}
		work := schedule(st, t.ID, t.Name, t.DirName, t.Config, t.Attempt)
		if fc.MaxFailures >= 0 {
			// The new message's deliveries start from 1: its runner ends
			// the trial ERROR by the failures the trial has left, not by
			// max_failures afresh (a counted failure, then a hand-back or
			// a preemption, would give it one more).
			work.MaxFailures = fc.MaxFailures - t.RunFailures()
		}
		if x := t.Exploit; x != nil {
			work.Config, work.Exploit = x.Config, &x.Exploit
		}
		work.Resources = shape
		id := actionID(st, ".", t.ID, ".scheduled.", t.Attempt)
		if t.Returns > 0 { // handed back with no attempt made: a new decision each time
			id += fmt.Sprint(".returned.", t.Returns)
		}
		acts = append(acts, Action{ID: id, Payload: work})
	}
	return acts, inFlight
}

// invalidResources ends a trial whose config gives its resources a value
// that is not an amount (a sampled GPU count of 1.5).
func invalidResources(st *state.Experiment, id string, err error) Action {
	return Action{ID: actionID(st, ".", id, ".invalid-resources"), Payload: &events.TrialCompleted{
		TrialID: id, Status: events.StatusError, Reason: "invalid resources: " + err.Error()}}
}

// Unfit says why trial t, PENDING, waits for a runner: its shape fits none
// of the live runners of totals; "" if it does not wait for one.
func Unfit(spec *events.ExperimentSpec, t *state.Trial, totals []events.Resources) string {
	if spec == nil || t.Status != events.StatusPending {
		return ""
	}
	config := t.Config
	if x := t.Exploit; x != nil {
		config = x.Config
	}
	shape, err := spec.Trainable.Shape(config)
	if err != nil {
		return ""
	}
	return bus.Unfit(shape, totals)
}

// trialActions creates and schedules trial index, or returns nil when its
// config is not known yet (an external searcher has not answered).
func trialActions(st *state.Experiment, in Inputs, s *searcher, index int) []Action {
	config, tag, seq, ok := s.config(index)
	if !ok {
		return nil
	}
	id := search.TrialID(st.TrialIDPrefix, index)
	name := st.Spec.Trainable.Name + "_" + id
	dir := search.TrialDirName(name, tag, in.Now)
	acts := []Action{
		{ID: actionID(st, ".", id, ".created"), Payload: &events.TrialCreated{
			TrialID: id, Index: index, TrialName: name, ExperimentTag: tag, DirName: dir, Config: config,
			SearcherSeq: seq,
		}},
	}
	shape, err := st.Spec.Trainable.Shape(config)
	switch {
	case err != nil:
		return append(acts, invalidResources(st, id, err))
	case bus.Unfit(shape, in.Runners) != "":
		return acts // PENDING until a runner that holds it registers
	}
	work := schedule(st, id, name, dir, config, 0)
	work.Resources = shape
	return append(acts, Action{ID: actionID(st, ".", id, ".scheduled"), Payload: work})
}

// schedule is the work message of a trial.
func schedule(st *state.Experiment, id, name, dir string, config map[string]any, attemptBase int) *events.TrialScheduled {
	spec := st.Spec
	fc := spec.RunConfig.FailureConfig
	work := &events.TrialScheduled{
		TrialID: id, TrialName: name, DirName: dir, Config: config, Trainable: spec.Trainable,
		Stop: spec.RunConfig.Stop, AttemptBase: attemptBase, MaxFailures: fc.MaxFailures, HeartbeatTimeoutS: fc.HeartbeatTimeout().Seconds(),
		CheckpointScoreAttribute: spec.RunConfig.CheckpointConfig.ScoreAttribute,
		WaitForDecisions:         spec.TuneConfig.WaitForDecisions && st.Judges(),
	}
	if sc := spec.RunConfig.SyncConfig; sc.SyncArtifacts {
		work.Artifacts = &events.ArtifactSync{PeriodS: sc.SyncPeriodS, OnCheckpoint: sc.SyncArtifactsOnCheckpoint == nil || *sc.SyncArtifactsOnCheckpoint}
	}
	if t := st.Trials[id]; t != nil {
		work.Checkpoint, work.RunnerSeq = t.LatestCheckpoint(), t.RunnerSeq
		if r := t.ResumeFrom; r != nil { // a retry of an exploit resumes from the donor's
			work.Exploit = r
		}
	}
	return work
}

// sessionFormat is Ray's timestamp format, used in experiment_state-<session>.json.
const sessionFormat = "2006-01-02_15-04-05"

// nextSession is now's timestamp, or one second after the previous run's
// when that is not earlier: each run writes its own state file, and the
// newest by name is the newest run.
func nextSession(previous string, now time.Time) string {
	t := now.UTC().Truncate(time.Second)
	if p, err := time.Parse(sessionFormat, previous); err == nil && !t.After(p) {
		t = p.Add(time.Second)
	}
	return t.Format(sessionFormat)
}
