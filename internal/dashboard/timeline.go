package dashboard

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/show"
	"github.com/tunejet/tunejet/internal/state"
)

// Entry is one line of a trial's timeline: an event of the log about the
// trial or its experiment, or a run of its reports summarized in one line.
type Entry struct {
	// Seq is the log sequence of the event (of the first of a run of
	// reports or of persisted checkpoints); 0 for an entry taken from a
	// state file.
	Seq  uint64    `json:"seq,omitempty"`
	Time time.Time `json:"time,omitzero"`
	// Kind is the event's type without its prefix ("trial.started",
	// "trial.decided", "experiment.restored"), or "trial.reported" for a
	// run of reports.
	Kind    string `json:"kind"`
	Attempt int    `json:"attempt,omitempty"`
	// Text says what happened, in a line.
	Text string `json:"text"`
	// Detail is the decision's detail of a trial.decided (its inputs).
	Detail map[string]any `json:"detail,omitempty"`
	// Reports, for a run of reports: how many, and the iterations and
	// the metric's last value they span.
	Reports  int      `json:"reports,omitempty"`
	FromIter int      `json:"from_iteration,omitempty"`
	ToIter   int      `json:"to_iteration,omitempty"`
	Value    *float64 `json:"value,omitempty"`
	// Checkpoints counts the reports of the run made with a checkpoint
	// (the checkpoints persisted, for checkpoint.persisted); LastCheckpoint
	// names the last.
	Checkpoints    int    `json:"checkpoints,omitempty"`
	LastCheckpoint string `json:"last_checkpoint,omitempty"`
}

// record adds the event, which the fold accepted, to the timelines;
// result is the result a trial.checkpointed carried when the fold counted
// it. l.mu is held.
func (l *live) record(ev *events.Event, result map[string]any) {
	kind := strings.TrimPrefix(ev.Type(), events.TypePrefix)
	e := Entry{Seq: ev.Seq, Time: ev.Time, Kind: kind}
	trial := ev.Trial()
	switch p := ev.Data.(type) {
	case *events.ExperimentStarted:
		e.Text = fmt.Sprintf("experiment run %d started", p.Run)
	case *events.ExperimentStopRequested:
		e.Text = "stop of the experiment requested: " + p.Reason
	case *events.ExperimentInterrupted:
		e.Text = "experiment interrupted: " + p.Reason
	case *events.ExperimentCompleted:
		e.Text = "experiment completed: " + p.Reason
		if p.Error != "" {
			e.Text += ": " + p.Error
		}
	case *events.ExperimentRestored:
		e.Text = fmt.Sprintf("experiment restored from the %s (unfinished trials: %s, errored: %s, finished: %s)",
			p.Source, p.Resume.Unfinished, p.Resume.Errored, p.Resume.Finished)
	case *events.TrialCreated:
		e.Text = "created as " + p.TrialName + " with config " + show.JSON(p.Config)
	case *events.TrialScheduled:
		e.Text = "scheduled"
		if p.Checkpoint != nil {
			e.Text += ", to resume from " + p.Checkpoint.Name
		}
		if p.Exploit != nil {
			e.Text += fmt.Sprintf(", exploiting %s's %s with config %s", p.Exploit.Source, p.Exploit.Checkpoint.Name, show.JSON(p.Config))
		}
	case *events.TrialStarted:
		e.Attempt = p.Attempt
		e.Text = fmt.Sprintf("attempt %d started on runner %s (%s, pid %d)", p.Attempt, p.Runner, p.Hostname, p.PID)
		if p.RestoredFrom != "" {
			e.Text += ", restored from " + p.RestoredFrom
		}
	case *events.TrialReported:
		l.recordReports(trial, ev, p.Attempt, p.Results(), nil)
		return
	case *events.TrialCheckpointed:
		if result != nil {
			// A report with a checkpoint: counted in the run of reports.
			l.recordReports(trial, ev, p.Attempt, []map[string]any{result}, &p.Checkpoint)
			return
		}
		e.Attempt = p.Attempt
		e.Text = fmt.Sprintf("checkpoint %s at iteration %d (%s)%s", p.Checkpoint.Name, p.Checkpoint.Iteration, bytesText(p.Checkpoint.Size), route(p.Checkpoint))
	case *events.CheckpointPersisted:
		l.recordPersisted(trial, ev, p)
		return
	case *events.CheckpointDeleted:
		e.Text = fmt.Sprintf("checkpoint %s deleted: %s", p.Name, p.Reason)
	case *events.TrialFailed:
		e.Attempt = p.Attempt
		e.Text = fmt.Sprintf("attempt %d failed (%s", p.Attempt, p.Cause)
		if p.ErrorType != "" {
			e.Text += ", " + p.ErrorType
		}
		e.Text += ")"
		if p.Final {
			e.Text += ", final"
		}
		if p.Error != "" {
			e.Text += ": " + lastLine(p.Error)
		}
	case *events.TrialStopRequested:
		verb := "stop"
		if p.Pause {
			verb = "pause"
		}
		e.Text = verb + " requested: " + p.Reason
		if t := l.st.Trials[trial]; !p.Pause && t != nil && t.Finished() {
			// A trial paused or pending ends at its stop: no other event
			// says so.
			e.Text += fmt.Sprintf("; not running, it ends %s here", t.Status)
		}
	case *events.TrialPaused:
		e.Attempt = p.Attempt
		e.Text = "paused"
		if p.Reason != "" {
			e.Text += ": " + p.Reason
		}
		if t := l.st.Trials[trial]; t != nil && t.Finished() {
			// Its stop came while the pause was on the way.
			e.Text += fmt.Sprintf("; its stop was requested, so it ends %s here", t.Status)
		}
	case *events.TrialDecided:
		e.Text, e.Detail = decided(p.By, p.Action, p.Reason), p.Detail
	case *events.TrialCompleted:
		e.Attempt = p.Attempt
		e.Text = fmt.Sprintf("completed %s: %s", p.Status, p.Reason)
	case *events.TrialArtifacts:
		e.Attempt = p.Attempt
		e.Text = fmt.Sprintf("artifacts synced (%d files, %s)", p.Files, bytesText(p.Size))
	case *events.TrialReturned:
		e.Text = fmt.Sprintf("work handed back by runner %s, no attempt spent: %s", p.Runner, p.Reason)
	default:
		return // submitted, sync: not about a trial
	}
	if trial == "" {
		l.expTimeline = append(l.expTimeline, e)
		return
	}
	l.timeline[trial] = append(l.timeline[trial], e)
}

// recordReports adds results to the trial's last run of reports of the
// same attempt, or starts one; ck is the checkpoint reported with them.
func (l *live) recordReports(trial string, ev *events.Event, attempt int, results []map[string]any, ck *events.CheckpointRef) {
	tl := l.timeline[trial]
	var run *Entry
	// The run goes on past the syncer's events, which come as they come.
	for i := len(tl) - 1; i >= 0; i-- {
		if tl[i].Kind == "trial.reported" && tl[i].Attempt == attempt {
			run = &tl[i]
			break
		}
		if !syncerKinds[tl[i].Kind] {
			break
		}
	}
	if run == nil {
		tl = append(tl, Entry{Seq: ev.Seq, Kind: "trial.reported", Attempt: attempt, Time: ev.Time})
		run = &tl[len(tl)-1]
	}
	if ck != nil {
		run.Checkpoints++
		run.LastCheckpoint = ck.Name + route(*ck)
	}
	for _, r := range results {
		it, _ := number(r["training_iteration"])
		if run.Reports == 0 {
			run.FromIter = int(it)
		}
		run.Reports++
		run.ToIter = int(it)
		if v, ok := number(r[l.metric]); ok && l.metric != "" {
			run.Value = &v
		}
	}
	if run.Reports == 1 {
		run.Text = fmt.Sprintf("1 report, iteration %d", run.ToIter)
	} else {
		run.Text = fmt.Sprintf("%d reports, iterations %d to %d", run.Reports, run.FromIter, run.ToIter)
	}
	if run.Value != nil {
		run.Text += fmt.Sprintf(", last %s %.5g", l.metric, *run.Value)
	}
	switch {
	case run.Checkpoints == 1 && run.Reports == 1:
		run.Text += "; with checkpoint " + run.LastCheckpoint
	case run.Checkpoints > 0:
		run.Text += fmt.Sprintf("; %d with a checkpoint, the last %s", run.Checkpoints, run.LastCheckpoint)
	}
	l.timeline[trial] = tl
}

// syncerKinds are the events the syncer writes about a trial as it
// catches up: they do not break a run of reports.
var syncerKinds = map[string]bool{"checkpoint.persisted": true, "checkpoint.deleted": true, "trial.artifacts": true}

// recordPersisted adds a persisted checkpoint to the trial's last entry
// of persisted checkpoints when nothing else came since, or starts one.
func (l *live) recordPersisted(trial string, ev *events.Event, p *events.CheckpointPersisted) {
	tl := l.timeline[trial]
	var e *Entry
	if n := len(tl); n > 0 && tl[n-1].Kind == "checkpoint.persisted" {
		e = &tl[n-1]
	} else {
		tl = append(tl, Entry{Seq: ev.Seq, Time: ev.Time, Kind: "checkpoint.persisted"})
		e = &tl[len(tl)-1]
	}
	e.Checkpoints++
	e.LastCheckpoint = p.Name
	if e.Checkpoints == 1 {
		e.Text = fmt.Sprintf("checkpoint %s persisted to %s", p.Name, p.Path)
	} else {
		e.Text = fmt.Sprintf("%d checkpoints persisted, the last %s to %s", e.Checkpoints, p.Name, p.Path)
	}
	l.timeline[trial] = tl
}

// trialTimeline is the trial's timeline with the experiment's events since
// the trial was created, in log order; l.mu is held.
func (l *live) trialTimeline(t *state.Trial) []Entry {
	own := l.timeline[t.ID]
	if l.fromFiles {
		return fileTimeline(t)
	}
	out := slices.Clone(own)
	var from uint64
	if len(own) > 0 {
		from = own[0].Seq
	}
	for _, e := range l.expTimeline {
		if e.Seq > from {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// fileTimeline is what a state file keeps of a trial's story: its start,
// the decisions about it (without their inputs), its failures and its end.
func fileTimeline(t *state.Trial) []Entry {
	out := []Entry{{Time: t.StartTime, Kind: "trial.created", Text: "created as " + t.Name + " with config " + show.JSON(t.Config)}}
	for _, d := range t.Decisions {
		out = append(out, Entry{Kind: "trial.decided", Text: decided(d.By, d.Action, d.Reason)})
	}
	if t.NumResults > 0 {
		out = append(out, Entry{Kind: "trial.reported", Time: t.LastResultTime, Reports: t.NumResults, ToIter: t.Iteration,
			Text: fmt.Sprintf("%d reports, last at iteration %d", t.NumResults, t.Iteration)})
	}
	for _, c := range t.Checkpoints {
		out = append(out, Entry{Kind: "trial.checkpointed", Text: fmt.Sprintf("checkpoint %s at iteration %d (%s)", c.Name, c.Iteration, bytesText(c.Size))})
	}
	if t.NumFailures > 0 {
		out = append(out, Entry{Kind: "trial.failed", Text: fmt.Sprintf("%d failures, the last: %s", t.NumFailures, lastLine(t.LastError))})
	}
	if t.Finished() {
		out = append(out, Entry{Kind: "trial.completed", Time: t.EndTime, Attempt: t.Attempt, Text: fmt.Sprintf("completed %s: %s", t.Status, t.EndReason)})
	}
	return out
}

// route says where a checkpoint went: straight to storage, or staged in
// the Object Store for the syncer to persist.
func route(c events.CheckpointRef) string {
	switch {
	case c.Location != "":
		return ", written to storage"
	case c.Object != "":
		return ", staged"
	}
	return ""
}

// lastLine is an error's last line, which names its cause (a traceback's
// exception, a command's last line of stderr), after "… " when lines
// precede it: the whole error is the trial's error.txt.
func lastLine(s string) string {
	if strings.Contains(strings.TrimSpace(s), "\n") {
		return "… " + show.LastLine(s)
	}
	return show.LastLine(s)
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// decided is a decision's entry, from the log or a state file: "scheduler
// decided stop: stopped at rung 4 …".
func decided(by, action, reason string) string {
	s := by + " decided " + action
	if reason != "" {
		s += ": " + reason
	}
	return s
}
