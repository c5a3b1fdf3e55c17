package main_test

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// deadNATS is a NATS URL on a loopback port where nothing listens, and the
// port.
func deadNATS(t *testing.T) (string, int) {
	t.Helper()
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return "nats://127.0.0.1:" + port, n
}

// waitForFailedAttempt polls p's log until it says NATS did not answer.
func waitForFailedAttempt(t *testing.T, p *proc) {
	t.Helper()
	bustest.Eventually(t, time.Minute, p.name+" to log a failed attempt", func() bool {
		return strings.Contains(p.stderr.String(), "NATS is not answering") || p.exited()
	})
	if p.exited() {
		t.Fatalf("tunejet %s exited while NATS was unreachable:\n%s", p.name, p.stderr)
	}
}

// pingedServices are the NATS micro service names that answer $SRV.PING.
func pingedServices(nc *nats.Conn) map[string]bool {
	seen := map[string]bool{}
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return seen
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$SRV.PING", inbox, nil); err != nil {
		return seen
	}
	for {
		m, err := sub.NextMsg(200 * time.Millisecond)
		if err != nil {
			return seen
		}
		var ping struct{ Name string }
		if json.Unmarshal(m.Data, &ping) == nil {
			seen[ping.Name] = true
		}
	}
}

// TestServicesWaitForNATS: a service started while NATS is down keeps
// trying, and registers and does its work once NATS is up.
func TestServicesWaitForNATS(t *testing.T) {
	t.Parallel()
	url, port := deadNATS(t)
	env := baseEnv("TUNEJET_LOG_FORMAT=json")
	runner := startTunejet(t, "", env, "runner", "--nats", url, "--name", "patient-runner")
	// The controller creates the runner registry.
	controller := startTunejet(t, "", env, "controller", "--nats", url)
	waitForFailedAttempt(t, runner)
	waitForFailedAttempt(t, controller)
	for _, field := range []string{`"url":"` + url + `"`, `"attempts":1`, `"elapsed":`, `"error":`} {
		if !strings.Contains(runner.stderr.String(), field) {
			t.Errorf("the runner's failure log lacks %s:\n%s", field, runner.stderr)
		}
	}

	srv, err := bus.StartEmbedded(bus.EmbedOptions{StoreDir: t.TempDir(), Listen: true, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	seen := map[string]bool{}
	bustest.Eventually(t, time.Minute, "the runner and the controller to answer $SRV.PING", func() bool {
		for name := range pingedServices(nc) {
			seen[name] = true
		}
		return seen["tunejet-runner"] && seen["tunejet-controller"]
	})
	b, err := bus.New(nc, "test", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, time.Minute, "the runner in the registry", func() bool {
		runners, ok, err := b.LiveRunners(t.Context())
		if err != nil || !ok {
			return false
		}
		for _, r := range runners {
			if r.Name == "patient-runner" {
				return true
			}
		}
		return false
	})
}

// TestServiceStopsWhileWaitingForNATS: SIGTERM ends a service waiting for
// NATS at once, with exit status 0.
func TestServiceStopsWhileWaitingForNATS(t *testing.T) {
	t.Parallel()
	url, _ := deadNATS(t)
	p := startTunejet(t, "", baseEnv("TUNEJET_LOG_FORMAT=json"), "controller", "--nats", url)
	waitForFailedAttempt(t, p)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.code != 0 {
		t.Fatalf("SIGTERM while waiting for NATS:\n%s", r)
	}
}

// TestConnectTimeout: with --connect-timeout a service gives up and says
// why; a client command fails by itself with its short default.
func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	url, _ := deadNATS(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"service", []string{"runner", "--nats", url, "--connect-timeout", "1s"}, "no answer within the connect timeout of 1s"},
		{"service, from the environment", []string{"syncer", "--nats", url}, "no answer within the connect timeout of 1s"},
		{"client", []string{"status", "--nats", url}, "no answer within the connect timeout of 5s"},
		{"client run", []string{"run", "--nats", url, "experiment.yaml"}, "no answer within the connect timeout of 5s"},
		{"bad value", []string{"restorer", "--nats", url, "--connect-timeout", "-1s"}, "--connect-timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each waits out a timeout, and nothing else
			dir := t.TempDir()
			writeFile(t, dir, "experiment.yaml", "name: never_run\ntrainable:\n  command: [\"true\"]\n")
			r := tunejet(t, dir, baseEnv("TUNEJET_LOG_FORMAT=json", "TUNEJET_CONNECT_TIMEOUT=1s"), tc.args...)
			if tc.name == "client" || tc.name == "client run" {
				// The client's own default, not the services' environment.
				r = tunejet(t, dir, baseEnv(), tc.args...)
			}
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("want a failure saying %q:\n%s", tc.want, r)
			}
			if !strings.Contains(r.stderr, "tunejet: ") {
				t.Errorf("the error is not reported as tunejet's:\n%s", r)
			}
		})
	}
}
