package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/restore/restorestate"
	"github.com/tunejet/tunejet/tune"
)

// storeFlags say which event log a command reads or edits: a deployment's
// (--nats) or the embedded store (--store-dir).
type storeFlags struct {
	conn     connFlags
	storeDir string
}

func (f *storeFlags) add(cmd *cobra.Command) {
	f.conn.add(cmd.Flags(), clientConnectTimeout)
	cmd.Flags().StringVar(&f.storeDir, "store-dir", bus.DefaultStoreDir(), "embedded nats-server's JetStream store, when there is no --nats")
}

// open connects to the log, saying what to do when the embedded store is
// missing or a running tunejet serves it.
func (f *storeFlags) open(ctx context.Context, name string) (*bus.Bus, func(), error) {
	b, closeFn, err := readBus(ctx, f.conn, f.storeDir, name, nopLogger())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("no embedded store at %s: give the --store-dir of your runs, or a deployment's --nats URL", f.storeDir)
	case errors.Is(err, bus.ErrStoreInUse):
		return nil, nil, fmt.Errorf("%w: a tunejet run is using it; wait for it to end", err)
	}
	return b, closeFn, err
}

func newExperimentsCmd() *cobra.Command {
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "experiments",
		Short: "List the experiments the event log holds, with their state",
		Long: `List the experiments whose events the event log holds — the embedded store
(--store-dir) or a deployment's (--nats) — with their state (PENDING, RUNNING,
INTERRUPTED, COMPLETED), their trials, the controller that leads a running one,
and their storage path. tunejet forget NAME removes one from the log.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, closeFn, err := sf.open(cmd.Context(), "experiments")
			if err != nil {
				return err
			}
			defer closeFn()
			return printExperiments(cmd.Context(), b, os.Stdout)
		},
	}
	sf.add(cmd)
	return cmd
}

// printExperiments writes a line per experiment in the log.
func printExperiments(ctx context.Context, b *bus.Bus, w io.Writer) error {
	names, err := b.LoggedExperiments(ctx)
	if err != nil {
		return err
	}
	leases, haveLeases, err := b.ExistingLeases(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EXPERIMENT\tSTATUS\tTRIALS\tCONTROLLER\tSTORAGE")
	for _, name := range names {
		st, err := restorestate.Logged(ctx, b, name)
		if err != nil {
			return err
		}
		controller := "-"
		if haveLeases {
			if holder, _, err := leases.Holder(ctx, name); err != nil {
				return err
			} else if holder != "" {
				controller = holder
			}
		}
		storage := st.StoragePath
		if storage == "" {
			storage = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, st.Status, tune.TrialCounts(st.Counts()), controller, storage)
	}
	return tw.Flush()
}

func newForgetCmd() *cobra.Command {
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "forget NAME",
		Short: "Remove an experiment from the event log",
		Long: `Remove experiment NAME from the event log — the embedded store (--store-dir)
or a deployment's (--nats): its events, its consumers, its staged checkpoints
and objects, and its lease. Services then no longer follow it: a syncer stops
trying to reach storage it cannot write. Its results in storage are left as
they are; tunejet restore can start it again from its newest stored state.

A running experiment (one whose controller holds its lease) is refused: stop it
first (Ctrl-C its tunejet run, or tunejet stop NAME on a deployment).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, name := cmd.Context(), args[0]
			b, closeFn, err := sf.open(ctx, "forget")
			if err != nil {
				return err
			}
			defer closeFn()
			names, err := b.LoggedExperiments(ctx)
			if err != nil {
				return err
			}
			if !slices.Contains(names, name) {
				return fmt.Errorf("the event log holds no experiment %q (tunejet experiments lists those it holds)", name)
			}
			st, err := restorestate.Logged(ctx, b, name)
			if err != nil {
				return err
			}
			f, err := b.Forget(ctx, name)
			if errors.Is(err, bus.ErrLeaseHeld) {
				return fmt.Errorf("refused: %w; stop it first (Ctrl-C its tunejet run, or tunejet stop %s), then forget it", err, name)
			}
			if err != nil {
				return err
			}
			removed := []string{fmt.Sprintf("%d events", f.Events)}
			if len(f.Consumers) > 0 {
				removed = append(removed, "consumers "+strings.Join(f.Consumers, ", "))
			}
			if f.Checkpoints {
				removed = append(removed, "its staged checkpoints and objects")
			}
			if f.DriverCursor {
				removed = append(removed, "its driver cursor")
			}
			fmt.Printf("Forgot %s: removed %s from the event log.\n", name, strings.Join(removed, "; "))
			if st.StoragePath != "" {
				fmt.Printf("Its results in storage are left as they are: %s\n", st.StoragePath)
			}
			return nil
		},
	}
	sf.add(cmd)
	return cmd
}
