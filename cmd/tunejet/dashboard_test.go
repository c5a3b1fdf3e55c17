package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/dashboard"
	"github.com/tunejet/tunejet/tune"
)

// syncBuffer is a buffer a command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var dashboardURL = regexp.MustCompile(`Dashboard: (http://\S+/)`)

// waitDashboardURL waits for the URL the command prints.
func waitDashboardURL(t *testing.T, out *syncBuffer, done <-chan error) string {
	t.Helper()
	var url string
	bustest.Eventually(t, 20*time.Second, "the dashboard's URL", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the command ended: %v\n%s", err, out)
		default:
		}
		if m := dashboardURL.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	return url
}

// startDashboardCmd runs tunejet dashboard with args until the test
// ends, and returns its URL.
func startDashboardCmd(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	cmd := newDashboardCmd()
	var out syncBuffer
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"--addr", "127.0.0.1:0"}, args...))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	url := waitDashboardURL(t, &out, done)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("tunejet dashboard after it was stopped: %v", err)
		}
	})
	return url
}

// experimentNames asks the dashboard at url for its experiments.
func experimentNames(t *testing.T, url string) []string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"api/experiments", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %sapi/experiments: %s %s", url, resp.Status, body)
	}
	var list struct {
		Experiments []dashboard.Summary `json:"experiments"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, x := range list.Experiments {
		names = append(names, x.Name+" "+x.Status)
	}
	return names
}

func runDashboardCmd(t *testing.T, args ...string) error {
	t.Helper()
	cmd := newDashboardCmd()
	cmd.SetArgs(args)
	cmd.SetErr(io.Discard)
	return cmd.ExecuteContext(t.Context())
}

func TestDashboardRefusesToListenOffLoopbackWithoutAToken(t *testing.T) {
	t.Setenv(dashboard.TokenEnv, "")
	err := runDashboardCmd(t, "--addr", "0.0.0.0:0", "--store-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("dashboard on 0.0.0.0 without a token: %v; want it refused, asking for a token", err)
	}
}

func TestDashboardNeedsAStore(t *testing.T) {
	t.Parallel()
	err := runDashboardCmd(t, "--addr", "127.0.0.1:0", "--store-dir", t.TempDir()+"/none")
	if err == nil || !strings.Contains(err.Error(), "no embedded store") {
		t.Fatalf("dashboard on a missing store: %v; want it to say there is none", err)
	}
}

func TestDashboardOfAStoreInUseSaysRunDashboard(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	emb, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	err = runDashboardCmd(t, "--addr", "127.0.0.1:0", "--store-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "tunejet run --dashboard") {
		t.Fatalf("dashboard of a store in use: %v; want it to point at tunejet run --dashboard", err)
	}
}

func TestDashboardOfADeployment(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	url := startDashboardCmd(t, "--nats", srv.URL())
	if names := experimentNames(t, url); len(names) != 0 {
		t.Errorf("experiments of an empty deployment: %v", names)
	}
}

// TestRunDashboardServesTheRunsStack: tunejet run --dashboard starts the
// embedded stack itself, serves the dashboard of its log, and runs the
// experiment on it.
func TestRunDashboardServesTheRunsStack(t *testing.T) {
	t.Parallel()
	sf := stackFlags{storeDir: t.TempDir(), slots: 1}
	sf.logs.level = "warn"
	sf.logs.format = "json"
	d := runDashboard{addr: "127.0.0.1:0"}
	var out syncBuffer
	opts, stop, err := d.start(t.Context(), &sf, nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	m := dashboardURL.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("run --dashboard printed no URL: %q", out.String())
	}

	tuner, err := tune.NewTuner(tune.Command{"/bin/sh", "-c", "exit 0"}, append(opts, tune.WithName("dash_run"),
		tune.WithRunConfig(tune.RunConfig{StoragePath: t.TempDir()}))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tuner.Fit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if names := experimentNames(t, m[1]); len(names) != 1 || names[0] != "dash_run COMPLETED" {
		t.Errorf("the run's dashboard shows %v, want dash_run COMPLETED", names)
	}
	if err := stop(); err != nil {
		t.Errorf("stop the dashboard and the stack: %v", err)
	}
}

func TestRunDashboardFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args  []string
		addr  string
		allow bool
	}{
		{nil, "", false},
		{[]string{"--dashboard"}, dashboard.DefaultAddr, false},
		{[]string{"--dashboard=127.0.0.1:9000"}, "127.0.0.1:9000", false},
		{[]string{"--dashboard", "--dashboard-allow-actions"}, dashboard.DefaultAddr, true},
	} {
		var d runDashboard
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		d.add(fs)
		if err := fs.Parse(append(tc.args, "experiment.yaml")); err != nil {
			t.Fatal(err)
		}
		if d.addr != tc.addr || d.allowActions != tc.allow || fs.Arg(0) != "experiment.yaml" {
			t.Errorf("run %v: dashboard %q (actions %v), args %v; want %q (actions %v) and the file", tc.args, d.addr, d.allowActions, fs.Args(), tc.addr, tc.allow)
		}
	}
}

// TestDashboardOfAStoragePath: tunejet dashboard --storage serves a
// finished experiment from its files alone.
func TestDashboardOfAStoragePath(t *testing.T) {
	t.Parallel()
	storagePath := t.TempDir()
	tuner, err := tune.NewTuner(tune.Command{"/bin/sh", "-c", "exit 0"}, tune.WithName("dash_files"),
		tune.WithRunConfig(tune.RunConfig{StoragePath: storagePath}), tune.WithStoreDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tuner.Fit(t.Context()); err != nil {
		t.Fatal(err)
	}
	url := startDashboardCmd(t, "--storage", storagePath+"/dash_files", "--allow-actions")
	if names := experimentNames(t, url); len(names) != 1 || names[0] != "dash_files COMPLETED" {
		t.Errorf("the storage path's dashboard shows %v, want dash_files COMPLETED", names)
	}

	err = runDashboardCmd(t, "--addr", "127.0.0.1:0", "--storage", storagePath+"/none")
	if err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("dashboard of a missing storage path: %v; want it to name the path", err)
	}
	err = runDashboardCmd(t, "--addr", "127.0.0.1:0", "--storage", storagePath+"/dash_files", "--nats", "nats://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("dashboard with --storage and --nats: %v; want it refused", err)
	}
}

// TestDashboardTakesThePathAsItsArgument: tunejet dashboard PATH is
// --storage PATH, as optuna-dashboard takes its storage.
func TestDashboardTakesThePathAsItsArgument(t *testing.T) {
	t.Parallel()
	storagePath := t.TempDir()
	tuner, err := tune.NewTuner(tune.Command{"/bin/sh", "-c", "exit 0"}, tune.WithName("dash_arg"),
		tune.WithRunConfig(tune.RunConfig{StoragePath: storagePath}), tune.WithStoreDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tuner.Fit(t.Context()); err != nil {
		t.Fatal(err)
	}
	url := startDashboardCmd(t, storagePath+"/dash_arg")
	if names := experimentNames(t, url); len(names) != 1 || names[0] != "dash_arg COMPLETED" {
		t.Errorf("tunejet dashboard PATH shows %v, want dash_arg COMPLETED", names)
	}
	err = runDashboardCmd(t, "--addr", "127.0.0.1:0", "--storage", storagePath+"/other", storagePath+"/dash_arg")
	if err == nil || !strings.Contains(err.Error(), "give the experiment's path once") {
		t.Errorf("dashboard with a path and another --storage: %v; want it refused", err)
	}
}
