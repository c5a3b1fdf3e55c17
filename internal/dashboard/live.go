package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/show"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// live is one experiment as the log tells it: its state, folded with the
// fold every reader uses, and each trial's learning curve of the
// experiment's metric, kept up to date by a watch on the experiment's
// subjects for as long as the server runs.
type live struct {
	name string

	mu     sync.Mutex
	st     *state.Experiment
	metric string // the curves' metric: the experiment's, else the first reported
	curves map[string]*curve
	fields map[string]bool // the numeric fields any result held
	// params is Summary.Params, made once from the spec (which does not
	// change) rather than at each update; paramsDone says it was.
	params     map[string]string
	paramsDone bool
	// seq counts the events that changed the state; changed is, per
	// trial, the seq of the last one that changed it.
	seq     uint64
	changed map[string]uint64
	err     error // the fold's or the watch's, which end the watch
	changes hub
	// onChange is told of every change too (the experiments list).
	onChange func()

	// timeline is, per trial, what the log says happened to it (reports
	// summarized); expTimeline the experiment's own events. Empty for an
	// experiment read from files.
	timeline    map[string][]Entry
	expTimeline []Entry
	// fromFiles: the experiment was read from its storage directory
	// (expPath), not followed on the log.
	fromFiles bool
	expPath   string // the experiment directory in storage, when known

	caught chan struct{} // closed once the replay has caught up
}

// curve is a trial's results in iteration order, as columns: iters the
// training_iteration of each, cols every numeric field (a column shorter
// than iters, or NaN, where a result lacks the field), so that a reader
// can draw any metric against any of them. gen changes when a trial
// starts again from an earlier iteration (a restore from a checkpoint):
// the results after it are dropped, and readers take the curve again from
// its start.
type curve struct {
	gen   int
	iters []float64
	cols  map[string][]float64
}

// XAxes are the fields a reader may draw curves against.
var XAxes = []string{"training_iteration", "time_total_s", "time_since_restore"}

// points are the (x, metric) pairs of c where both are numbers.
func (c *curve) points(metric, x string) [][2]float64 {
	xs, ys := c.iters, c.cols[metric]
	if x != "training_iteration" {
		xs = c.cols[x]
	}
	out := [][2]float64{}
	for i := range min(len(xs), len(ys)) {
		if !math.IsNaN(xs[i]) && !math.IsNaN(ys[i]) {
			out = append(out, [2]float64{xs[i], ys[i]})
		}
	}
	return out
}

// autoFields are the result fields every report carries: never the
// curve's metric when the experiment names none.
var autoFields = map[string]bool{
	"training_iteration": true, "time_this_iter_s": true, "time_total_s": true, "timestamp": true,
	"time_since_restore": true, "iterations_since_restore": true, "timesteps_total": true,
	"episodes_total": true, "timesteps_since_restore": true, "pid": true, "done": true,
}

func newLive(name string) *live {
	return &live{
		name: name, st: state.New(name), curves: map[string]*curve{}, fields: map[string]bool{}, changed: map[string]uint64{},
		caught: make(chan struct{}), timeline: map[string][]Entry{},
	}
}

// watch folds the experiment's events until ctx ends or the watch fails.
func (l *live) watch(ctx context.Context, b *bus.Bus) {
	load := restorestate.Loader(b, l.name)
	var once sync.Once
	caughtUp := func() { once.Do(func() { close(l.caught) }) }
	err := b.Watch(ctx, events.ExperimentSubjects(l.name), 0, bus.Handler{
		Event:    func(ev *events.Event) { l.apply(ctx, ev, load) },
		CaughtUp: caughtUp,
	})
	if err != nil && ctx.Err() == nil {
		l.fail(err)
		b.Log.Error().Err(err).Str("experiment", l.name).Msg("dashboard: watch ended")
	}
	caughtUp()
}

// fail records why the view stopped following the log, for its readers.
func (l *live) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = errors.Join(l.err, err)
	l.seq++ // an update, to carry the error
	l.notifyLocked()
}

// apply folds one event and records the results it adds to the curves.
func (l *live) apply(ctx context.Context, ev *events.Event, load state.Loader) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	trial := ev.Trial()
	results := -1
	if t := l.st.Trials[trial]; t != nil {
		results = t.NumResults
	}
	next, changed, err := state.Fold(ctx, l.st, ev, load)
	if err != nil {
		l.err = fmt.Errorf("fold %s at %d: %w", l.name, ev.Seq, err)
		l.seq++ // an update, to carry the error
		l.notifyLocked()
		return
	}
	if !changed {
		return
	}
	l.st = next
	if l.metric == "" && l.st.Spec != nil {
		l.metric = l.st.Spec.TuneConfig.Primary().Metric
	}
	if l.expPath == "" && l.st.StoragePath != "" {
		l.expPath = storage.Join(l.st.StoragePath, l.name)
	}
	l.seq++
	// A checkpoint's result counts as the trial's next when the fold
	// counted it so.
	var ckptResult map[string]any
	if p, ok := ev.Data.(*events.TrialCheckpointed); ok {
		if t := l.st.Trials[trial]; t != nil && t.NumResults > results {
			ckptResult = p.Checkpoint.Metrics
		}
	}
	l.record(ev, ckptResult)
	switch p := ev.Data.(type) {
	case *events.TrialReported:
		for _, r := range p.Results() {
			l.addPoint(trial, r)
		}
	case *events.TrialCheckpointed:
		if ckptResult != nil {
			l.addPoint(trial, ckptResult)
		}
	}
	if trial == "" {
		// An experiment-level event (a start, a restore, an end) may
		// change every trial.
		for id := range l.st.Trials {
			l.changed[id] = l.seq
		}
	} else {
		l.changed[trial] = l.seq
	}
	l.notifyLocked()
}

func (l *live) addPoint(trial string, r map[string]any) {
	if l.metric == "" {
		l.metric = firstMetric(r)
	}
	it, ok := number(r["training_iteration"])
	if !ok {
		return
	}
	c := l.curves[trial]
	if c == nil {
		c = &curve{cols: map[string][]float64{}}
		l.curves[trial] = c
	}
	if n := len(c.iters); n > 0 && it <= c.iters[n-1] {
		// The trial went back to an earlier iteration: its curve goes on
		// from there.
		keep := sort.Search(n, func(i int) bool { return c.iters[i] >= it })
		c.iters = c.iters[:keep:keep]
		for k, col := range c.cols {
			c.cols[k] = col[:min(keep, len(col)):min(keep, len(col))]
		}
		c.gen++
	}
	n := len(c.iters)
	for k, v := range r {
		f, ok := number(v)
		if !ok || k == "training_iteration" {
			continue
		}
		col := c.cols[k]
		for len(col) < n {
			col = append(col, math.NaN())
		}
		c.cols[k] = append(col, f)
		l.fields[k] = true
	}
	c.iters = append(c.iters, it)
}

// firstMetric is the first numeric field of a result, by name, that is not
// one every report carries.
func firstMetric(r map[string]any) string {
	for _, k := range slices.Sorted(maps.Keys(r)) {
		if _, ok := number(r[k]); ok && !autoFields[k] {
			return k
		}
	}
	return ""
}

// number is v as a finite float64, if it is a number.
func number(v any) (float64, bool) {
	f, ok := anyFloat(v)
	return f, ok && !math.IsNaN(f) && !math.IsInf(f, 0)
}

func anyFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// notifyLocked signals every subscriber; l.mu is held.
func (l *live) notifyLocked() {
	l.changes.notify()
	if l.onChange != nil {
		l.onChange()
	}
}

// subscribe returns a channel that receives a signal (coalesced) after
// each change, and its cancel.
func (l *live) subscribe() (<-chan struct{}, func()) { return l.changes.subscribe() }

// Summary is an experiment's line on the experiments page.
type Summary struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Metric string `json:"metric,omitempty"`
	Mode   string `json:"mode,omitempty"`
	// NumTrials counts the trials created so far.
	NumTrials int `json:"num_trials"`
	// TotalTrials is the number of trials the search creates (grid points
	// × num_samples): -1 when unbounded (num_samples -1), 0 while it is not
	// known (the experiment has not started).
	TotalTrials int `json:"total_trials"`
	// Progress says it in words, as the status table does: "30/200 trials
	// done (15%), ETA 5m20s"; "" while the total is not known.
	Progress string `json:"progress,omitempty"`
	// ETASeconds is how long the trials not ended should take at the rate
	// trials ended in the current run; only for an experiment followed
	// live on the log, once a trial ended.
	ETASeconds *float64       `json:"eta_s,omitempty"`
	Counts     map[string]int `json:"counts"`
	StartTime  *time.Time     `json:"start_time,omitempty"`
	EndTime    *time.Time     `json:"end_time,omitempty"`
	EndReason  string         `json:"end_reason,omitempty"`
	Error      string         `json:"error,omitempty"`
	// Waiting says what a running experiment waits for from its driver
	// (the Python Tuner.fit() serving its stopper, searcher or functions).
	Waiting string `json:"waiting,omitempty"`
	// Best is the best value of the metric any trial reported, by mode
	// (the lowest without one).
	Best *float64 `json:"best,omitempty"`
	// Source is "log" for an experiment followed on the event log,
	// "files" for one read from its storage directory.
	Source string `json:"source"`
	// Metrics are the numeric fields the trials reported, which the
	// curves may draw; CurveMetric and CurveX what the reader's curves
	// draw, against what (an update's Points are (CurveX, CurveMetric)).
	Metrics     []string `json:"metrics,omitempty"`
	CurveMetric string   `json:"curve_metric,omitempty"`
	CurveX      string   `json:"curve_x,omitempty"`
	// Params says how the page draws each config key of the param space
	// (dotted for a nested one): "log" for a log domain (loguniform,
	// qloguniform, lograndint), "linear" for another numeric domain,
	// "category" for choice and grid_search. A key not in it (a constant,
	// or a spec that did not parse) is drawn by its values.
	Params map[string]string `json:"params,omitempty"`
	// Objectives are the spec's tune_config.metrics with their modes, for
	// an experiment that optimizes two or more metrics together; each
	// trial's last values of them are its row's Values.
	Objectives []Objective `json:"objectives,omitempty"`
}

// Objective is one metric of a multi-objective experiment and its mode.
type Objective struct {
	Metric string `json:"metric"`
	Mode   string `json:"mode"`
}

// TrialRow is a trial's row in the trials table, with its learning
// curve from point PointsFrom on.
type TrialRow struct {
	ID          string         `json:"trial_id"`
	Name        string         `json:"trial_name"`
	Status      string         `json:"status"`
	Config      map[string]any `json:"config"`
	Iteration   int            `json:"training_iteration"`
	Attempt     int            `json:"attempt"`
	NumFailures int            `json:"num_failures"`
	Last        *float64       `json:"last,omitempty"`
	// Best is the trial's best value of the metric, by the experiment's
	// mode (the lowest without one).
	Best *float64 `json:"best,omitempty"`
	// TimeTotal is the time_total_s of its last result.
	TimeTotal   *float64 `json:"time_total_s,omitempty"`
	Checkpoints int      `json:"checkpoints"`
	Runner      string   `json:"runner,omitempty"`
	EndReason   string   `json:"end_reason,omitempty"`
	Error       string   `json:"error,omitempty"`
	// PointsFrom is the index of Points[0] in the whole curve: 0 means
	// Points is the whole curve, replacing any the reader holds.
	PointsFrom int          `json:"points_from"`
	Points     [][2]float64 `json:"points"`
	// Values are the last values of the experiment's Objectives the trial
	// reported (multi-objective experiments only).
	Values map[string]float64 `json:"values,omitempty"`
	// LastResultTime is when the trial last reported: the optimisation
	// history's x by time.
	LastResultTime *time.Time `json:"last_result_time,omitempty"`
}

// Update is what the experiment page receives: the whole experiment
// first, then the trials that changed since the last update.
type Update struct {
	Experiment Summary    `json:"experiment"`
	Trials     []TrialRow `json:"trials"`
	// WatchError is set when the dashboard stopped following the log.
	WatchError string `json:"watch_error,omitempty"`
}

// sent is what one reader has been sent: the seq it is up to, and per
// trial the curve generation and the number of points; metric and x are
// what its curves draw (the experiment's metric and training_iteration
// when empty).
type sent struct {
	seq       uint64
	curves    map[string][2]int // gen, points
	metric, x string
}

// update returns what changed since s (everything when s is new) and
// moves s on; ok is false when nothing did.
func (l *live) update(s *sent) (u Update, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := s.curves == nil
	if first {
		s.curves = map[string][2]int{}
	}
	if !first && l.seq == s.seq {
		return Update{}, false
	}
	u.Experiment = l.summary()
	u.Trials = []TrialRow{}
	metric, x := cmp.Or(s.metric, l.metric), cmp.Or(s.x, "training_iteration")
	u.Experiment.CurveMetric, u.Experiment.CurveX = metric, x
	if l.err != nil {
		u.WatchError = l.err.Error()
	}
	for _, t := range l.st.TrialList() {
		if !first && l.changed[t.ID] <= s.seq {
			continue
		}
		row := l.row(t)
		if c := l.curves[t.ID]; c != nil {
			points := c.points(metric, x)
			was, from := s.curves[t.ID], 0
			if was[0] == c.gen && was[1] <= len(points) {
				from = was[1]
			}
			row.PointsFrom, row.Points = from, points[from:]
			s.curves[t.ID] = [2]int{c.gen, len(points)}
		}
		u.Trials = append(u.Trials, row)
	}
	s.seq = l.seq
	return u, true
}

func (l *live) summary() Summary {
	st := l.st
	s := Summary{Name: l.name, Status: st.Status, Metric: l.metric, NumTrials: len(st.Trials), Counts: st.Counts(), EndReason: st.EndReason, Error: st.Error, Source: "log",
		Metrics: slices.Sorted(maps.Keys(l.fields))}
	if l.fromFiles {
		s.Source = "files"
	} else {
		s.Waiting = st.DriverWait()
	}
	if st.Spec != nil {
		s.Mode = l.mode()
		if !l.paramsDone {
			l.params, l.paramsDone = paramScales(st.Spec.ParamSpace), true
		}
		s.Params = l.params
		s.Objectives = objectives(st.Spec.TuneConfig)
	}
	p := st.Progress(time.Now())
	if l.fromFiles {
		p.ETA = 0 // nothing follows it
	}
	s.TotalTrials, s.Progress = p.Total, show.Progress(p)
	if p.ETA > 0 {
		eta := p.ETA.Seconds()
		s.ETASeconds = &eta
	}
	for _, t := range st.Trials {
		if v, ok := l.best(t); ok && (s.Best == nil || better(s.Mode, v, *s.Best)) {
			s.Best = &v
		}
	}
	if !st.StartTime.IsZero() {
		s.StartTime = &st.StartTime
	}
	if !st.EndTime.IsZero() {
		s.EndTime = &st.EndTime
	}
	return s
}

func (l *live) row(t *state.Trial) TrialRow {
	r := TrialRow{
		ID: t.ID, Name: t.Name, Status: t.Status, Config: maps.Clone(t.Config), Iteration: t.Iteration,
		Attempt: t.Attempt, NumFailures: t.NumFailures, Runner: t.Runner, EndReason: t.EndReason,
		Error: t.LastError, Points: [][2]float64{},
	}
	if v, ok := number(state.Lookup(t.LastResult, l.metric)); ok && l.metric != "" {
		r.Last = &v
	}
	if v, ok := l.best(t); ok {
		r.Best = &v
	}
	if v, ok := number(t.LastResult["time_total_s"]); ok {
		r.TimeTotal = &v
	}
	r.Checkpoints = len(t.Checkpoints)
	if !t.LastResultTime.IsZero() {
		at := t.LastResultTime
		r.LastResultTime = &at
	}
	if l.st.Spec != nil && l.st.Spec.TuneConfig.MultiObjective() {
		for _, m := range l.st.Spec.TuneConfig.Metrics {
			if v, ok := number(state.Lookup(t.LastResult, m)); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
				if r.Values == nil {
					r.Values = map[string]float64{}
				}
				r.Values[m] = v
			}
		}
	}
	return r
}

// best is the trial's best value of the metric, by the experiment's mode.
func (l *live) best(t *state.Trial) (float64, bool) {
	m := t.Metrics[l.metric]
	if l.metric == "" || m == nil || m.Count == 0 {
		return 0, false
	}
	v := m.Min
	if l.mode() == "max" {
		v = m.Max
	}
	return v, !math.IsNaN(v) && !math.IsInf(v, 0)
}

// mode is the mode of the experiment's metric: of the first of several
// metrics optimized together.
func (l *live) mode() string {
	if l.st.Spec == nil {
		return ""
	}
	return l.st.Spec.TuneConfig.Primary().Mode
}

// paramScales says how to draw each domain of a param space (see
// Summary.Params); nil when the space does not parse.
func paramScales(space map[string]any) map[string]string {
	if len(space) == 0 {
		return nil
	}
	sp, err := search.ParseSpace(space)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for k, d := range sp.DomainsByKey() {
		switch {
		case d.Choices != nil:
			out[k] = "category"
		case d.Log:
			out[k] = "log"
		default:
			out[k] = "linear"
		}
	}
	return out
}

// objectives are a multi-objective experiment's metrics and modes; nil
// for one metric.
func objectives(tc events.TuneConfig) []Objective {
	if !tc.MultiObjective() {
		return nil
	}
	out := []Objective{}
	for _, o := range tc.Objectives() {
		out = append(out, Objective(o))
	}
	return out
}

// better reports whether a beats b under mode (min when mode is not max).
func better(mode string, a, b float64) bool {
	if mode == "max" {
		return a > b
	}
	return a < b
}
