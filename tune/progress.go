package tune

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/show"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// maxTableRows bounds the trials shown at verbosity 2; the rest are
// summarized, as in Ray.
const maxTableRows = 20

// The verbosity levels, Ray's verbose: 0 silent, 1 the experiment's status
// line, 2 the trial table too (the default), 3 every trial and every metric.
const (
	VerboseSilent = 0
	VerboseStatus = 1
	VerboseTable  = 2
	VerboseAll    = 3
)

// statusTable draws Ray's trial status table: redrawn in place on a
// terminal, printed when it changes otherwise.
type statusTable struct {
	w        io.Writer
	tty      bool
	verbose  int
	started  time.Time
	lastText string
	lines    int // lines drawn last time (for redrawing in place)

	spec     *events.ExperimentSpec // the spec params was read from
	params   []string               // the varying hyperparameters' keys
	reporter Reporter               // the columns and pace asked for

	// registry, when set, is read for the live runners' capacities: the
	// table says why a trial no runner can hold stays PENDING.
	registry    *bus.Bus
	runnersRead time.Time
	mu          sync.Mutex
	totals      []events.Resources
}

// Reporter chooses the status table's columns and pace, as Ray's
// CLIReporter: MetricColumns (default: the experiment's metric, every
// metric at verbosity 3) and ParameterColumns (default: the
// hyperparameters that vary), each shown in the order given, and Every,
// how often the table is drawn at most (default: every second on a
// terminal, every 5 s otherwise).
type Reporter struct {
	MetricColumns    []string
	ParameterColumns []string
	Every            time.Duration
}

func newStatusTable(w io.Writer, verbose int) *statusTable {
	tty := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &statusTable{w: w, tty: tty, verbose: verbose, started: time.Now()}
}

// run redraws the table every pollEvery until ctx ends; the returned func
// waits for the drawing goroutine.
func (t *statusTable) run(ctx context.Context, with func(func(*state.Experiment))) func() {
	every := pollEvery
	switch {
	case t.reporter.Every > 0:
		every = t.reporter.Every
	case !t.tty:
		every = 5 * pollEvery
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				t.refreshRunners(ctx)
				with(t.draw)
			case <-ctx.Done():
				return
			}
		}
	}()
	return wg.Wait
}

func (t *statusTable) draw(st *state.Experiment) {
	if st.Spec != t.spec {
		t.spec, t.params = st.Spec, paramColumns(st.Spec)
	}
	cols := columns{params: t.params, metrics: t.reporter.MetricColumns}
	if t.reporter.ParameterColumns != nil {
		cols.params = t.reporter.ParameterColumns
	}
	text := render(st, time.Now(), time.Since(t.started), t.verbose, cols)
	if t.verbose > VerboseSilent {
		text += t.waiting(st)
	}
	if text == t.lastText {
		return
	}
	if t.tty && t.lines > 0 {
		fmt.Fprintf(t.w, "\033[%dA\033[J", t.lines)
	}
	fmt.Fprint(t.w, text)
	t.lastText, t.lines = text, strings.Count(text, "\n")
}

// final draws the table one last time.
func (t *statusTable) final(st *state.Experiment) {
	t.lastText = ""
	t.draw(st)
}

// render formats the status of an experiment at now as Ray's progress
// reporter does: the status line, with the trials ended of the total
// (Ray's "Number of trials: 34/200"); from verbosity 2 the current best
// trial and a
// table of the trials with the hyperparameters that vary (params), the
// iteration, the total time, the metric and, once a scheduler or stopper
// ended a trial shown, why; at verbosity 3 every trial and every metric.
// columns are the table's columns: params the hyperparameters', metrics
// the metrics' when a Reporter gives them (nil: the defaults).
type columns struct{ params, metrics []string }

func render(st *state.Experiment, now time.Time, elapsed time.Duration, verbose int, cols columns) string {
	if verbose <= VerboseSilent {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "== Status ==\nExperiment %s: %s | elapsed %s | ", st.Name, st.Status, elapsed.Truncate(time.Second))
	if p := show.Progress(st.Progress(now)); p != "" {
		b.WriteString(p + " | ")
	}
	b.WriteString(TrialCounts(st.Counts()) + "\n")
	if verbose == VerboseStatus {
		return b.String()
	}
	var metric, mode string
	if st.Spec != nil {
		metric, mode = st.Spec.TuneConfig.Metric, st.Spec.TuneConfig.Mode
	}
	if best := bestTrial(st, metric, mode); best != nil {
		fmt.Fprintf(&b, "Current best trial: %s with %s=%s and params=%s\n", best.ID, metric, show.Cell(state.Lookup(best.LastResult, metric)), show.JSON(best.Config))
	}
	trials := tableRows(st, verbose)
	params, metrics := cols.params, cols.metrics
	if metrics == nil {
		metrics = metricColumns(st, trials, verbose)
	}
	reasons := slices.ContainsFunc(trials, func(t *state.Trial) bool { return decidedEnd(t) != "" })
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	header := append([]string{"Trial name", "status"}, params...)
	header = append(append(header, "iter", "total time (s)"), metrics...)
	if reasons {
		header = append(header, "reason")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, tr := range trials {
		row := []string{tr.Name, tr.Status}
		for _, p := range params {
			row = append(row, show.Cell(state.Lookup(tr.Config, p)))
		}
		row = append(row, fmt.Sprint(tr.Iteration), fmt.Sprintf("%.1f", num(tr.LastResult["time_total_s"])))
		for _, m := range metrics {
			row = append(row, show.Cell(state.Lookup(tr.LastResult, m)))
		}
		if reasons {
			row = append(row, decidedEnd(tr))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	if more := len(st.Order) - len(trials); more > 0 {
		fmt.Fprintf(&b, "... %d more trials not shown\n", more)
	}
	return b.String()
}

// maxParamColumns bounds the hyperparameter columns, as Ray's reporter
// bounds its parameter columns.
const maxParamColumns = 6

// paramColumns are the keys of the param_space's domains ("a/b" nested),
// in key order: the hyperparameters that vary from trial to trial.
func paramColumns(spec *events.ExperimentSpec) []string {
	if spec == nil {
		return nil
	}
	space, err := search.ParseSpace(spec.ParamSpace)
	if err != nil {
		return nil
	}
	var out []string
	for _, d := range space.Domains() {
		if len(out) == maxParamColumns {
			break
		}
		out = append(out, strings.Join(d.Path, "/"))
	}
	return out
}

// metricColumns are the metric (or the metrics), and at verbosity 3 every other numeric
// result key the shown trials reported (not tunejet's own fields), sorted.
func metricColumns(st *state.Experiment, shown []*state.Trial, verbose int) []string {
	var out []string
	seen := map[string]bool{}
	if st.Spec != nil {
		for _, o := range st.Spec.TuneConfig.Objectives() {
			if o.Metric != "" {
				out, seen[o.Metric] = append(out, o.Metric), true
			}
		}
	}
	if verbose < VerboseAll {
		return out
	}
	var more []string
	for _, tr := range shown {
		for k, v := range tr.LastResult {
			if _, isNum := v.(float64); isNum && !seen[k] && !autoResultField[k] {
				seen[k] = true
				more = append(more, k)
			}
		}
	}
	sort.Strings(more)
	return append(out, more...)
}

// autoResultField are the result keys tunejet fills in.
var autoResultField = map[string]bool{
	"training_iteration": true, "time_this_iter_s": true, "time_total_s": true, "time_since_restore": true,
	"iterations_since_restore": true, "timestamp": true, "pid": true, "done": true,
}

// decidedEnd is why a scheduler or stopper ended (or pauses) the trial,
// shortened for the table; "" otherwise.
func decidedEnd(t *state.Trial) string {
	why := t.StopDecision
	if why == "" && t.Status == events.StatusPaused {
		why = "paused"
	}
	if why == "" {
		return ""
	}
	return show.Cut(why, 60)
}

// bestTrial is the trial whose last result is best by metric and mode, or
// nil.
func bestTrial(st *state.Experiment, metric, mode string) *state.Trial {
	if metric == "" || (mode != "min" && mode != "max") {
		return nil
	}
	var best *state.Trial
	var bestV float64
	for _, tr := range st.TrialList() {
		v, ok := state.Lookup(tr.LastResult, metric).(float64)
		if !ok || math.IsNaN(v) {
			continue
		}
		if best == nil || (mode == "min" && v < bestV) || (mode == "max" && v > bestV) {
			best, bestV = tr, v
		}
	}
	return best
}

// TrialCounts says how many trials are in each status, as the status
// table's header does: "3 RUNNING, 4 TERMINATED, 1 ERROR", or "no trials".
func TrialCounts(c map[string]int) string {
	var parts []string
	for _, s := range []string{events.StatusRunning, events.StatusPending, events.StatusPaused, events.StatusTerminated, events.StatusError} {
		if c[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[s], s))
		}
	}
	if len(parts) == 0 {
		return "no trials"
	}
	return strings.Join(parts, ", ")
}

// tableRows picks the rows to show: running trials first, then errors,
// paused, pending and the rest, in creation order within each group; at
// verbosity 3 every trial.
func tableRows(st *state.Experiment, verbose int) []*state.Trial {
	rank := map[string]int{events.StatusRunning: 0, events.StatusError: 1, events.StatusPaused: 2, events.StatusPending: 3, events.StatusTerminated: 4}
	trials := st.TrialList()
	sort.SliceStable(trials, func(i, j int) bool { return rank[trials[i].Status] < rank[trials[j].Status] })
	if len(trials) > maxTableRows && verbose < VerboseAll {
		trials = trials[:maxTableRows]
	}
	return trials
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// Summary is the closing text: counts, the errored trials and the best
// trial.
func Summary(g *ResultGrid) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Experiment finished: %d trials, %d TERMINATED, %d ERROR.\n", g.Len(), g.NumTerminated(), g.NumErrors())
	if g.ExperimentPath != "" {
		fmt.Fprintf(&b, "Results: %s\n", g.ExperimentPath)
	}
	b.WriteString(erroredTrials(g))
	if len(g.objectives) > 0 {
		b.WriteString(paretoFront(g))
		return b.String()
	}
	if g.metric == "" || g.mode == "" {
		return b.String()
	}
	best, err := g.GetBestResult("", "", "last")
	if err != nil {
		fmt.Fprintf(&b, "No best trial: %v\n", err)
		return b.String()
	}
	fmt.Fprintf(&b, "Best trial %s (%s %s = %s) with config %s\n", best.TrialName, g.mode, g.metric, show.Cell(state.Lookup(best.Metrics, g.metric)), show.JSON(best.Config))
	return b.String()
}

// paretoFront is the section of an experiment of several metrics that
// lists its Pareto front: each trial's name, value of each metric and
// config, in creation order.
func paretoFront(g *ResultGrid) string {
	front := g.ParetoFront()
	var b strings.Builder
	names := make([]string, len(g.objectives))
	for i, o := range g.objectives {
		names[i] = o.Metric + " " + o.Mode
	}
	fmt.Fprintf(&b, "Pareto front: %d of %d trials (%s)\n", len(front), g.Len(), strings.Join(names, ", "))
	if len(front) == 0 {
		b.WriteString("No trial ended with every metric.\n")
		return b.String()
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	head := []string{"Trial name"}
	for _, o := range g.objectives {
		head = append(head, o.Metric)
	}
	fmt.Fprintln(tw, strings.Join(append(head, "config"), "\t"))
	for _, r := range front {
		row := []string{r.TrialName}
		for _, o := range g.objectives {
			row = append(row, show.Cell(state.Lookup(r.Metrics, o.Metric)))
		}
		fmt.Fprintln(tw, strings.Join(append(row, show.JSON(r.Config)), "\t"))
	}
	_ = tw.Flush()
	return b.String()
}

// maxErrorLine bounds the error's last line in the errored trials' table.
const maxErrorLine = 120

// erroredTrials is Ray's table of the trials that ended ERROR (Ray's
// trial_errors_str in python/ray/tune/progress_reporter.py): their number,
// then each one's name, failures and error.txt, with the last line of its
// error, which names the cause (a Python traceback's exception, a
// command's last line of stderr); at most maxTableRows rows. "" when no
// trial errored.
func erroredTrials(g *ResultGrid) string {
	var failed []Result
	for _, r := range g.results {
		if r.Error != nil {
			failed = append(failed, r)
		}
	}
	if len(failed) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Number of errored trials: %d\n", len(failed))
	if over := len(failed) - maxTableRows; over > 0 {
		fmt.Fprintf(&b, "Table truncated to %d rows (%d overflow)\n", maxTableRows, over)
		failed = failed[:maxTableRows]
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Trial name\t# failures\terror file\tlast error line")
	for _, r := range failed {
		file := "-"
		if r.Path != "" {
			file = storage.Join(r.Path, storage.ErrorFile)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", r.TrialName, r.NumFailures, file, show.Cut(show.LastLine(r.Error.Error()), maxErrorLine))
	}
	tw.Flush()
	return b.String()
}
