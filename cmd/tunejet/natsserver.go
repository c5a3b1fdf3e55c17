package main

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/internal/bus"
)

// defaultServerStoreDir is tunejet nats-server's store: not the one of
// tunejet run's embedded server, which would then be locked.
func defaultServerStoreDir() string {
	return filepath.Join(filepath.Dir(bus.DefaultStoreDir()), "nats-server")
}

func newNATSServerCmd() *cobra.Command {
	var addr, storeDir string
	cmd := &cobra.Command{
		Use:   "nats-server",
		Short: "Run a nats-server with JetStream for the services and clients of one machine",
		Long: `Run a nats-server with JetStream, the one tunejet run embeds, listening on
--addr and keeping its streams in --store-dir, until interrupted. The
services (controller, runner, syncer, restorer) and the clients (run,
status, attach, stop, dashboard) then reach it with --nats or NATS_URL:

  tunejet nats-server &
  export NATS_URL=nats://127.0.0.1:4222
  tunejet controller & tunejet runner & tunejet syncer & tunejet restorer &
  tunejet run experiment.yaml

It has no authentication or TLS: keep it on loopback, or run a configured
nats-server for a cluster (docs/operations.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, port, err := splitAddr(addr)
			if err != nil {
				return usageError(cmd, err)
			}
			// nats-server reports a taken port only in its log, which
			// is off: find out here.
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("nats-server: %w", err)
			}
			_ = ln.Close()
			emb, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: storeDir, Listen: true, Host: host, Port: port})
			if err != nil {
				return err
			}
			defer emb.Shutdown()
			fmt.Fprintf(cmd.ErrOrStderr(), "nats-server %s listening on %s (store %s); Ctrl-C stops it.\nexport NATS_URL=%s\n",
				bus.ServerVersion, emb.URL(), storeDir, emb.URL())
			<-cmd.Context().Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:4222", "address to listen on, HOST:PORT (port 0: any free port)")
	cmd.Flags().StringVar(&storeDir, "store-dir", defaultServerStoreDir(), "JetStream's store")
	return cmd
}

// splitAddr splits HOST:PORT with a numeric port.
func splitAddr(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("--addr %q: want HOST:PORT: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("--addr %q: the port must be a number from 0 to 65535", addr)
	}
	return host, port, nil
}
