package tune

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/state"
)

// maxTableRows bounds the trials shown; the rest are summarized, as in Ray.
const maxTableRows = 20

// statusTable draws Ray's trial status table: redrawn in place on a
// terminal, printed when it changes otherwise.
type statusTable struct {
	w        io.Writer
	tty      bool
	started  time.Time
	lastText string
	lines    int // lines drawn last time (for redrawing in place)
}

func newStatusTable(w io.Writer) *statusTable {
	tty := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &statusTable{w: w, tty: tty, started: time.Now()}
}

// run redraws the table every pollEvery until ctx ends; the returned func
// waits for the drawing goroutine.
func (t *statusTable) run(ctx context.Context, with func(func(*state.Experiment))) func() {
	every := pollEvery
	if !t.tty {
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
				with(t.draw)
			case <-ctx.Done():
				return
			}
		}
	}()
	return wg.Wait
}

func (t *statusTable) draw(st *state.Experiment) {
	text := render(st, time.Since(t.started))
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

// render formats the status of an experiment as Ray's progress reporter does.
func render(st *state.Experiment, elapsed time.Duration) string {
	var b strings.Builder
	metric := ""
	if st.Spec != nil {
		metric = st.Spec.TuneConfig.Metric
	}
	fmt.Fprintf(&b, "== Status ==\nExperiment %s: %s | elapsed %s | %s\n",
		st.Name, st.Status, elapsed.Truncate(time.Second), TrialCounts(st.Counts()))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	header := "Trial name\tstatus\titer\ttotal time (s)"
	if metric != "" {
		header += "\t" + metric
	}
	fmt.Fprintln(tw, header)
	trials := tableRows(st)
	for _, tr := range trials {
		row := fmt.Sprintf("%s\t%s\t%d\t%.1f", tr.Name, tr.Status, tr.Iteration, num(tr.LastResult["time_total_s"]))
		if metric != "" {
			row += "\t" + metricCell(tr.LastResult[metric])
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	if more := len(st.Order) - len(trials); more > 0 {
		fmt.Fprintf(&b, "... %d more trials not shown\n", more)
	}
	return b.String()
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
// then the rest, in creation order within each group.
func tableRows(st *state.Experiment) []*state.Trial {
	rank := map[string]int{events.StatusRunning: 0, events.StatusError: 1, events.StatusPending: 2, events.StatusTerminated: 3}
	trials := st.TrialList()
	sort.SliceStable(trials, func(i, j int) bool { return rank[trials[i].Status] < rank[trials[j].Status] })
	if len(trials) > maxTableRows {
		trials = trials[:maxTableRows]
	}
	return trials
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func metricCell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case float64:
		return fmt.Sprintf("%.5g", x)
	}
	return fmt.Sprint(v)
}

// Summary is the closing text: counts and the best trial.
func Summary(g *ResultGrid) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Experiment finished: %d trials, %d TERMINATED, %d ERROR.\n", g.Len(), g.NumTerminated(), g.NumErrors())
	if g.ExperimentPath != "" {
		fmt.Fprintf(&b, "Results: %s\n", g.ExperimentPath)
	}
	if g.metric == "" || g.mode == "" {
		return b.String()
	}
	best, err := g.GetBestResult("", "", "last")
	if err != nil {
		fmt.Fprintf(&b, "No best trial: %v\n", err)
		return b.String()
	}
	fmt.Fprintf(&b, "Best trial %s (%s %s = %s) with config %s\n", best.TrialName, g.mode, g.metric, metricCell(best.Metrics[g.metric]), compactJSON(best.Config))
	return b.String()
}
