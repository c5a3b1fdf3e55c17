package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/spec"
	"github.com/tunejet/tunejet/tune"
)

// stackFlags choose between a deployment (--nats) and the embedded stack.
type stackFlags struct {
	conn     connFlags
	logs     logFlags
	storeDir string
	slots    int
	capacity capacityFlags
	verbose  int
	reporter tune.Reporter
}

func (f *stackFlags) add(cmd *cobra.Command) {
	f.addStore(cmd)
	cmd.Flags().IntVar(&f.slots, "slots", 0, "embedded runner's trial slots: a shorthand for --cpus N (default: number of CPUs)")
	f.capacity.addResources(cmd.Flags(), "the embedded runner")
	cmd.Flags().IntVar(&f.verbose, "verbose", tune.VerboseTable, "status table, as Ray's verbose: 0 none, 1 the status line, 2 the trials with their varying hyperparameters and metric, 3 every trial and metric")
	cmd.Flags().StringSliceVar(&f.reporter.MetricColumns, "metric-columns", nil, "the status table's metric columns, in order (Ray's CLIReporter metric_columns; default the experiment's metric)")
	cmd.Flags().StringSliceVar(&f.reporter.ParameterColumns, "parameter-columns", nil, "the status table's hyperparameter columns, in order (Ray's CLIReporter parameter_columns; default those that vary)")
	cmd.Flags().DurationVar(&f.reporter.Every, "report-every", 0, "draw the status table at most this often (Ray's CLIReporter max_report_frequency; default 1s on a terminal, 5s otherwise)")
}

// addStore adds the flags that say where the log is, the deployment or
// the embedded server's store, and no runner's: those of can-restore.
func (f *stackFlags) addStore(cmd *cobra.Command) {
	f.conn.add(cmd.Flags(), clientConnectTimeout)
	f.logs.add(cmd.Flags(), "warn")
	cmd.Flags().StringVar(&f.storeDir, "store-dir", bus.DefaultStoreDir(), "embedded nats-server's JetStream store")
}

// options are the tune options the flags say.
func (f *stackFlags) options() ([]tune.Option, error) {
	log, err := f.logs.logger()
	if err != nil {
		return nil, err
	}
	capacity, err := f.capacity.embedded(f.slots)
	if err != nil {
		return nil, err
	}
	opts := []tune.Option{
		tune.WithProgress(os.Stdout), tune.WithVerbose(f.verbose), tune.WithReporter(f.reporter),
		tune.WithLogger(log), tune.WithRunnerCapacity(capacity),
	}
	if f.conn.o.URL != "" {
		o, err := f.conn.options(log)
		if err != nil {
			return nil, err
		}
		return append(opts, tune.WithNATS(tuneNATS(o))), nil
	}
	return append(opts, tune.WithStoreDir(f.storeDir)), nil
}

// tuneNATS is tune's form of the connect options.
func tuneNATS(o bus.ConnectOptions) tune.NATSOptions {
	return tune.NATSOptions{
		URL: o.URL, Name: o.Name, User: o.User, Password: o.Password, Token: o.Token,
		CredsFile: o.CredsFile, NKeyFile: o.NKeyFile, TLSCA: o.TLSCA, TLSCert: o.TLSCert, TLSKey: o.TLSKey,
		ConnectTimeout: o.ConnectTimeout, Log: o.Log,
	}
}

func newRestoreCmd() *cobra.Command {
	var (
		sf                                              stackFlags
		objs                                            objectFlags
		driver                                          driverFlag
		resumeUnfinished, resumeErrored, restartErrored bool
		trustStored, failOnError                        bool
		paramSpaceFile                                  string
		numSamples                                      int
	)
	cmd := &cobra.Command{
		Use:   "restore PATH [EXPERIMENT_FILE]",
		Short: "Continue an interrupted experiment and watch it to the end",
		Long: `Restore the experiment at PATH — its directory in storage,
<storage_path>/<name>, as a path or a URL — from the event log when it still
holds it, else from its newest experiment_state-*.json, and run it to the end
like tunejet run.

What it runs: from the event log, the trainable the log holds. From an
experiment_state-*.json alone, the trainable of EXPERIMENT_FILE, the
experiment's file (it must be the same command as the stored one): the state
file can be edited by anyone who can write the storage folder, so the
command it names is never run without it — the restore is refused, printing
that command. --trust-stored-trainable runs it anyway, after printing it.
With EXPERIMENT_FILE, only its trainable is used (not its param space), and
its run_config.sync_config: when PATH holds no experiment_state-*.json and the
file gives an upload_dir, PATH is first brought back from <upload_dir>/<name>
with its syncer's sync_down command (or from the bucket or folder upload_dir
names), and the restored run mirrors there with the file's upload_dir, syncer
and exclude. Those of a state file are never used: restored from one without
EXPERIMENT_FILE's upload_dir, the run does not mirror; restored from the log,
it keeps the experiment's mirror.

As in Ray Tune: finished trials are kept; unfinished ones resume from their
latest checkpoint (--resume-unfinished=false ends them TERMINATED); errored
ones stay ERROR unless --resume-errored (same trial, from its checkpoint) or
--restart-errored (a new trial from scratch). --param-space FILE re-specifies
the param space (YAML or JSON; the same keys). --num-samples N sets
num_samples: a larger one adds trials to the experiment, finished or
interrupted, which its search algorithm suggests from every trial so far
(tpe and bayesopt learn from them all; a smaller one is refused).

Exit status as tunejet run's: 0 when the experiment completes (even with
errored trials: exit status 3 with --fail-on-error when any trial ended
ERROR), 1 when it cannot be restored or on an infrastructure failure, 130
when interrupted.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := sf.options()
			if err != nil {
				return err
			}
			var trainable any
			if len(args) == 2 {
				if trustStored {
					return fmt.Errorf("--trust-stored-trainable runs the stored trainable; EXPERIMENT_FILE %s gives one: pass one or the other", args[1])
				}
				s, err := spec.ParseFile(args[1])
				if err != nil {
					return err
				}
				trainable = s.Trainable
				if s.RunConfig.SyncConfig.UploadDir != "" {
					// A PATH with no state file is brought back from
					// upload_dir first, with this file's sync_down, and
					// the restored run mirrors with this file's commands.
					opts = append(opts, tune.WithSyncConfig(s.RunConfig.SyncConfig))
				}
			}
			if trustStored {
				opts = append(opts, tune.WithTrustStoredTrainable())
			}
			opts = append(opts, tune.WithResumeUnfinished(resumeUnfinished))
			if resumeErrored {
				opts = append(opts, tune.WithResumeErrored())
			}
			if restartErrored {
				opts = append(opts, tune.WithRestartErrored())
			}
			more, err := objs.options(cmd.Context())
			if err != nil {
				return err
			}
			opts = append(opts, more...)
			drv, err := driver.options()
			if err != nil {
				return err
			}
			opts = append(opts, drv...)
			if paramSpaceFile != "" {
				space, err := readParamSpace(paramSpaceFile)
				if err != nil {
					return err
				}
				opts = append(opts, tune.WithParamSpace(space))
			}
			if numSamples != 0 {
				opts = append(opts, tune.WithNumSamples(numSamples))
			}
			tuner, err := tune.Restore(cmd.Context(), args[0], trainable, opts...)
			if err != nil {
				return explainRefusal(err, args[0])
			}
			return explainRefusal(fitAndSummarize(cmd, tuner, args[0], sf.conn.o.URL != "", failOnError), args[0])
		},
	}
	sf.add(cmd)
	objs.add(cmd)
	driver.add(cmd)
	cmd.Flags().BoolVar(&trustStored, "trust-stored-trainable", false, "when the state comes from an experiment_state-*.json alone, run the trainable it names (printed first)")
	cmd.Flags().BoolVar(&resumeUnfinished, "resume-unfinished", true, "resume trials that had not finished")
	cmd.Flags().BoolVar(&resumeErrored, "resume-errored", false, "resume errored trials from their latest checkpoint")
	cmd.Flags().BoolVar(&restartErrored, "restart-errored", false, "restart errored trials from scratch as new trials")
	cmd.Flags().StringVar(&paramSpaceFile, "param-space", "", "a YAML or JSON file re-specifying param_space (same keys)")
	cmd.Flags().IntVar(&numSamples, "num-samples", 0, "set num_samples: a larger one adds trials to the experiment (-1: sample until stopped)")
	cmd.Flags().BoolVar(&failOnError, "fail-on-error", false, failOnErrorUsage)
	return cmd
}

// readParamSpace reads a param_space mapping, alone or under a
// "param_space" key.
func readParamSpace(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("param space: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("param space %s: %w", path, err)
	}
	if inner, ok := m["param_space"].(map[string]any); ok && len(m) == 1 {
		m = inner
	}
	return m, nil
}

func newCanRestoreCmd() *cobra.Command {
	var sf stackFlags
	cmd := &cobra.Command{
		Use:   "can-restore PATH",
		Short: "Say whether the experiment at PATH can be restored (exit 0) or not (exit 1)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := sf.options()
			if err != nil {
				return err
			}
			r, err := tune.CanRestore(cmd.Context(), args[0], opts...)
			if err != nil {
				return err
			}
			if !r.OK {
				return &exitError{code: 1, err: errors.New(r.Reason)}
			}
			from := "the event log"
			if r.Source == api.SourceSnapshot {
				from = r.Snapshot
			}
			fmt.Printf("can restore %s: %s, from %s\n", args[0], tune.TrialCounts(r.Counts), from)
			for _, why := range r.Skipped {
				fmt.Fprintf(os.Stderr, "Skipped %s\n", why)
			}
			if r.TrainableFrom == api.TrainableFromStorage && r.Trainable != nil {
				fmt.Fprintf(os.Stderr, "The state file names this trainable, which a restore runs only if trusted (--trust-stored-trainable):\n  %s\nRestore with the experiment's file instead: tunejet restore %s EXPERIMENT_FILE\n",
					restore.Describe(*r.Trainable), args[0])
			}
			return nil
		},
	}
	sf.addStore(cmd) // it runs no trial: no runner flags
	return cmd
}

// explainRefusal prints, for a restore refused because it was given no
// trainable and the state comes from a file in storage, the trainable that
// file names and the two ways forward; other errors pass unchanged.
func explainRefusal(err error, expPath string) error {
	var te *tune.TrainableError
	if !errors.Is(err, tune.ErrTrainableRequired) || !errors.As(err, &te) {
		return err
	}
	fmt.Fprintf(os.Stderr, `Cannot restore %s: the event log does not hold the experiment, so its state
comes from %s in storage, and a restore never runs code named by a file in storage.
That file names this trainable:
  %s
Restore with the experiment's file, whose trainable is run (it must be the same):
  tunejet restore %s EXPERIMENT_FILE
or, if you trust the state file, run the trainable it names:
  tunejet restore %s --trust-stored-trainable
`, expPath, te.Snapshot, restore.Describe(te.Stored), expPath, expPath)
	return &exitError{code: 1, err: fmt.Errorf("%w %s: %w", tune.ErrCannotRestore, expPath, tune.ErrTrainableRequired)}
}

// exitErroredTrials is the exit status of tunejet run and restore
// --fail-on-error when a trial ended ERROR.
const exitErroredTrials = 3

// failOnErrorUsage documents --fail-on-error.
const failOnErrorUsage = "exit with status 3 when the experiment completes with any trial ended ERROR (for CI)"

// fitAndSummarize runs a tuner to its end, or reports the interruption the
// way Ray does, with the command that continues it. With failOnError, a
// completed experiment with errored trials exits exitErroredTrials.
func fitAndSummarize(cmd *cobra.Command, tuner *tune.Tuner, expPath string, remote, failOnError bool) error {
	results, err := tuner.Fit(cmd.Context())
	switch {
	case errors.Is(err, tune.ErrInterrupted) && remote:
		return &exitError{code: 130, err: fmt.Errorf("stopped watching; the experiment keeps running on the deployment")}
	case errors.Is(err, tune.ErrInterrupted):
		fmt.Fprintf(os.Stderr, "Experiment has been interrupted, but the most recent state was saved.\nContinue it with:\n  tunejet restore %s\n", expPath)
		return &exitError{code: 130, err: err}
	case err != nil:
		return err
	}
	fmt.Print(tune.Summary(results))
	if n := results.NumErrors(); failOnError && n > 0 {
		return &exitError{code: exitErroredTrials, err: fmt.Errorf("%d trials ended ERROR (--fail-on-error)", n)}
	}
	return nil
}
