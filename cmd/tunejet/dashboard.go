package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strconv"
	"sync"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/dashboard"
	"github.com/tunejet/tunejet/tune"
)

func newDashboardCmd() *cobra.Command {
	var (
		conn           connFlags
		logs           logFlags
		storeDir, addr string
		token          string
		storagePath    string
		allowActions   bool
	)
	cmd := &cobra.Command{
		Use:   "dashboard [PATH_OR_URL]",
		Short: "Serve a live web dashboard of the experiments in the event log",
		Long: `Serve a web page that shows every experiment the event log holds and, for
one experiment, its trials (sortable, filterable), their learning curves
updated live as the trials report, a parallel-coordinates plot of config
against metric, each trial's timeline, error.txt and checkpoints, and the
live runners. It reads the log of a deployment (--nats), else the embedded
store (--store-dir). The embedded store is locked while tunejet run runs on
it: open the dashboard of such a run with tunejet run --dashboard.

With PATH_OR_URL (or --storage PATH_OR_URL) it reads one finished or
interrupted experiment from its files alone instead: <storage_path>/<name>,
a directory or a storage URL (file://, s3://, gs://, azblob://), what
tunejet results takes.

The dashboard is read-only unless --allow-actions lets visitors stop an
experiment. It listens on 127.0.0.1:8265 by default; to listen on any
other interface it needs a token (--token or TUNEJET_DASHBOARD_TOKEN),
which visitors then present once as http://HOST:PORT/?token=TOKEN (or as
Authorization: Bearer TOKEN). The NATS token flag is --nats-token here.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if len(args) == 1 {
				if storagePath != "" && storagePath != args[0] {
					return fmt.Errorf("give the experiment's path once: as the argument (%s) or as --storage (%s)", args[0], storagePath)
				}
				storagePath = args[0]
			}
			log, err := logs.logger()
			if err != nil {
				return err
			}
			if err := dashboard.CheckAddr(addr, token); err != nil {
				return err
			}
			cfg := dashboard.Config{Token: token, AllowActions: allowActions, Log: log}
			if storagePath != "" {
				if conn.o.URL != "" {
					return errors.New("give --storage or --nats, not both: --storage reads an experiment's files alone")
				}
				srv, err := dashboard.NewStorage(ctx, storagePath, cfg)
				if err != nil {
					return err
				}
				ln, err := dashboard.Listen(ctx, addr, token)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "Dashboard: %s\n", dashboard.URL(ln))
				return srv.Serve(ctx, ln)
			}
			b, closeFn, err := dashboardBus(ctx, conn, storeDir, log)
			if err != nil {
				return err
			}
			defer closeFn()
			ln, err := dashboard.Listen(ctx, addr, token)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Dashboard: %s\n", dashboard.URL(ln))
			return dashboard.New(ctx, b, cfg).Serve(ctx, ln)
		},
	}
	addConnFlagsWithoutToken(cmd.Flags(), &conn)
	logs.add(cmd.Flags(), "warn")
	cmd.Flags().StringVar(&storeDir, "store-dir", bus.DefaultStoreDir(), "embedded nats-server's JetStream store, read when --nats is not given")
	cmd.Flags().StringVar(&addr, "addr", dashboard.DefaultAddr, "address to listen on; anything but loopback needs --token")
	cmd.Flags().StringVar(&token, "token", os.Getenv(dashboard.TokenEnv), "token every visitor must present (env "+dashboard.TokenEnv+")")
	cmd.Flags().StringVar(&storagePath, "storage", "", "read one experiment from its storage directory or URL (<storage_path>/<name>) instead of the log; the same as the argument")
	cmd.Flags().BoolVar(&allowActions, "allow-actions", false, "let visitors stop experiments from the page")
	return cmd
}

// addConnFlagsWithoutToken registers the NATS connection flags with the
// NATS token as --nats-token, leaving --token to the dashboard's own.
func addConnFlagsWithoutToken(fs *pflag.FlagSet, conn *connFlags) {
	tmp := pflag.NewFlagSet("nats", pflag.ContinueOnError)
	conn.add(tmp, clientConnectTimeout)
	tmp.VisitAll(func(f *pflag.Flag) {
		if f.Name == "token" {
			f.Name = "nats-token"
		}
		fs.AddFlag(f)
	})
}

// dashboardBus is readBus for the dashboard, saying what to do when the
// store is missing or a run serves it.
func dashboardBus(ctx context.Context, conn connFlags, storeDir string, log zerolog.Logger) (*bus.Bus, func(), error) {
	b, closeFn, err := readBus(ctx, conn, storeDir, "dashboard", log)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("no embedded store at %s: give the deployment's --nats URL, or the --store-dir of your runs", storeDir)
	case errors.Is(err, bus.ErrStoreInUse):
		return nil, nil, fmt.Errorf("%w: a tunejet run is using it; open its dashboard with `tunejet run --dashboard`", err)
	}
	return b, closeFn, err
}

// runDashboard is tunejet run's --dashboard: the dashboard served by the
// process that runs the experiment.
type runDashboard struct {
	addr, token  string
	allowActions bool
	keep         bool   // serve on after the run, until interrupted
	url          string // where it serves, once started
}

func (d *runDashboard) add(fs *pflag.FlagSet) {
	fs.StringVar(&d.addr, "dashboard", "", "serve the live dashboard while the experiment runs, on this address: --dashboard=ADDR or --dashboard ADDR ("+dashboard.DefaultAddr+" when given without one)")
	fs.Lookup("dashboard").NoOptDefVal = dashboard.DefaultAddr
	fs.StringVar(&d.token, "dashboard-token", os.Getenv(dashboard.TokenEnv), "token the dashboard's visitors must present; needed off loopback (env "+dashboard.TokenEnv+")")
	fs.BoolVar(&d.allowActions, "dashboard-allow-actions", false, "let the dashboard's visitors stop the experiment from the page")
	fs.BoolVar(&d.keep, "dashboard-keep", true, "keep serving the dashboard after the run ends, until Ctrl-C (false: stop it with the run)")
}

// serveOn keeps the dashboard serving after a run that ended on its own,
// until ctx is done (Ctrl-C or SIGTERM), saying so on w; it returns at
// once without a dashboard, with --dashboard-keep=false, or when the run
// itself was interrupted.
func (d *runDashboard) serveOn(ctx context.Context, w io.Writer) {
	if d.url == "" || !d.keep || ctx.Err() != nil {
		return
	}
	fmt.Fprintf(w, "The run is over; the dashboard keeps serving at %s until Ctrl-C.\n", d.url)
	<-ctx.Done()
}

// file is run's FILE among its arguments. --dashboard's address is
// optional, so "--dashboard ADDR" leaves ADDR among the arguments: with two
// of them, one an address (HOST:PORT, not a file) and the other not, the
// address is the dashboard's.
func (d *runDashboard) file(fs *pflag.FlagSet, args []string) (string, error) {
	if f := fs.Lookup("dashboard"); len(args) == 2 && f.Changed && d.addr == f.NoOptDefVal {
		switch a0, a1 := isListenAddr(args[0]), isListenAddr(args[1]); {
		case a0 && !a1:
			d.addr = args[0]
			return args[1], nil
		case a1 && !a0:
			d.addr = args[1]
			return args[0], nil
		}
		return "", fmt.Errorf("accepts 1 arg(s), received 2: give the dashboard's address as --dashboard=ADDR")
	}
	if len(args) != 1 {
		return "", fmt.Errorf("accepts 1 arg(s), received %d", len(args))
	}
	return args[0], nil
}

// isListenAddr reports whether s is HOST:PORT with a numeric port and no
// file of that name exists.
func isListenAddr(s string) bool {
	if _, err := os.Stat(s); err == nil {
		return false
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	_, err = strconv.ParseUint(port, 10, 16)
	return err == nil
}

// start serves the dashboard when --dashboard asks for it, printing its
// URL on w, and returns the tune options to run with and the stop to
// call once the run is over (it may be called again).
//
// With a deployment the dashboard reads the deployment's log. The
// embedded stack is started here rather than by the tuner, listening on
// loopback, so that the dashboard can read its log too; the tuner then
// submits to it as to a deployment.
func (d *runDashboard) start(ctx context.Context, sf *stackFlags, opts []tune.Option, w io.Writer) ([]tune.Option, func() error, error) {
	if d.addr == "" {
		return opts, func() error { return nil }, nil
	}
	log, err := sf.logs.logger()
	if err != nil {
		return nil, nil, err
	}
	ln, err := dashboard.Listen(ctx, d.addr, d.token)
	if err != nil {
		return nil, nil, err
	}
	var (
		cleanups []func() error
		once     sync.Once
		stopErr  error
	)
	stop := func() error {
		once.Do(func() {
			for i := len(cleanups) - 1; i >= 0; i-- {
				stopErr = errors.Join(stopErr, cleanups[i]())
			}
		})
		return stopErr
	}
	cleanups = append(cleanups, func() error { _ = ln.Close(); return nil }) // closed already once served
	connOpts, err := sf.conn.options(log)
	if err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	if connOpts.URL == "" {
		capacity, err := sf.capacity.embedded(sf.slots)
		if err != nil {
			return nil, nil, errors.Join(err, stop())
		}
		stack, err := tune.StartStack(ctx, tune.StackConfig{StoreDir: sf.storeDir, Slots: sf.slots, Capacity: capacity, Log: log, Listen: true})
		if err != nil {
			return nil, nil, errors.Join(err, stop())
		}
		cleanups = append(cleanups, stack.Close)
		no := stack.NATSOptions()
		opts = append(opts, tune.WithNATS(no))
		connOpts = bus.ConnectOptions{URL: no.URL, ConnectTimeout: clientConnectTimeout, Log: log}
	}
	connOpts.Name = "tunejet-dashboard"
	b, err := bus.Dial(ctx, connOpts, "tunejet/dashboard", log)
	if err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	cleanups = append(cleanups, func() error { b.Close(); return nil })
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan struct{})
	srv := dashboard.New(sctx, b, dashboard.Config{Token: d.token, AllowActions: d.allowActions, Log: log})
	go func() {
		defer close(served)
		if err := srv.Serve(sctx, ln); err != nil {
			log.Error().Err(err).Msg("dashboard stopped")
		}
	}()
	// Stopped before the connection and the stack: the event streams end
	// first.
	cleanups = append(cleanups, func() error { cancel(); <-served; return nil })
	d.url = dashboard.URL(ln)
	fmt.Fprintf(w, "Dashboard: %s\n", d.url)
	return opts, stop, nil
}
