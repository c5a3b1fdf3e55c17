package state

import (
	"math"
	"time"

	"github.com/tunejet/tunejet/events"

	"github.com/tunejet/tunejet/internal/tuning"
)

// Experiment statuses.
const (
	ExperimentPending     = "PENDING"     // submitted, no controller has started it
	ExperimentRunning     = "RUNNING"     // a controller runs it
	ExperimentInterrupted = "INTERRUPTED" // stopped before completion; restorable
	ExperimentCompleted   = "COMPLETED"   // done
)

// Experiment is the folded state of one experiment.
type Experiment struct {
	Name   string                 `json:"name"`
	Spec   *events.ExperimentSpec `json:"spec,omitempty"`
	Status string                 `json:"status"`

	// The current run, from experiment.started.
	Run           int       `json:"run"`
	Session       string    `json:"session,omitempty"`
	Seed          int64     `json:"seed"`
	TrialIDPrefix string    `json:"trial_id_prefix,omitempty"`
	NumTrials     int       `json:"num_trials"`
	StoragePath   string    `json:"storage_path,omitempty"`
	StartTime     time.Time `json:"start_time"`
	// RanBefore is how long the earlier runs ran (from each one's start
	// to its last event): a restored run's time budget is what they left.
	RanBefore time.Duration `json:"ran_before,omitempty"`
	// LastEventTime is the time of the newest event folded.
	LastEventTime time.Time `json:"last_event_time"`

	StopRequested bool      `json:"stop_requested,omitempty"`
	StopReason    string    `json:"stop_reason,omitempty"`
	EndReason     string    `json:"end_reason,omitempty"`
	Error         string    `json:"error,omitempty"`
	EndTime       time.Time `json:"end_time"`
	// MetricError is Ray's strict metric check error of the run's first
	// result that lacks the experiment's metric (MissingMetric): the
	// controller ends the experiment with it.
	MetricError string `json:"metric_error,omitempty"`

	// Trials by id, and their ids in creation order.
	Trials map[string]*Trial `json:"trials"`
	Order  []string          `json:"order"`
	// NextIndex is the search index of the next trial to create.
	NextIndex int `json:"next_index"`
	// Suggested is the config the driver's searcher (spec driver.searcher)
	// suggested for trial NextIndex, or the driver's resolution of its
	// sample_from domains, once the log holds it.
	Suggested *Suggested `json:"suggested,omitempty"`

	// LastSeq is the stream sequence of the last event folded, and
	// LastEventID its id: together they tell whether a snapshot belongs to
	// the log at hand.
	LastSeq     uint64 `json:"last_seq"`
	LastEventID string `json:"last_event_id,omitempty"`
	// RestoredSeq is the sequence of the experiment.restored event this
	// state was loaded from; work scheduled before it is stale.
	RestoredSeq uint64 `json:"restored_seq,omitempty"`
	// SubmittedSeq is the sequence of the experiment.submitted event: it
	// tells apart two experiments of one name in one log (a new run after
	// the first was forgotten), whose events' ids must differ.
	SubmittedSeq uint64 `json:"submitted_seq,omitempty"`

	// Judge is the scheduler and stoppers (judge.go); nil when the spec
	// asks for FIFO alone.
	Judge *Judge `json:"tuner,omitempty"`

	tally tally // the trials counted, kept by the fold (tally.go)

	settings    *tuning.Settings // the spec's, read on first use (Settings)
	settingsErr error
}

// Suggested is a config the driver's searcher suggested for the trial of
// Index, having seen the log up to Seq.
type Suggested struct {
	Index  int            `json:"index"`
	Config map[string]any `json:"config"`
	Seq    uint64         `json:"seq"`
}

// Trial is the folded state of one trial.
type Trial struct {
	ID        string         `json:"trial_id"`
	Index     int            `json:"index"`
	Name      string         `json:"trial_name"`
	Tag       string         `json:"experiment_tag"`
	DirName   string         `json:"dir_name"`
	Config    map[string]any `json:"config"`
	Status    string         `json:"status"`
	Scheduled bool           `json:"scheduled,omitempty"`
	// WorkSeq is the log sequence of the trial.scheduled event the trial's
	// current work came from: a notice about any other work is stale.
	WorkSeq uint64 `json:"work_seq,omitempty"`
	// RunnerSeq is the log sequence of the last event a runner wrote about
	// the trial, folded or not (a fenced-off attempt's too): the trial's
	// work carries it, and a runner that finds nothing later need not read
	// the trial's history (events.TrialScheduled.RunnerSeq).
	RunnerSeq uint64 `json:"runner_seq,omitempty"`
	// Returns counts the hand-backs of the trial's work by runners that
	// could not hold it (trial.returned): each costs no attempt, and makes
	// the trial's next work a new decision.
	Returns int `json:"returns,omitempty"`

	// Attempt is the current attempt; AttemptBase is what the current
	// scheduling adds to JetStream's delivery count.
	Attempt      int    `json:"attempt"`
	AttemptBase  int    `json:"attempt_base"`
	FailedAtt    int    `json:"failed_attempt,omitempty"`
	Runner       string `json:"runner,omitempty"`
	Hostname     string `json:"hostname,omitempty"`
	PID          int    `json:"pid,omitempty"`
	RestoredFrom string `json:"restored_from,omitempty"`

	// NumFailures counts failures against max_failures over the trial's
	// life; FailuresAtRestore is how many of them came before the last
	// restore (a resumed trial gets a fresh budget, its total kept).
	NumFailures       int    `json:"num_failures"`
	FailuresAtRestore int    `json:"failures_at_restore,omitempty"`
	LastError         string `json:"last_error,omitempty"`

	LastResult     map[string]any `json:"last_result,omitempty"`
	LastResultTime time.Time      `json:"last_result_time"`
	Iteration      int            `json:"training_iteration"`
	// AttemptIteration is the last iteration the current attempt reported.
	AttemptIteration int                     `json:"attempt_iteration"`
	NumResults       int                     `json:"num_results"`
	Metrics          map[string]*MetricStats `json:"metric_analysis,omitempty"`

	// Checkpoints are the kept checkpoints, oldest first; the last is the
	// latest. Dropped ones were pushed out by retention and wait to be
	// deleted from storage; Persisted names those durable in storage.
	Checkpoints    []events.CheckpointRef `json:"checkpoints,omitempty"`
	Dropped        []events.CheckpointRef `json:"dropped_checkpoints,omitempty"`
	Persisted      map[string]bool        `json:"persisted_checkpoints,omitempty"`
	NextCheckpoint int                    `json:"next_checkpoint"`
	LastArtifacts  string                 `json:"last_artifacts,omitempty"`

	StopRequested bool   `json:"stop_requested,omitempty"`
	StopReason    string `json:"stop_reason,omitempty"`
	// UserStopRequested is a client's request to stop the trial (tunejet
	// stop --trial, the dashboard), which the controller carries out with
	// a trial.stop_requested of its own.
	UserStopRequested bool `json:"user_stop_requested,omitempty"`
	// Decisions are the scheduler's and stoppers' decisions about the
	// trial; StopDecision is the reason of the one that stops it, which
	// the controller turns into trial.stop_requested. JudgeDone: the
	// scheduler has let go of the trial (stopped, completed or removed).
	Decisions    []Decision `json:"decisions,omitempty"`
	StopDecision string     `json:"stop_decision,omitempty"`
	JudgeDone    bool       `json:"tuner_done,omitempty"`
	// JudgedIteration is the last iteration the stoppers and scheduler
	// judged: each is judged once. JudgedValue is the experiment's metric
	// in that result, when it held a number: what TPE counts for a trial a
	// scheduler stopped (Optuna's pruned value), whatever the trial
	// reported before the stop reached it.
	JudgedIteration int      `json:"judged_iteration,omitempty"`
	JudgedValue     *float64 `json:"judged_value,omitempty"`

	// PauseDecision is the reason of a decision that pauses the running
	// trial (a scheduler's pause, or a PBT exploit), until it is PAUSED;
	// PauseOrdinal is that decision's ordinal. The scheduler judges none of
	// the attempt's later results. PauseRequested: the controller asked
	// its runner to pause it; the attempt's results and checkpoints after
	// the request do not count. Held: a paused trial that waits for the
	// scheduler to resume it
	// (HyperBand, until its bracket is halved); any other paused trial
	// resumes when a slot is free.
	PauseDecision  string `json:"pause_decision,omitempty"`
	PauseOrdinal   int    `json:"pause_ordinal,omitempty"`
	PauseRequested bool   `json:"pause_requested,omitempty"`
	Held           bool   `json:"held,omitempty"`
	// Exploit is a PBT exploit decided and not scheduled yet: the trial
	// resumes with its config from the donor's checkpoint. ResumeFrom is
	// the donor's checkpoint of the exploit scheduled last, until the
	// trial makes a checkpoint of its own: retries resume from it, and
	// retention keeps it in the donor.
	Exploit    *Exploit        `json:"exploit,omitempty"`
	ResumeFrom *events.Exploit `json:"resume_from,omitempty"`

	EndReason string    `json:"end_reason,omitempty"`
	StartTime time.Time `json:"start_time"`
	EndTime   time.Time `json:"end_time"`

	pos int // its position in the experiment's Order, for the tally
}

// Exploit is a PBT exploit waiting to be scheduled: the donor's checkpoint
// and the new config.
type Exploit struct {
	events.Exploit
	Config map[string]any `json:"config"`
	// Driver is set while the config waits for the experiment's driver
	// (PBT's function mutations, custom_explore_fn): the trial is not
	// scheduled again before the log holds its answer.
	Driver bool `json:"driver,omitempty"`
}

// MetricStats is Ray's per-trial metric_analysis: computed incrementally
// from numeric results, so no result history is kept.
type MetricStats struct {
	Max    float64   `json:"max"`
	Min    float64   `json:"min"`
	Sum    float64   `json:"sum"`
	Count  int       `json:"count"`
	Last   float64   `json:"last"`
	Last10 []float64 `json:"last_10"`
}

// New returns the empty state of experiment name.
func New(name string) *Experiment {
	return &Experiment{Name: name, Trials: map[string]*Trial{}, NumTrials: -1, tally: newTally()}
}

// Terminal reports whether a trial status is final.
func Terminal(status string) bool {
	return status == events.StatusTerminated || status == events.StatusError
}

// Finished reports whether the trial has ended.
func (t *Trial) Finished() bool { return Terminal(t.Status) }

// LatestCheckpoint is the trial's most recent checkpoint, or nil.
func (t *Trial) LatestCheckpoint() *events.CheckpointRef {
	if len(t.Checkpoints) == 0 {
		return nil
	}
	return &t.Checkpoints[len(t.Checkpoints)-1]
}

// TrialList returns the trials in creation order.
func (e *Experiment) TrialList() []*Trial {
	out := make([]*Trial, 0, len(e.Order))
	for _, id := range e.Order {
		out = append(out, e.Trials[id])
	}
	return out
}

// NeedsSchedule reports whether a trial waits for a work message: its
// runner handed it back, a restore resumed it, or it is PAUSED and free to
// resume. A trial a decision pauses waits for its pause first.
func (t *Trial) NeedsSchedule() bool {
	held := t.Status == events.StatusPaused && t.Held
	return !t.Finished() && !t.Scheduled && !held && t.PauseDecision == ""
}

// RunFailures counts the failures since the last restore.
func (t *Trial) RunFailures() int { return t.NumFailures - t.FailuresAtRestore }

// Elapsed is how long the experiment has run at now, over all its runs:
// what its time budget is spent on (Ray's TimeoutStopper is saved with
// the experiment, so a restore goes on with the budget that is left).
func (e *Experiment) Elapsed(now time.Time) time.Duration {
	return e.RanBefore + now.Sub(e.StartTime)
}

// Done reports whether the experiment has completed.
func (e *Experiment) Done() bool { return e.Status == ExperimentCompleted }

func (m *MetricStats) add(v float64) {
	if m.Count == 0 {
		m.Max, m.Min = v, v
	}
	m.Max = math.Max(m.Max, v)
	m.Min = math.Min(m.Min, v)
	m.Sum += v
	m.Count++
	m.Last = v
	if len(m.Last10) < 10 {
		m.Last10 = append(m.Last10, v)
		return
	}
	// Shift in place: this runs for every metric of every report, in
	// every fold; a new array each time was most of the fold's garbage.
	n := copy(m.Last10, m.Last10[len(m.Last10)-9:])
	m.Last10 = append(m.Last10[:n], v)
}

// Avg is the mean of all values.
func (m *MetricStats) Avg() float64 { return m.Sum / float64(m.Count) }

// LastNAvg is the mean of the last n (≤ 10) values.
func (m *MetricStats) LastNAvg(n int) float64 {
	vals := m.Last10
	if len(vals) > n {
		vals = vals[len(vals)-n:]
	}
	s := 0.0
	for _, v := range vals {
		s += v
	}
	return s / float64(len(vals))
}
