package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/spec"
	"github.com/tunejet/tunejet/tune"
)

func newRunCmd() *cobra.Command {
	var (
		conn                    connFlags
		logs                    logFlags
		storagePath, name, path string
		storeDir                string
		slots                   int
	)
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run an experiment file and watch it to the end",
		Long: `Run the experiment described by FILE (YAML or JSON) and watch it: a live
table of trials, then a summary with the best trial.

With no --nats URL (and no NATS_URL), tunejet starts an embedded nats-server
with JetStream and every service in this process. With --nats it submits the
experiment to that deployment and watches it; Ctrl-C then stops watching and
leaves the experiment running there.

Exit status: 0 when the experiment completes (even with errored trials), 1 on
a bad file or an infrastructure failure, 130 when interrupted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path = args[0]
			s, err := spec.ParseFile(path)
			if err != nil {
				return err
			}
			if storagePath != "" {
				s.RunConfig.StoragePath = storagePath
			}
			if name != "" {
				s.Name = name
			}
			log, err := logs.logger()
			if err != nil {
				return err
			}
			opts := []tune.Option{tune.WithSpec(*s), tune.WithProgress(os.Stdout), tune.WithLogger(log), tune.WithRunnerSlots(slots)}
			if conn.o.URL != "" {
				opts = append(opts, tune.WithNATS(conn.o))
			} else {
				opts = append(opts, tune.WithStoreDir(storeDir))
			}
			tuner, err := tune.NewTuner(s.Trainable.Name, opts...)
			if err != nil {
				return err
			}
			results, err := tuner.Fit(cmd.Context())
			if errors.Is(err, tune.ErrInterrupted) && conn.o.URL != "" {
				return &exitError{code: 130, err: fmt.Errorf("stopped watching; experiment %q keeps running on the deployment", s.Name)}
			}
			if errors.Is(err, tune.ErrInterrupted) {
				return &exitError{code: 130, err: fmt.Errorf("%w; the most recent state was saved", err)}
			}
			if err != nil {
				return err
			}
			fmt.Print(tune.Summary(results))
			return nil
		},
	}
	conn.add(cmd.Flags())
	logs.add(cmd.Flags(), "warn")
	cmd.Flags().StringVar(&storagePath, "storage-path", "", "override run_config.storage_path")
	cmd.Flags().StringVar(&name, "name", "", "override the experiment name")
	cmd.Flags().StringVar(&storeDir, "store-dir", bus.DefaultStoreDir(), "embedded nats-server's JetStream store")
	cmd.Flags().IntVar(&slots, "slots", 0, "embedded runner's trial slots (default: number of CPUs)")
	return cmd
}
