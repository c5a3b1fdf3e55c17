package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/internal/bus"
)

// versionText is what tunejet version and tunejet --version print: the
// module's version, the commit it was built from, and the Go and
// nats-server versions built in.
func versionText() string {
	version, commit := "(devel)", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && commit != "unknown" {
			commit += " (modified)"
		}
	}
	return fmt.Sprintf("tunejet %s\ncommit:      %s\ngo:          %s\nnats-server: %s\n", version, commit, runtime.Version(), bus.ServerVersion)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print tunejet's version, commit, and Go and nats-server versions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionText())
			return err
		},
	}
}
