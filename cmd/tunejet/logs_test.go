package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// interruptedExperiment reports every 100 ms for a minute, syncs every
// 0.2 s and mirrors to an upload_dir, so that syncs and mirror copies are
// under way when Ctrl-C comes.
const interruptedExperiment = `name: ctrl_c
trainable:
  command:
    - /bin/sh
    - -c
    - |
      i=0
      while [ $i -lt 600 ]; do
        i=$((i + 1))
        out=$("$TUNEJET_BIN" report loss=$i)
        if [ "$out" = stop ]; then exit 0; fi
        sleep 0.1
      done
param_space:
  x: {grid_search: [1, 2]}
run_config:
  storage_path: %s
  sync_config: {sync_period: 0.2, upload_dir: %s}
`

// errorLines are the JSON log lines at error level or above in text.
func errorLines(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		var entry struct {
			Level string `json:"level"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && (entry.Level == "error" || entry.Level == "fatal" || entry.Level == "panic") {
			out = append(out, line)
		}
	}
	return out
}

// TestCtrlCLogsNoError: Ctrl-C on tunejet run stops syncs under way; that
// is the shutdown the user asked for, not an error, so nothing is logged
// at error level (the default level, warn, shows errors).
func TestCtrlCLogsNoError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	storagePath, uploadDir := filepath.Join(dir, "storage"), filepath.Join(dir, "upload")
	file := writeFile(t, dir, "exp.yaml", fmt.Sprintf(interruptedExperiment, storagePath, uploadDir))
	p := startTunejet(t, "", embeddedEnv(t, "TUNEJET_LOG_FORMAT=json"), "run", file, "--store-dir", t.TempDir())
	bustest.Eventually(t, time.Minute, "results of both trials in the upload_dir", func() bool {
		if p.exited() {
			t.Fatalf("tunejet run exited before it was interrupted:\n%s\n%s", p.stdout, p.stderr)
		}
		files, _ := filepath.Glob(filepath.Join(uploadDir, "ctrl_c", "*", "result.json"))
		return len(files) == 2
	})
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 130 {
		t.Fatalf("want exit status 130 after SIGINT:\n%s", r)
	}
	if lines := errorLines(r.stderr); len(lines) > 0 {
		t.Errorf("Ctrl-C logged errors:\n%s", strings.Join(lines, "\n"))
	}
}

// TestConsoleLogsHaveNoColourOffATerminal: --log-format console writes
// colour codes only to a terminal; logs going to a file or a pipe stay
// plain text.
func TestConsoleLogsHaveNoColourOffATerminal(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	p := startTunejet(t, "", baseEnv(), "controller", "--nats", srv.URL(), "--log-format", "console")
	bustest.Eventually(t, time.Minute, "the controller to log that it starts", func() bool {
		if p.exited() {
			t.Fatalf("tunejet controller exited:\n%s", p.stderr)
		}
		return strings.Contains(p.stderr.String(), "starting")
	})
	if logs := p.stderr.String(); strings.Contains(logs, "\x1b[") {
		t.Errorf("console logs written to a pipe hold colour codes:\n%q", logs)
	}
}
