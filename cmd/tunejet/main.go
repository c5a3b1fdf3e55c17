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
	root := newRoot()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
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
	}
	root.AddCommand(newRunCmd(), newRestoreCmd(), newCanRestoreCmd(), newResultsCmd(), newExplainCmd(), newReportCmd(), newStatusCmd(), newAttachCmd(), newStopCmd(), newDashboardCmd(), newExperimentsCmd(), newForgetCmd())
	root.AddCommand(serviceCmds()...)
	return root
}
