package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/services/controller"
	"github.com/tunejet/tunejet/services/runner"
	"github.com/tunejet/tunejet/services/syncer"
)

// serviceCmds are the commands that run one service against a deployment.
func serviceCmds() []*cobra.Command {
	var slots int
	var name, workDir, storagePath string
	var countPreemption bool
	runnerCmd := serviceCmd("runner", "Run trials pulled from every running experiment", func(ctx context.Context, b *bus.Bus) error {
		return runner.New(b, runner.Config{Name: name, Slots: slots, WorkDir: workDir, CountPreemption: countPreemption}).Run(ctx)
	})
	runnerCmd.Flags().BoolVar(&countPreemption, "count-preemption", os.Getenv("TUNEJET_COUNT_PREEMPTION_AS_FAILURE") == "1",
		"count trials handed back on SIGTERM against max_failures (env TUNEJET_COUNT_PREEMPTION_AS_FAILURE=1)")
	runnerCmd.Flags().IntVar(&slots, "slots", 0, "trials to run at once (default: number of CPUs)")
	runnerCmd.Flags().StringVar(&name, "name", "", "runner name (default: <hostname>-<pid>)")
	runnerCmd.Flags().StringVar(&workDir, "work-dir", "", "local trial directories (default: <tmp>/tunejet-runner/<name>)")

	controllerCmd := serviceCmd("controller", "Decide and schedule trials of submitted experiments", func(ctx context.Context, b *bus.Bus) error {
		return controller.New(b, controller.Config{StoragePath: storagePath}).Run(ctx)
	})
	controllerCmd.Flags().StringVar(&storagePath, "storage-path", "", "storage for experiments that name none (default ~/tunejet_results)")

	syncerCmd := serviceCmd("syncer", "Write experiment results and state to storage", func(ctx context.Context, b *bus.Bus) error {
		return syncer.New(b, syncer.Config{}).Run(ctx)
	})
	restorerCmd := serviceCmd("restorer", "Restore interrupted experiments (not available yet)", func(ctx context.Context, b *bus.Bus) error {
		return errors.New("the restorer service is not available yet")
	})
	return []*cobra.Command{controllerCmd, runnerCmd, syncerCmd, restorerCmd}
}

// serviceCmd builds "tunejet <name>": connect to --nats and run.
func serviceCmd(name, short string, run func(context.Context, *bus.Bus) error) *cobra.Command {
	var conn connFlags
	var logs logFlags
	cmd := &cobra.Command{
		Use:   name,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logs.logger()
			if err != nil {
				return err
			}
			conn.o.Name = "tunejet-" + name
			nc, err := bus.Connect(cmd.Context(), conn.o)
			if err != nil {
				return err
			}
			defer nc.Drain()
			host, _ := os.Hostname()
			b, err := bus.New(nc, fmt.Sprintf("tunejet/%s/%s-%d", name, host, os.Getpid()), log)
			if err != nil {
				return err
			}
			log.Info().Str("service", name).Str("nats", nc.ConnectedUrlRedacted()).Msg("starting")
			return run(cmd.Context(), b)
		},
	}
	conn.add(cmd.Flags())
	logs.add(cmd.Flags(), "info")
	return cmd
}
