package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/internal/trainproto"
)

func newReportCmd() *cobra.Command {
	var checkpoint string
	cmd := &cobra.Command{
		Use:   "report [--checkpoint DIR] KEY=VALUE...",
		Short: "Report a result from a command trainable (reads TUNEJET_SOCKET)",
		Long: `Report one result of the running trial to its runner. Values that parse as
JSON numbers are numbers, true/false/null are JSON literals, NaN and infinities
(which JSON cannot carry) are refused, anything else is a string and never
compared as a number. Prints "stop" when the trial should end now; exits non-zero if the
runner refused the report.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			metrics, err := trainproto.ParseKeyValues(args)
			if err != nil {
				return err
			}
			sock := os.Getenv(trainproto.EnvSocket)
			if sock == "" {
				return errors.New("report: " + trainproto.EnvSocket + " is not set: run this from a trainable started by a tunejet runner")
			}
			c, err := trainproto.Dial(cmd.Context(), sock)
			if err != nil {
				return err
			}
			defer c.Close()
			stop, err := c.Report(cmd.Context(), metrics, checkpoint)
			if err != nil {
				return err
			}
			if stop {
				fmt.Println("stop")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&checkpoint, "checkpoint", "", "checkpoint directory to report with the result")
	return cmd
}
