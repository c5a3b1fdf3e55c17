package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/internal/sched"
	"github.com/tunejet/tunejet/internal/show"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/tuning"
	"github.com/tunejet/tunejet/services/restorer"
)

func newExplainCmd() *cobra.Command {
	var (
		conn     connFlags
		storeDir string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "explain PATH TRIAL",
		Short: "Print the decisions about one trial, each with its inputs, oldest first",
		Long: `Print why a trial ran as it did: its creation (its config, and for tpe and bayesopt the
log sequence the suggestion saw), then each scheduler's or stopper's
decision about it with the inputs it came from (for ASHA the rung, the
cutoff and the other trials' rewards behind it), then how it ended.

PATH is the experiment's directory in storage, <storage_path>/<name>, as a
path or a URL (what tunejet results and tunejet restore take). TRIAL is a
trial id, a trial name, or a unique prefix of either.

The decisions come from the event log when it holds the experiment: a
deployment's with --nats, else the embedded store (--store-dir) if there
is one. Otherwise they come from the newest experiment_state-*.json under
PATH, which keeps each decision's reason but not its inputs.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			x, err := explainTrial(cmd.Context(), conn, storeDir, args[0], args[1])
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false)
				return enc.Encode(x)
			}
			return x.print(os.Stdout)
		},
	}
	conn.add(cmd.Flags(), clientConnectTimeout)
	cmd.Flags().StringVar(&storeDir, "store-dir", bus.DefaultStoreDir(), "embedded nats-server's JetStream store, read when --nats is not given")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: the trial.decided payloads and the trial's creation and end")
	return cmd
}

// The sources of an explanation.
const (
	fromLog      = "log"
	fromSnapshot = "snapshot"
)

// explanation is what tunejet explain says about one trial.
type explanation struct {
	Experiment string `json:"experiment"`
	// Source is "log" or "snapshot"; Snapshot names the state file.
	Source   string `json:"source"`
	Snapshot string `json:"snapshot,omitempty"`

	TrialID   string         `json:"trial_id"`
	TrialName string         `json:"trial_name"`
	Config    map[string]any `json:"config"`
	// SearchAlg is the experiment's search algorithm; SearcherSeq, from
	// the log, the sequence a model-based searcher's suggestion saw.
	SearchAlg   string `json:"search_alg"`
	SearcherSeq uint64 `json:"searcher_seq,omitempty"`
	// Decisions are the decisions about the trial, oldest first: from the
	// log, its trial.decided payloads; from a state file, without detail
	// and result_seq. Pending are those the fold made that the log does
	// not hold yet.
	Decisions []events.TrialDecided `json:"decisions"`
	Pending   []events.TrialDecided `json:"pending,omitempty"`
	// Driver are the answers of the experiment's driver about the trial
	// (its config from the driver's searcher, whether each result stops it
	// from the driver's stopper), with the questions, oldest first.
	Driver    []events.DriverAnswered `json:"driver,omitempty"`
	Status    string                  `json:"status"`
	EndReason string                  `json:"end_reason,omitempty"`

	timeAttr string // the scheduler's, to say where a decision was made
}

// explainTrial reads the experiment at expPath from the event log when it
// is reachable and holds it, else from its newest state file, and
// explains trial.
func explainTrial(ctx context.Context, conn connFlags, storeDir, expPath, trial string) (*explanation, error) {
	p, err := storage.Resolve(expPath, "")
	if err != nil {
		return nil, err
	}
	_, name, err := restorer.Split(p)
	if err != nil {
		return nil, err
	}
	b, closeFn, err := explainBus(ctx, conn, storeDir)
	if err != nil {
		return nil, err
	}
	if b != nil {
		defer closeFn()
		x, ok, err := explainFromLog(ctx, b, name, trial)
		if ok || err != nil {
			return x, err
		}
	}
	return explainFromSnapshot(ctx, p, trial)
}

// explainBus is readBus for explain: nil when there is no store in
// storeDir, or when another process serves it (explain then reads the
// newest state file).
func explainBus(ctx context.Context, conn connFlags, storeDir string) (*bus.Bus, func(), error) {
	b, closeFn, err := readBus(ctx, conn, storeDir, "explain", nopLogger())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, nil
	case errors.Is(err, bus.ErrStoreInUse):
		// The experiment runs in another process, whose server does not
		// listen: explain from its newest stored snapshot instead.
		fmt.Fprintf(os.Stderr, "%v\nThe experiment is running: explaining from its newest stored snapshot; explain again after it ends for the log's detail.\n", err)
		return nil, nil, nil
	}
	return b, closeFn, err
}

// readBus connects a reader of the log (name: "explain", "dashboard") to
// the deployment --nats names, or starts an embedded server on the store
// in storeDir. With no store there it fails with fs.ErrNotExist (none is
// created just to find it empty), and with bus.ErrStoreInUse when another
// process serves it.
func readBus(ctx context.Context, conn connFlags, storeDir, name string, log zerolog.Logger) (*bus.Bus, func(), error) {
	var (
		b       *bus.Bus
		closeFn func()
	)
	if conn.o.URL != "" {
		opts, err := conn.options(log)
		if err != nil {
			return nil, nil, err
		}
		if b, err = bus.Dial(ctx, opts, "tunejet/"+name, log); err != nil {
			return nil, nil, err
		}
		closeFn = b.Close
	} else {
		if _, err := os.Stat(storeDir); err != nil {
			return nil, nil, fmt.Errorf("no embedded store at %s: %w", storeDir, err)
		}
		emb, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: storeDir})
		if err != nil {
			return nil, nil, err
		}
		if b, err = emb.Dial("tunejet-"+name, "tunejet/"+name, log); err != nil {
			emb.Shutdown()
			return nil, nil, err
		}
		closeFn = func() { b.Close(); emb.Shutdown() }
	}
	if err := b.Provision(ctx); err != nil {
		closeFn()
		return nil, nil, err
	}
	return b, closeFn, nil
}

// explainFromLog folds the experiment from the log and collects the
// trial's creation and decisions; ok is false when the log does not hold
// the experiment.
func explainFromLog(ctx context.Context, b *bus.Bus, name, trial string) (*explanation, bool, error) {
	last, err := b.LastSeq(ctx, events.ExperimentSubjects(name))
	if err != nil || last == 0 {
		return nil, false, err
	}
	st, load := state.New(name), restorestate.Loader(b, name)
	created := map[string]*events.TrialCreated{}
	decided := map[string][]events.TrialDecided{}
	answered := map[string][]events.DriverAnswered{}
	var ferr error
	err = b.Replay(ctx, events.ExperimentSubjects(name), func(ev *events.Event) {
		if ferr != nil {
			return
		}
		switch p := ev.Data.(type) {
		case *events.TrialCreated:
			created[p.TrialID] = p
		case *events.TrialDecided:
			decided[p.TrialID] = append(decided[p.TrialID], *p)
		case *events.DriverAnswered:
			answered[p.TrialID] = append(answered[p.TrialID], *p)
		}
		st, _, ferr = state.Fold(ctx, st, ev, load)
	})
	if err = errors.Join(err, ferr); err != nil {
		return nil, true, fmt.Errorf("read %s from the log: %w", name, err)
	}
	t, err := findTrial(st, trial)
	if err != nil {
		return nil, true, err
	}
	x := newExplanation(st, t, fromLog)
	x.Decisions = append(x.Decisions, decided[t.ID]...)
	x.Driver = answered[t.ID]
	if c := created[t.ID]; c != nil {
		x.Config, x.SearcherSeq = c.Config, c.SearcherSeq
	}
	for _, d := range st.PendingDecisions() {
		if d.TrialID == t.ID {
			x.Pending = append(x.Pending, d)
		}
	}
	return x, true, nil
}

// explainFromSnapshot explains the trial from the newest state file in
// the experiment directory p: each decision's reason, without its inputs.
func explainFromSnapshot(ctx context.Context, p, trial string) (*explanation, error) {
	bkt, err := storage.OpenBucket(ctx, p)
	if err != nil {
		return nil, err
	}
	defer bkt.Close()
	st, key, skipped, err := storage.LoadNewestState(ctx, bkt)
	for _, sk := range skipped {
		fmt.Fprintf(os.Stderr, "Skipped %s\n", sk)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("the event log does not hold the experiment at %s and it has no experiment_state-*.json: check that the path is the combination of storage_path and name of your run: %w", p, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", storage.Join(p, key), err)
	}
	t, err := findTrial(st, trial)
	if err != nil {
		return nil, err
	}
	x := newExplanation(st, t, fromSnapshot)
	x.Snapshot = key
	for _, d := range t.Decisions {
		x.Decisions = append(x.Decisions, events.TrialDecided{TrialID: t.ID, Ordinal: d.Ordinal, By: d.By, Action: d.Action, Reason: d.Reason})
	}
	return x, nil
}

func newExplanation(st *state.Experiment, t *state.Trial, source string) *explanation {
	x := &explanation{
		Experiment: st.Name, Source: source, TrialID: t.ID, TrialName: t.Name, Config: t.Config,
		SearchAlg: "random", Decisions: []events.TrialDecided{}, Status: t.Status, EndReason: t.EndReason,
	}
	if st.Spec != nil {
		if a := st.Spec.TuneConfig.SearchAlg; a != "" {
			x.SearchAlg = a
		}
		x.timeAttr = timeAttr(st)
	}
	return x
}

// timeAttr is the time_attr of the experiment's scheduler: its setting,
// else the scheduler's default; "time" without one.
func timeAttr(st *state.Experiment) string {
	if set, err := st.Settings(); err == nil {
		if k := sched.TimeKey(set.Scheduler); k != "" {
			return k
		}
	}
	return "time"
}

// findTrial finds a trial by id or name, or by a prefix of either (or a
// suffix of its id, such as its index 00003) that only one trial has.
func findTrial(st *state.Experiment, q string) (*state.Trial, error) {
	trials := st.TrialList()
	for _, t := range trials {
		if t.ID == q || t.Name == q {
			return t, nil
		}
	}
	var found []*state.Trial
	for _, t := range trials {
		if q != "" && (strings.HasPrefix(t.ID, q) || strings.HasPrefix(t.Name, q) || strings.HasSuffix(t.ID, q)) {
			found = append(found, t)
		}
	}
	if len(found) == 1 {
		return found[0], nil
	}
	list := func(ts []*state.Trial) string {
		var b strings.Builder
		for _, t := range ts {
			fmt.Fprintf(&b, "\n  %s  %s", t.ID, t.Name)
		}
		return b.String()
	}
	if len(found) > 1 {
		return nil, fmt.Errorf("trial %q of experiment %s is ambiguous; it may be:%s", q, st.Name, list(found))
	}
	if len(trials) == 0 {
		return nil, fmt.Errorf("no trial %q: experiment %s has no trials", q, st.Name)
	}
	return nil, fmt.Errorf("no trial %q in experiment %s; its trials are:%s", q, st.Name, list(trials))
}

// print writes the explanation for a person: one aligned line per step.
func (x *explanation) print(w io.Writer) error {
	from := "the event log"
	if x.Source == fromSnapshot {
		from = "the state file " + x.Snapshot + ": inputs are in the log"
	}
	fmt.Fprintf(w, "Trial %s (%s) of experiment %s, from %s\n", x.TrialName, x.TrialID, x.Experiment, from)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	created := "config " + show.JSON(x.Config)
	switch {
	case tuning.ModelBased(x.SearchAlg) && x.SearcherSeq > 0:
		created += fmt.Sprintf(", suggested by %s from the log up to seq %d", x.SearchAlg, x.SearcherSeq)
	case tuning.ModelBased(x.SearchAlg):
		created += ", suggested by " + x.SearchAlg // a startup trial, or from a state file
	case x.SearchAlg == tuning.SearchExternal && x.SearcherSeq > 0:
		created += fmt.Sprintf(", suggested by the external searcher from the log up to seq %d", x.SearcherSeq)
	case x.SearchAlg == tuning.SearchExternal:
		created += ", suggested by the external searcher"
	}
	for _, a := range x.Driver {
		switch a.Method {
		case events.DriverSuggest:
			created += fmt.Sprintf(", suggested by %s, the driver's searcher, from the log up to seq %d", a.By, a.Through)
		case events.DriverSample:
			created += ", its sample_from values from the driver"
		}
	}
	fmt.Fprintf(tw, "created\t\t%s\n", created)
	x.printDriver(tw)
	end := x.EndReason
	for _, d := range x.Decisions {
		fmt.Fprintf(tw, "#%d %s\t%s\t%s\n", d.Ordinal, d.By, d.Action, x.inputs(d))
		if end == d.Quoted() {
			end = fmt.Sprintf("stopped by #%d", d.Ordinal)
		}
	}
	for _, d := range x.Pending {
		fmt.Fprintf(tw, "#%d %s\t%s\t%s (not in the log yet)\n", d.Ordinal, d.By, d.Action, x.inputs(d))
	}
	if !state.Terminal(x.Status) {
		end = "not ended"
	}
	fmt.Fprintf(tw, "end\t%s\t%s\n", x.Status, end)
	return tw.Flush()
}

// printDriver writes what the driver's stopper answered about the trial's
// results (a run of results it let go on as one line) and each exploit
// config its functions finished.
func (x *explanation) printDriver(w io.Writer) {
	var on []any // training_iterations let go on, not written yet
	flush := func(by string) {
		if len(on) > 0 {
			fmt.Fprintf(w, "asked %s\tgoes on\tat training_iteration %v", by, on[0])
			if len(on) > 1 {
				fmt.Fprintf(w, " to %v (%d results)", on[len(on)-1], len(on))
			}
			fmt.Fprintln(w)
			on = nil
		}
	}
	by := ""
	for _, a := range x.Driver {
		switch {
		case a.Method == events.DriverExplore:
			flush(by)
			fmt.Fprintf(w, "explored by %s\t\tconfig %s\n", a.By, show.JSON(a.Answer.Config))
		case a.Method != events.DriverStop:
		case !a.Answer.Stop && !a.Answer.StopAll:
			by = a.By
			on = append(on, a.Result["training_iteration"])
		default:
			flush(by)
			verdict := "stop"
			switch {
			case a.Answer.StopAll && a.Answer.Stop:
				verdict = "stop, stop_all"
			case a.Answer.StopAll:
				verdict = "stop_all"
			}
			fmt.Fprintf(w, "asked %s\t%s\tat training_iteration %v\n", a.By, verdict, a.Result["training_iteration"])
		}
	}
	flush(by)
}

// inputs says what a decision came from: its inputs when the detail holds
// them, else its reason.
func (x *explanation) inputs(d events.TrialDecided) string {
	sd, err := sched.DecisionOf(d.Detail)
	if err != nil {
		return d.Reason
	}
	sd.Action, sd.Reason = sched.Action(d.Action), d.Reason
	return sd.Describe(x.timeAttr, show.JSON)
}
