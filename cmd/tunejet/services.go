package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/metrics"
	"github.com/tunejet/tunejet/services/controller"
	"github.com/tunejet/tunejet/services/restorer"
	"github.com/tunejet/tunejet/services/runner"
	"github.com/tunejet/tunejet/services/syncer"
)

// serviceCmds are the commands that run one service against a deployment.
func serviceCmds() []*cobra.Command {
	var capacity capacityFlags
	var name, workDir, storagePath string
	var countPreemption bool
	var workerIdle time.Duration
	runnerCmd := serviceCmd("runner", "Run trials pulled from every running experiment", func(ctx context.Context, b *bus.Bus) error {
		cfg := runner.Config{Name: name, WorkDir: workDir, CountPreemption: countPreemption, WorkerIdle: workerIdle}
		if err := capacity.config(&cfg); err != nil {
			return err
		}
		return runner.New(b, cfg).Run(ctx)
	})
	runnerCmd.Flags().BoolVar(&countPreemption, "count-preemption", os.Getenv("TUNEJET_COUNT_PREEMPTION_AS_FAILURE") == "1",
		"count trials handed back on SIGTERM against max_failures (env TUNEJET_COUNT_PREEMPTION_AS_FAILURE=1)")
	capacity.add(runnerCmd.Flags())
	runnerCmd.Flags().StringVar(&name, "name", "", "runner name (default: <hostname>-<pid>)")
	runnerCmd.Flags().DurationVar(&workerIdle, "worker-idle", 60*time.Second,
		"how long a warm worker (a Python trainable's fork server) is kept without trials before it exits")
	runnerCmd.Flags().StringVar(&workDir, "work-dir", "", "local trial directories (default: <tmp>/tunejet-runner/<name>)")

	controllerCmd := serviceCmd("controller", "Decide and schedule trials of submitted experiments", func(ctx context.Context, b *bus.Bus) error {
		return controller.New(b, controller.Config{StoragePath: storagePath}).Run(ctx)
	})
	controllerCmd.Flags().StringVar(&storagePath, "storage-path", "", "storage for experiments that name none (default ~/tunejet_results)")

	syncerCmd := serviceCmd("syncer", "Write experiment results and state to storage", func(ctx context.Context, b *bus.Bus) error {
		return syncer.New(b, syncer.Config{}).Run(ctx)
	})
	restorerCmd := serviceCmd("restorer", "Restore interrupted experiments from the log or a stored snapshot", func(ctx context.Context, b *bus.Bus) error {
		return restorer.New(b, restorer.Config{}).Run(ctx)
	})
	return []*cobra.Command{controllerCmd, runnerCmd, syncerCmd, restorerCmd}
}

// serviceCmd builds "tunejet <name>": connect to --nats, serve /healthz
// and /metrics, and run the service (which registers itself as a NATS
// micro service) until SIGTERM.
func serviceCmd(name, short string, run func(context.Context, *bus.Bus) error) *cobra.Command {
	var conn connFlags
	var logs logFlags
	var metricsAddr string
	var replicas int
	cmd := &cobra.Command{
		Use:   name,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := conn.required(cmd); err != nil {
				return err
			}
			log, err := logs.logger()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			conn.o.Name = "tunejet-" + name
			opts, err := conn.options(log)
			if err != nil {
				return err
			}
			// /healthz says 503 while NATS is not connected, from the start.
			var connected atomic.Pointer[bus.Bus]
			if metricsAddr != "" {
				go func() {
					healthy := func() bool { b := connected.Load(); return b != nil && b.Connected() }
					if err := metrics.Serve(ctx, metricsAddr, healthy); err != nil {
						log.Error().Err(err).Str("addr", metricsAddr).Msg("metrics server")
					}
				}()
			}
			host, _ := os.Hostname()
			b, err := bus.Dial(ctx, opts, fmt.Sprintf("tunejet/%s/%s-%d", name, host, os.Getpid()), log)
			if err != nil && ctx.Err() != nil {
				log.Info().Str("service", name).Msg("stopped while waiting for NATS")
				return nil
			}
			if err != nil {
				return err
			}
			defer func() { _ = b.StartDrain() }() // flushes what is pending; the process ends either way
			connected.Store(b)
			b.Replicas = replicas
			log.Info().Str("service", name).Str("nats", b.ServerURL()).Str("metrics", metricsAddr).Msg("starting")
			return run(ctx, b)
		},
	}
	conn.addDeployment(cmd.Flags(), serviceConnectTimeout)
	logs.add(cmd.Flags(), "info")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", os.Getenv("TUNEJET_METRICS_ADDR"), "serve /healthz and Prometheus /metrics on this address, e.g. :8080 (env TUNEJET_METRICS_ADDR; off when empty)")
	cmd.Flags().IntVar(&replicas, "replicas", envInt("TUNEJET_REPLICAS", 1), "replicas of the streams and buckets created: 3 on a NATS cluster (env TUNEJET_REPLICAS)")
	return cmd
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}
