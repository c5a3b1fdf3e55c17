package main_test

// Tests of the command line as people expect it to behave: a version,
// usage errors that say so, flags whose help is what they do.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// TestVersion: tunejet --version and tunejet version print the version,
// the commit, and the Go and nats-server versions built in.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := tunejet(t, "", baseEnv(), args...)
		if r.code != 0 {
			t.Fatalf("tunejet %s:\n%s", args[0], r)
		}
		fields := map[string]string{}
		for _, line := range strings.Split(r.stdout, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				fields[k] = strings.TrimSpace(v)
			}
		}
		if !strings.HasPrefix(r.stdout, "tunejet ") || fields["commit"] == "" || fields["go"] != runtime.Version() || fields["nats-server"] != server.VERSION {
			t.Errorf("tunejet %s: want the version, commit:, go: %s and nats-server: %s:\n%s", args[0], runtime.Version(), server.VERSION, r.stdout)
		}
	}
}

// TestUsageErrorsExit2: a wrong number of arguments, an unknown command or
// flag, or a flag's bad value exits 2 with the command's usage line.
func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args       []string
		err, usage string
	}{
		{[]string{"run"}, "accepts 1 arg(s), received 0", "Usage: tunejet run FILE [flags]"},
		{[]string{"run", "--no-such-flag", "x.yaml"}, "unknown flag: --no-such-flag", "Usage: tunejet run FILE [flags]"},
		{[]string{"run", "--cpus", "many", "x.yaml"}, `invalid argument "many"`, "Usage: tunejet run FILE [flags]"},
		{[]string{"run", "--new-run", "--resume", "auto", "x.yaml"}, "--new-run and --resume auto exclude each other", "Usage: tunejet run FILE [flags]"},
		{[]string{"stop"}, "accepts 1 arg(s), received 0", "Usage: tunejet stop NAME [flags]"},
		{[]string{"status", "extra"}, `unknown command "extra" for "tunejet status"`, "Usage: tunejet status [flags]"},
		{[]string{"explain", "a"}, "accepts 2 arg(s), received 1", "Usage: tunejet explain"},
		{[]string{"stauts"}, `unknown command "stauts" for "tunejet"`, "Usage: tunejet COMMAND [flags]"},
	} {
		r := tunejet(t, "", baseEnv(), c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.err) || !strings.Contains(r.stderr, c.usage) {
			t.Errorf("tunejet %s: want exit status 2, %q and %q:\n%s", strings.Join(c.args, " "), c.err, c.usage, r)
		}
	}
	if r := tunejet(t, "", baseEnv()); r.code != 0 || !strings.Contains(r.stdout, "Available Commands") {
		t.Errorf("tunejet alone: want the help:\n%s", r)
	}
}

// TestDeploymentCommandsNeedNATS: the commands that need a deployment say
// in their help that --nats is required, not that an empty one starts an
// embedded server, and without it they stop at once with a usage error
// that names tunejet nats-server.
func TestDeploymentCommandsNeedNATS(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"controller"}, {"runner"}, {"syncer"}, {"restorer"}, {"status"}, {"attach", "x"}, {"stop", "x"}} {
		help := tunejet(t, "", baseEnv(), args[0], "--help")
		if strings.Contains(help.stdout, "embedded server") || !strings.Contains(help.stdout, "required") {
			t.Errorf("tunejet %s --help: --nats should say it is required:\n%s", args[0], help.stdout)
		}
		r := tunejet(t, "", baseEnv(), args...)
		if r.code != 2 || !strings.Contains(r.stderr, "needs --nats URL") || !strings.Contains(r.stderr, "tunejet nats-server") || strings.Contains(r.stderr, "no URL given") {
			t.Errorf("tunejet %s without --nats:\n%s", args[0], r)
		}
	}
	for _, cmd := range []string{"run", "restore", "can-restore"} {
		if help := tunejet(t, "", baseEnv(), cmd, "--help"); !strings.Contains(help.stdout, "empty starts an embedded server") {
			t.Errorf("tunejet %s --help: --nats should say an empty one starts an embedded server:\n%s", cmd, help.stdout)
		}
	}
}

// statusJSON is the output of `tunejet status --json`.
type statusJSON struct {
	Experiments []struct {
		Name     string         `json:"name"`
		Status   string         `json:"status"`
		Trials   map[string]int `json:"trials"`
		Progress struct {
			Ended int     `json:"ended"`
			Total int     `json:"total"`
			ETA   float64 `json:"eta_s"`
		} `json:"progress"`
		Pending []struct {
			TrialID string `json:"trial_id"`
			Reason  string `json:"reason"`
		} `json:"pending"`
	} `json:"experiments"`
	Runners []struct {
		Name     string             `json:"name"`
		Hostname string             `json:"hostname"`
		PID      int                `json:"pid"`
		Capacity map[string]float64 `json:"capacity"`
		Held     map[string]float64 `json:"held"`
		Trials   []struct {
			Experiment string             `json:"experiment"`
			TrialID    string             `json:"trial_id"`
			Attempt    int                `json:"attempt"`
			Resources  map[string]float64 `json:"resources"`
			GPUIDs     []string           `json:"gpu_ids"`
		} `json:"trials"`
		Workers []struct {
			Experiment string    `json:"experiment"`
			Trainable  string    `json:"trainable"`
			PID        int       `json:"pid"`
			GPUIDs     []string  `json:"gpu_ids"`
			Running    int       `json:"running"`
			Trials     int       `json:"trials"`
			RSSBytes   int64     `json:"rss_bytes"`
			IdleSince  time.Time `json:"idle_since"`
		} `json:"workers"`
	} `json:"runners"`
}

func decodeStatus(t *testing.T, r result) statusJSON {
	t.Helper()
	var s statusJSON
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("tunejet status --json: not the documented JSON: %v\n%s", err, r)
	}
	return s
}

const oneMachineExperiment = `name: one_machine
trainable:
  command: ["/bin/sh", "-c", "\"$TUNEJET_BIN\" report loss=1"]
param_space:
  x: {grid_search: [1, 2, 3]}
tune_config:
  metric: loss
  mode: min
run_config:
  storage_path: %s
`

// TestOneMachineDeployment is the set-up the README documents: tunejet
// nats-server, the four services against it through NATS_URL, an
// experiment submitted with tunejet run, and tunejet status --json
// showing it and the runner.
func TestOneMachineDeployment(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	storeDir := filepath.Join(t.TempDir(), "store")
	srv := startTunejet(t, "", baseEnv(), "nats-server", "--addr", addr, "--store-dir", storeDir)
	url := "nats://" + addr
	bustest.Eventually(t, time.Minute, "tunejet nats-server to listen", func() bool {
		return strings.Contains(srv.stderr.String(), "export NATS_URL="+url) || srv.exited()
	})
	if srv.exited() {
		t.Fatalf("tunejet nats-server exited:\n%s", srv.wait(t))
	}
	storage, expDir := t.TempDir(), t.TempDir()
	env := baseEnv("NATS_URL="+url, "TUNEJET_BIN="+tunejetBin, "TUNEJET_LOG_FORMAT=json")
	for _, name := range []string{"controller", "runner", "syncer", "restorer"} {
		args := []string{name}
		if name == "runner" {
			args = append(args, "--name", "box", "--cpus", "2", "--work-dir", t.TempDir())
		}
		startTunejet(t, "", env, args...)
	}
	file := writeFile(t, expDir, "experiment.yaml", fmt.Sprintf(oneMachineExperiment, storage))
	if r := tunejet(t, "", env, "run", file); r.code != 0 || !strings.Contains(r.stdout, "3 TERMINATED") {
		t.Fatalf("tunejet run against tunejet nats-server:\n%s", r)
	}
	var s statusJSON
	bustest.Eventually(t, time.Minute, "status --json to show the experiment and the runner", func() bool {
		r := tunejet(t, "", env, "status", "--json")
		if r.code != 0 {
			t.Fatalf("tunejet status --json:\n%s", r)
		}
		s = decodeStatus(t, r)
		return len(s.Runners) == 1 && len(s.Experiments) == 1
	})
	e := s.Experiments[0]
	if e.Name != "one_machine" || e.Status != "COMPLETED" || e.Trials["TERMINATED"] != 3 || e.Progress.Ended != 3 || e.Progress.Total != 3 {
		t.Errorf("status --json experiment: %+v", e)
	}
	if r := s.Runners[0]; r.Name != "box" || r.Capacity["cpu"] != 2 || r.PID == 0 {
		t.Errorf("status --json runner: %+v", r)
	}
	// The server keeps its store in --store-dir, and stops on SIGINT.
	if err := srv.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if r := srv.wait(t); r.code != 0 {
		t.Errorf("tunejet nats-server after SIGINT:\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(storeDir, "jetstream")); err != nil {
		t.Errorf("tunejet nats-server kept no JetStream store in --store-dir: %v", err)
	}
}

const capacityExperiment = `name: %s
trainable:
  command: ["/bin/sh", "-c", "\"$TUNEJET_BIN\" report loss=1"]
  resources: {cpu: 3, lic: 1}
param_space:
  x: {grid_search: [1, 2]}
run_config:
  storage_path: %s
`

// TestRunDashboardTakesTheRunnerFlags: tunejet run --dashboard sizes its
// embedded runner with --cpus and --resources, as tunejet run does without
// it (trials asking for 3 CPUs and a custom resource run to the end), and
// takes the dashboard's address with "=" or after a space, before or after
// FILE.
func TestRunDashboardTakesTheRunnerFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, form := range [][]string{
		{"--dashboard=127.0.0.1:0", "FILE"},
		{"--dashboard", "127.0.0.1:0", "FILE"},
		{"FILE", "--dashboard", "127.0.0.1:0"},
	} {
		name := fmt.Sprintf("dash_capacity_%d", i)
		file := writeFile(t, dir, name+".yaml", fmt.Sprintf(capacityExperiment, name, t.TempDir()))
		args := []string{"run", "--cpus", "3", "--resources", "lic=1", "--store-dir", t.TempDir(), "--verbose", "1", "--dashboard-keep=false"}
		for _, a := range form {
			if a == "FILE" {
				a = file
			}
			args = append(args, a)
		}
		p := startTunejet(t, "", baseEnv("TUNEJET_BIN="+tunejetBin), args...)
		bustest.Eventually(t, 2*time.Minute, "tunejet run to end or a trial to wait for a runner", func() bool {
			return p.exited() || strings.Contains(p.stdout.String(), "needs ")
		})
		if !p.exited() {
			t.Errorf("tunejet %s: a trial waits for a runner with the capacity the flags say:\n%s", strings.Join(form, " "), p.stdout)
			continue
		}
		r := p.wait(t)
		if r.code != 0 || !strings.Contains(r.stdout, "2 TERMINATED") || !strings.Contains(r.stderr, "Dashboard: http://127.0.0.1:") {
			t.Errorf("tunejet %s: want both trials run on the capacity the flags say, with the dashboard:\n%s", strings.Join(form, " "), r)
		}
	}
}

// TestCanRestoreTakesNoRunnerFlags: can-restore runs no trial, so it has
// no runner flags: --cpus is an unknown flag, and its help lists none.
func TestCanRestoreTakesNoRunnerFlags(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "exp")
	if r := tunejet(t, "", baseEnv(), "can-restore", "--cpus", "4", "--store-dir", t.TempDir(), path); r.code != 2 || !strings.Contains(r.stderr, "unknown flag: --cpus") {
		t.Errorf("can-restore --cpus: want a usage error:\n%s", r)
	}
	help := tunejet(t, "", baseEnv(), "can-restore", "--help")
	for _, flag := range []string{"--cpus", "--slots", "--gpus", "--gpu-ids", "--memory", "--resources", "--verbose"} {
		if strings.Contains(help.stdout, flag+" ") {
			t.Errorf("can-restore --help lists %s:\n%s", flag, help.stdout)
		}
	}
	if !strings.Contains(help.stdout, "--store-dir") || !strings.Contains(help.stdout, "--nats") {
		t.Errorf("can-restore --help lacks --store-dir or --nats:\n%s", help.stdout)
	}
}

// TestStatusJSON: tunejet status --json prints the experiments and the
// runners as the documented JSON, as results and explain do.
func TestStatusJSON(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	b := srv.Bus("test")
	sp := events.ExperimentSpec{Name: "js", Trainable: events.Trainable{Command: []string{"true"}}, TuneConfig: events.TuneConfig{NumSamples: 1}}
	if _, err := b.Publish(t.Context(), b.Event("js", events.WriterClient, &events.ExperimentSubmitted{Spec: sp})); err != nil {
		t.Fatal(err)
	}
	r := tunejet(t, "", baseEnv(), "status", "--nats", srv.URL(), "--json")
	if r.code != 0 {
		t.Fatalf("tunejet status --json:\n%s", r)
	}
	s := decodeStatus(t, r)
	if len(s.Experiments) != 1 || s.Experiments[0].Name != "js" || s.Experiments[0].Status == "" || s.Runners == nil {
		t.Errorf("status --json: %+v; want experiment js and an empty list of runners", s)
	}
}

// TestNATSServerSaysWhyItCannotStart: tunejet nats-server on a port in use
// fails at once saying so, and a malformed --addr is a usage error.
func TestNATSServerSaysWhyItCannotStart(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := tunejet(t, "", baseEnv(), "nats-server", "--addr", ln.Addr().String(), "--store-dir", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, "address already in use") {
		t.Errorf("tunejet nats-server on a port in use:\n%s", r)
	}
	r = tunejet(t, "", baseEnv(), "nats-server", "--addr", "4222", "--store-dir", t.TempDir())
	if r.code != 2 || !strings.Contains(r.stderr, "want HOST:PORT") {
		t.Errorf("tunejet nats-server --addr 4222:\n%s", r)
	}
}

// TestDriverFDsAreChecked: a --driver-fds that names no pair of open
// descriptors is refused before anything runs, and the flag stays out of
// run's help (only the Python driver passes it).
func TestDriverFDsAreChecked(t *testing.T) {
	t.Parallel()
	storage, expDir := t.TempDir(), t.TempDir()
	file := writeFile(t, expDir, "experiment.yaml", fmt.Sprintf(oneMachineExperiment, storage))
	for fds, want := range map[string]string{
		"7":     "want R,W",
		"x,8":   `"x" is not an inherited file descriptor`,
		"1,2":   `"1" is not an inherited file descriptor`,
		"97,98": "bad file descriptor",
	} {
		r := tunejet(t, "", baseEnv(), "run", file, "--store-dir", t.TempDir(), "--driver-fds", fds)
		if r.code != 1 || !strings.Contains(r.stderr, "--driver-fds") || !strings.Contains(r.stderr, want) {
			t.Errorf("run --driver-fds %s: want exit 1 naming %q:\n%s", fds, want, r)
		}
		if _, err := os.Stat(filepath.Join(storage, "one_machine")); err == nil {
			t.Errorf("run --driver-fds %s: the experiment ran", fds)
		}
	}
	if help := tunejet(t, "", baseEnv(), "run", "--help"); strings.Contains(help.stdout, "driver-fds") {
		t.Errorf("run --help lists the hidden --driver-fds:\n%s", help.stdout)
	}
}
