package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/storage"
)

// TestInterruptBeforeSubmitExits130: Ctrl-C while tunejet run still waits
// on the deployment, before the experiment is submitted, is an
// interruption (exit status 130, as documented), not a failure (1).
func TestInterruptBeforeSubmitExits130(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	// A syncer that hears the claim and never answers: the client waits
	// on it, and the test knows when.
	sub, err := srv.Conn().SubscribeSync(storage.ClaimSubject)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	exp := writeFile(t, dir, "exp.yaml", `name: interrupted
trainable:
  command: ["true"]
run_config:
  storage_path: `+filepath.Join(dir, "results")+`
`)
	p := startTunejet(t, "", baseEnv(), "run", "--nats", srv.URL(), exp)
	if _, err := sub.NextMsg(time.Minute); err != nil {
		t.Fatalf("no storage claim came from tunejet run: %v\n%s", err, p.stderr.String())
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 130 || strings.Contains(r.stderr, "context canceled") {
		t.Errorf("tunejet run interrupted before it submitted: want exit status 130 and no 'context canceled':\n%s", r)
	}
}
