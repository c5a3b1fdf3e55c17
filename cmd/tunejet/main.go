// Command tunejet runs fault-tolerant hyperparameter tuning experiments on
// NATS JetStream.
//
//	tunejet run experiment.yaml          run on an embedded NATS, watch, summarize
//	tunejet results ~/tunejet_results/x  print an experiment's results
//	tunejet report loss=0.1              report from a command trainable
//	tunejet runner --nats URL            run one service against a deployment
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := interruptContext()
	defer stop()
	root := usageErrors(newRoot())
	err := root.ExecuteContext(ctx)
	if err == nil {
		return
	}
	code := 1
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		// Interrupted before the command's own answer to it (such as
		// while tunejet run still waits to submit): 130, as documented.
		code, err = 130, errors.New("interrupted")
	}
	if code != 0 {
		fmt.Fprintln(os.Stderr, "tunejet:", err)
	}
	os.Exit(code)
}

// interruptContext is cancelled by the first SIGINT or SIGTERM; a second
// one exits at once.
func interruptContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "tunejet: interrupted again; exiting now")
		os.Exit(130)
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "tunejet",
		Short:         "Fault-tolerant hyperparameter tuning on NATS JetStream",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionText(), // --version
	}
	root.SetVersionTemplate("{{.Version}}")
	root.AddCommand(newRunCmd(), newRestoreCmd(), newCanRestoreCmd(), newResultsCmd(), newExplainCmd(), newReportCmd(), newStatusCmd(), newAttachCmd(), newStopCmd(), newDashboardCmd(), newExperimentsCmd(), newForgetCmd())
	root.AddCommand(serviceCmds()...)
	root.AddCommand(newVersionCmd(), newNATSServerCmd())
	return root
}

// usageErrors makes every usage error of root and its commands — a wrong
// number of arguments, an unknown command or flag, a flag's bad value —
// exit with status 2 and print the command's usage line.
func usageErrors(root *cobra.Command) *cobra.Command {
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usageError(cmd, err) })
	// Without Args, cobra reports an unknown command before any validator
	// runs; with them, "tunejet" alone still prints the help.
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", s[0])
		}
		return usageError(cmd, errors.New(msg))
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	var wrap func(*cobra.Command)
	wrap = func(c *cobra.Command) {
		if args := c.Args; args != nil && c != root {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return usageError(cmd, err)
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			wrap(sub)
		}
	}
	wrap(root)
	return root
}

// usageError is err with exit status 2 and cmd's usage line.
func usageError(cmd *cobra.Command, err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	use := cmd.UseLine()
	if !cmd.HasParent() {
		use = cmd.CommandPath() + " COMMAND [flags]"
	}
	return &exitError{code: 2, err: fmt.Errorf("%w\nUsage: %s\nRun '%s --help' for more", err, use, cmd.CommandPath())}
}
