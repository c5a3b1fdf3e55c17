package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/services/controller"
	"github.com/tunejet/tunejet/tune"
)

func newStatusCmd() *cobra.Command {
	var conn connFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the experiments and the live runners of a deployment",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if conn.o.URL == "" {
				return errors.New("status needs --nats URL (or NATS_URL): the embedded server lives only while `tunejet run` runs")
			}
			ctx := cmd.Context()
			opts, err := conn.options(nopLogger())
			if err != nil {
				return err
			}
			nc, err := bus.Connect(ctx, opts)
			if err != nil {
				return err
			}
			defer nc.Close()
			b, err := bus.New(nc, "tunejet/status", nopLogger())
			if err != nil {
				return err
			}
			if err := b.Provision(ctx); err != nil {
				return err
			}
			return printStatus(ctx, b, os.Stdout)
		},
	}
	conn.add(cmd.Flags(), clientConnectTimeout)
	return cmd
}

// printStatus writes the experiments (folded from the log) and the live
// runners (from the registry).
func printStatus(ctx context.Context, b *bus.Bus, w io.Writer) error {
	var names []string
	err := b.Replay(ctx, events.TypeSubjects("*", events.WriterClient, events.TypeExperimentSubmitted), func(ev *events.Event) {
		names = append(names, ev.Experiment)
	})
	if err != nil {
		return err
	}
	var runners []bus.RunnerInfo
	kv, ok, err := b.ExistingRunners(ctx)
	if err != nil {
		return err
	}
	if ok {
		if runners, err = bus.ListRunners(ctx, kv); err != nil {
			return err
		}
	}
	totals := bus.Totals(runners)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EXPERIMENT\tSTATUS\tTRIALS")
	var waiting []string
	for _, name := range names {
		st, err := foldLogged(ctx, b, name)
		if err != nil {
			return fmt.Errorf("status of %s: %w", name, err)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, st.Status, tune.TrialCounts(st.Counts()))
		if st.Status == state.ExperimentRunning {
			for _, t := range st.TrialList() {
				if why := controller.Unfit(st.Spec, t, totals); why != "" {
					waiting = append(waiting, fmt.Sprintf("%s/%s PENDING: %s", name, t.ID, why))
				}
			}
		}
	}
	tw.Flush()
	for _, line := range waiting {
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUNNER\tHOST\tHELD/CAPACITY\tTRIALS")
	for _, r := range runners {
		var trials []string
		for _, t := range r.Trials {
			held := t.Shape().String()
			if len(t.GPUIDs) > 0 {
				held += " on " + strings.Join(t.GPUIDs, ",")
			}
			trials = append(trials, fmt.Sprintf("%s/%s#%d(%s)", t.Experiment, t.TrialID, t.Attempt, held))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Hostname, heldOf(r), strings.Join(trials, " "))
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
