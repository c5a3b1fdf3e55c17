package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/tune"
)

// deploymentOptions are the connect options of the commands that need a
// deployment.
func deploymentOptions(cmd *cobra.Command, conn connFlags) (bus.ConnectOptions, error) {
	if err := conn.required(cmd); err != nil {
		return bus.ConnectOptions{}, err
	}
	return conn.options(nopLogger())
}

// connectTo connects to a deployment for the commands that need one.
func connectTo(cmd *cobra.Command, conn connFlags) (*bus.Bus, func(), error) {
	opts, err := deploymentOptions(cmd, conn)
	if err != nil {
		return nil, nil, err
	}
	host, _ := os.Hostname()
	b, err := bus.Dial(cmd.Context(), opts, fmt.Sprintf("tunejet/client/%s-%d", host, os.Getpid()), nopLogger())
	if err != nil {
		return nil, nil, err
	}
	return b, b.Close, nil
}

func newAttachCmd() *cobra.Command {
	var conn connFlags
	cmd := &cobra.Command{
		Use:   "attach NAME",
		Short: "Watch a running experiment of a deployment (Ctrl-C detaches)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := deploymentOptions(cmd, conn)
			if err != nil {
				return err
			}
			st, err := tune.Watch(cmd.Context(), args[0], tune.WithNATS(tuneNATS(opts)), tune.WithProgress(os.Stdout))
			switch {
			case errors.Is(err, tune.ErrNoExperiment):
				return &exitError{code: 1, err: fmt.Errorf("no experiment named %q in the event log", args[0])}
			case errors.Is(err, tune.ErrInterrupted) && cmd.Context().Err() != nil:
				return &exitError{code: 130, err: fmt.Errorf("stopped watching; experiment %q keeps running", args[0])}
			case err != nil:
				return err
			}
			fmt.Printf("Experiment %s: %s (%s), %s.\n", st.Name, st.Status, st.EndReason, tune.TrialCounts(st.Counts))
			return nil
		},
	}
	conn.addDeployment(cmd.Flags(), clientConnectTimeout)
	return cmd
}

func newStopCmd() *cobra.Command {
	var (
		conn   connFlags
		trials []string
	)
	cmd := &cobra.Command{
		Use:   "stop NAME",
		Short: "Ask a deployment to stop an experiment, or some of its trials: they end TERMINATED",
		Long: `Ask a deployment to stop the experiment NAME: every trial ends TERMINATED
(reason "stopped") and the experiment completes. With --trial, only those
trials stop; the experiment goes on with the others.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, closeFn, err := connectTo(cmd, conn)
			if err != nil {
				return err
			}
			defer closeFn()
			exp := args[0]
			if err := events.ValidateID("experiment name", exp); err != nil {
				return err
			}
			if last, err := b.LastSeq(cmd.Context(), events.ExperimentSubjects(exp)); err != nil {
				return err
			} else if last == 0 {
				return &exitError{code: 1, err: fmt.Errorf("no experiment named %q in the event log", exp)}
			}
			if len(trials) == 0 {
				ev := b.Event(exp, events.WriterClient, &events.ExperimentStopRequested{Reason: "stopped by the user"})
				if _, err := b.Publish(cmd.Context(), ev); err != nil {
					return err
				}
				fmt.Printf("Asked to stop %s.\n", exp)
				return nil
			}
			for _, id := range trials {
				if err := events.ValidateID("trial id", id); err != nil {
					return err
				}
				created := events.Subject(exp, events.WriterController, events.TypeTrialCreated, id)
				if last, err := b.LastSeq(cmd.Context(), created); err != nil {
					return err
				} else if last == 0 {
					return &exitError{code: 1, err: fmt.Errorf("experiment %s has no trial %q", exp, id)}
				}
			}
			for _, id := range trials {
				ev := b.Event(exp, events.WriterClient, &events.TrialStopRequested{TrialID: id, Reason: "stopped by the user"})
				if _, err := b.Publish(cmd.Context(), ev); err != nil {
					return err
				}
				fmt.Printf("Asked to stop trial %s of %s.\n", id, exp)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&trials, "trial", nil, "stop only this trial (an id; repeatable, or comma-separated)")
	conn.addDeployment(cmd.Flags(), clientConnectTimeout)
	return cmd
}
