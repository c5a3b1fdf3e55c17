package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/show"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/services/controller"
	"github.com/tunejet/tunejet/tune"

	"github.com/tunejet/tunejet/internal/restore/restorestate"
)

func newStatusCmd() *cobra.Command {
	var (
		conn    connFlags
		asJSON  bool
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the experiments and the live runners of a deployment",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			opts, err := deploymentOptions(cmd, conn)
			if err != nil {
				return err
			}
			b, err := bus.Dial(ctx, opts, "tunejet/status", nopLogger())
			if err != nil {
				return err
			}
			defer b.Close()
			if err := b.Provision(ctx); err != nil {
				return err
			}
			return printStatus(ctx, b, os.Stdout, asJSON, verbose)
		},
	}
	conn.addDeployment(cmd.Flags(), clientConnectTimeout)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "also list each runner's warm workers and their memory (--json always has them)")
	return cmd
}

// status is what tunejet status prints; its JSON is --json's output.
type status struct {
	Experiments []statusExperiment `json:"experiments"`
	Runners     []statusRunner     `json:"runners"`
}

type statusExperiment struct {
	Name   string         `json:"name"`
	Status string         `json:"status"`
	Trials map[string]int `json:"trials"` // by trial status
	// Progress counts the trials ended of the search's total.
	Progress statusProgress `json:"progress"`
	progress state.Progress
	// Pending are the trials no live runner can hold, and why.
	Pending []statusPending `json:"pending,omitempty"`
	// Driver says what the experiment waits for from its driver (the
	// Python Tuner.fit() serving its stopper or searcher), if anything.
	Driver string `json:"driver,omitempty"`
}

// statusProgress is state.Progress as JSON: total -1 is unbounded
// (num_samples -1), 0 not known yet; eta_s 0 when it cannot be told.
type statusProgress struct {
	Ended      int     `json:"ended"`
	Total      int     `json:"total"`
	ETASeconds float64 `json:"eta_s"`
}

type statusPending struct {
	TrialID string `json:"trial_id"`
	Reason  string `json:"reason"`
}

type statusRunner struct {
	Name     string           `json:"name"`
	Hostname string           `json:"hostname"`
	PID      int              `json:"pid"`
	Capacity events.Resources `json:"capacity"`
	Held     events.Resources `json:"held"`
	Trials   []statusAttempt  `json:"trials"`
	// Workers are its warm workers: Python trainables' fork servers.
	Workers []bus.WarmWorker `json:"workers"`
	info    bus.RunnerInfo
}

type statusAttempt struct {
	Experiment string           `json:"experiment"`
	TrialID    string           `json:"trial_id"`
	Attempt    int              `json:"attempt"`
	Resources  events.Resources `json:"resources"`
	GPUIDs     []string         `json:"gpu_ids,omitempty"`
}

// readStatus folds the experiments from the log and reads the live
// runners from the registry.
func readStatus(ctx context.Context, b *bus.Bus) (*status, error) {
	var names []string
	err := b.Replay(ctx, events.TypeSubjects("*", events.WriterClient, events.TypeExperimentSubmitted), func(ev *events.Event) {
		names = append(names, ev.Experiment)
	})
	if err != nil {
		return nil, err
	}
	runners, _, err := b.LiveRunners(ctx)
	if err != nil {
		return nil, err
	}
	totals := bus.Totals(runners)
	out := &status{Experiments: []statusExperiment{}, Runners: []statusRunner{}}
	for _, name := range names {
		st, err := restorestate.Logged(ctx, b, name)
		if err != nil {
			return nil, fmt.Errorf("status of %s: %w", name, err)
		}
		p := st.Progress(time.Now())
		e := statusExperiment{Name: name, Status: st.Status, Trials: st.Counts(), Progress: statusProgress{Ended: p.Ended, Total: p.Total, ETASeconds: p.ETA.Seconds()}, progress: p}
		if st.Status == state.ExperimentRunning {
			e.Driver = st.DriverWait()
			for _, t := range st.TrialList() {
				if why := controller.Unfit(st.Spec, t, totals); why != "" {
					e.Pending = append(e.Pending, statusPending{TrialID: t.ID, Reason: why})
				}
			}
		}
		out.Experiments = append(out.Experiments, e)
	}
	for _, r := range runners {
		sr := statusRunner{Name: r.Name, Hostname: r.Hostname, PID: r.PID, Capacity: r.Total(), Held: r.Held(), Trials: []statusAttempt{}, Workers: r.Workers, info: r}
		if sr.Workers == nil {
			sr.Workers = []bus.WarmWorker{}
		}
		for _, t := range r.Trials {
			sr.Trials = append(sr.Trials, statusAttempt{Experiment: t.Experiment, TrialID: t.TrialID, Attempt: t.Attempt, Resources: t.Shape(), GPUIDs: t.GPUIDs})
		}
		out.Runners = append(out.Runners, sr)
	}
	return out, nil
}

// printStatus writes the experiments (folded from the log) and the live
// runners (from the registry), as tables or, with asJSON, as JSON.
func printStatus(ctx context.Context, b *bus.Bus, w io.Writer, asJSON, verbose bool) error {
	s, err := readStatus(ctx, b)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EXPERIMENT\tSTATUS\tTRIALS\tPROGRESS")
	var waiting []string
	for _, e := range s.Experiments {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, e.Status, tune.TrialCounts(e.Trials), show.Progress(e.progress))
		for _, p := range e.Pending {
			waiting = append(waiting, fmt.Sprintf("%s/%s PENDING: %s", e.Name, p.TrialID, p.Reason))
		}
		if e.Driver != "" {
			waiting = append(waiting, e.Name+" "+e.Driver)
		}
	}
	tw.Flush()
	for _, line := range waiting {
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUNNER\tHOST\tHELD/CAPACITY\tTRIALS")
	for _, r := range s.Runners {
		var trials []string
		for _, t := range r.info.Trials {
			held := t.Shape().String()
			if len(t.GPUIDs) > 0 {
				held += " on " + strings.Join(t.GPUIDs, ",")
			}
			trials = append(trials, fmt.Sprintf("%s/%s#%d(%s)", t.Experiment, t.TrialID, t.Attempt, held))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Hostname, heldOf(r.info), strings.Join(trials, " "))
	}
	if err := tw.Flush(); err != nil || !verbose {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUNNER\tWARM WORKER\tEXPERIMENT\tTRAINABLE\tGPUS\tRUNNING\tTRIALS\tRSS\tIDLE")
	for _, r := range s.Runners {
		for _, ww := range r.Workers {
			idle := "-"
			if !ww.IdleSince.IsZero() {
				idle = time.Since(ww.IdleSince).Round(time.Second).String()
			}
			gpus := strings.Join(ww.GPUIDs, ",")
			if gpus == "" {
				gpus = "-"
			}
			fmt.Fprintf(tw, "%s\tpid %d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", r.Name, ww.PID, ww.Experiment, ww.Trainable,
				gpus, ww.Running, ww.Trials, events.FormatMemory(float64(ww.RSSBytes)), idle)
		}
	}
	return tw.Flush()
}

// heldOf is "cpu 2/4 gpu 0.5/1": what a runner's attempts hold of each
// resource it has.
func heldOf(r bus.RunnerInfo) string {
	total, held := r.Total(), r.Held()
	parts := make([]string, 0, len(total))
	for _, name := range total.Names() {
		parts = append(parts, fmt.Sprintf("%s %s/%s", name, held.Amount(name), total.Amount(name)))
	}
	return strings.Join(parts, " ")
}
