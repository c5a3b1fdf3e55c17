package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/spec"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/tune"
)

func newRunCmd() *cobra.Command {
	var (
		sf                        stackFlags
		objs                      objectFlags
		driver                    driverFlag
		dash                      runDashboard
		storagePath, name, resume string
		file                      string // FILE, among the arguments (see runDashboard.file)
		failOnError, newRun       bool
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

An experiment whose name already has state is refused, unless --resume auto:
then it is restored when it can be (tunejet can-restore), and started fresh
otherwise. A restore runs FILE's trainable, which must be the same as the
stored one, never a command named by a state file. With --new-run it starts
a new run instead, as Ray's Tuner.fit() does in an existing experiment
folder: the old run leaves the event log (as tunejet forget), its files stay
in storage, and the new run's trials and state file join them, so that
tunejet results (and a later restore) read the new run. A run of that name
that is live is still refused.

An experiment of 10000 trials or more (grid points × num_samples) is
announced on stderr with its size before it starts.

The summary lists the trials that ended ERROR, each with its error's last
line and its error.txt.

Exit status: 0 when the experiment completes (even with errored trials:
exit status 3 with --fail-on-error when any trial ended ERROR), 1 on a bad
file or an infrastructure failure, 2 on a usage error (the arguments or
flags), 130 when interrupted.`,
		Args: func(cmd *cobra.Command, args []string) error {
			var err error
			file, err = dash.file(cmd.Flags(), args)
			return err
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if newRun && resume != "" {
				return usageError(cmd, fmt.Errorf("--new-run and --resume %s exclude each other", resume))
			}
			s, err := spec.ParseFile(file)
			if err != nil {
				return err
			}
			if storagePath != "" {
				s.RunConfig.StoragePath = storagePath
			}
			if name != "" {
				s.Name = name
			}
			opts, err := sf.options()
			if err != nil {
				return err
			}
			more, err := objs.options(cmd.Context())
			if err != nil {
				return err
			}
			opts = append(opts, more...)
			if newRun {
				opts = append(opts, tune.WithNewRun())
			}
			drv, err := driver.options()
			if err != nil {
				return err
			}
			opts = append(opts, drv...)
			opts, stopDashboard, err := dash.start(cmd.Context(), &sf, opts, os.Stderr)
			if err != nil {
				return err
			}
			defer func() { _ = stopDashboard() }() // stopped below, but for an early return
			tuner, err := tune.NewTuner(s.Trainable.Name, append(opts, tune.WithSpec(*s))...)
			if err != nil {
				return err
			}
			full, err := tuner.Spec()
			if err != nil {
				return err
			}
			expPath := storage.Join(full.RunConfig.StoragePath, full.Name)
			announceSize(os.Stderr, full)
			switch resume {
			case "":
			case "auto":
				r, err := tune.CanRestore(cmd.Context(), expPath, opts...)
				if err != nil {
					return err
				}
				if r.OK {
					fmt.Fprintf(os.Stderr, "Restoring %s (%s).\n", expPath, tune.TrialCounts(r.Counts))
					// The file's trainable, never the one the state names.
					if tuner, err = tune.Restore(cmd.Context(), expPath, s.Trainable, opts...); err != nil {
						return err
					}
				}
			default:
				return fmt.Errorf("--resume %q: the only value is auto", resume)
			}
			err = fitAndSummarize(cmd, tuner, expPath, sf.conn.o.URL != "", failOnError)
			dash.serveOn(cmd.Context(), os.Stderr)
			return errors.Join(err, stopDashboard())
		},
	}
	sf.add(cmd)
	objs.add(cmd)
	driver.add(cmd)
	dash.add(cmd.Flags())
	cmd.Flags().StringVar(&storagePath, "storage-path", "", "override run_config.storage_path")
	cmd.Flags().StringVar(&name, "name", "", "override the experiment name")
	cmd.Flags().StringVar(&resume, "resume", "", "auto: restore the experiment if it has state, else start it")
	cmd.Flags().BoolVar(&failOnError, "fail-on-error", false, failOnErrorUsage)
	cmd.Flags().BoolVar(&newRun, "new-run", false, "start a new run when the experiment already has state and no run of it is live (Ray's Tuner.fit)")
	return cmd
}

// largeExperiment is the number of trials from which tunejet run
// announces an experiment's size before it starts.
const largeExperiment = 10_000

// announceSize writes one line to w when the experiment creates
// largeExperiment trials or more (a grid of 10^6 points is easily written
// by mistake).
func announceSize(w io.Writer, s events.ExperimentSpec) {
	space, err := search.ParseSpace(s.ParamSpace)
	if err != nil {
		return // the controller refuses it with the reason
	}
	if n := space.NumTrials(s.TuneConfig.NumSamples); n >= largeExperiment {
		fmt.Fprintf(w, "tunejet: experiment %s creates %d trials (a grid of %d points × num_samples %d)\n",
			s.Name, n, space.GridSize(), s.TuneConfig.NumSamples)
	}
}
