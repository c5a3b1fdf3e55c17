package main_test

// A command syncer end to end through the CLI (issue 13, item 5): `tunejet
// run FILE` mirrors the experiment to upload_dir with cp/tar commands; with
// the local folder and the JetStream store gone, `tunejet restore PATH
// FILE` brings the folder back with the file's sync_down, finishes the
// experiment, and mirrors the restored run with the file's commands.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/storage"
)

// mirroredScript reports twice with a checkpoint; x=2 fails first unless
// $MARK_DIR/ok exists.
const mirroredScript = `set -eu
case "$TUNEJET_CONFIG" in
*'"x":2'*) if [ ! -e "$MARK_DIR/ok" ]; then echo "x=2 is not ready" >&2; exit 3; fi ;;
esac
for step in 1 2; do
	dir=$(mktemp -d)
	echo "$step" > "$dir/step"
	"$TUNEJET_BIN" report --checkpoint "$dir" step=$step > /dev/null
	rm -rf "$dir"
done
`

// mirroredExperiment mirrors to UPLOAD with tar up (leaving checkpoints
// out) and cp down.
const mirroredExperiment = `name: cli_mirrored
trainable:
  name: mirrored
  command: ["/bin/sh", "mirrored.sh"]
param_space:
  x: {grid_search: [1, 2]}
run_config:
  failure_config: {max_failures: 0}
  sync_config:
    sync_period: 0.1
    upload_dir: UPLOAD
    exclude: ["*/checkpoint_*"]
    syncer:
      sync_up: "mkdir -p {target} && tar -C {source} -cf - {exclude} . | tar -C {target} -xf -"
      sync_down: "cp -r {source}/. {target}"
      delete: "rm -rf {target}"
`

// newestState is the name of the newest experiment_state-*.json in dir,
// "" while there is none.
func newestState(dir string) string {
	name, err := (&storage.Dir{Root: dir}).NewestState()
	if err != nil {
		return ""
	}
	return name
}

func TestRestoreWithTheFilesCommandSyncer(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"tar", "cp", "rm", "mkdir"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	dir, marks, storagePath := t.TempDir(), t.TempDir(), t.TempDir()
	upload := filepath.Join(t.TempDir(), "remote")
	writeFile(t, dir, "mirrored.sh", mirroredScript)
	file := writeFile(t, dir, "experiment.yaml", strings.ReplaceAll(mirroredExperiment, "UPLOAD", upload))
	env := embeddedEnv(t, "MARK_DIR="+marks)
	local, remote := filepath.Join(storagePath, "cli_mirrored"), filepath.Join(upload, "cli_mirrored")

	r := tunejet(t, dir, env, "run", file, "--store-dir", t.TempDir(), "--storage-path", storagePath, "--slots", "2")
	if r.code == 130 {
		t.Fatalf("run: %s\nwant it to run to its end", r)
	}
	bustest.Eventually(t, time.Minute, "the remote to hold the first run's final state", func() bool {
		n := newestState(remote)
		return n != "" && n == newestState(local)
	})
	first := newestState(remote)
	if st := loadState(t, remote); st.Counts()[events.StatusError] != 1 || st.Counts()[events.StatusTerminated] != 1 {
		t.Fatalf("the mirrored state counts %v; want one TERMINATED and one ERROR", st.Counts())
	}

	if err := os.RemoveAll(local); err != nil {
		t.Fatal(err)
	}
	writeFile(t, marks, "ok", "")
	r = tunejet(t, dir, env, "restore", local, file, "--store-dir", t.TempDir(), "--resume-errored", "--slots", "2")
	if r.code != 0 {
		t.Fatalf("restore: %s", r)
	}
	bustest.Eventually(t, time.Minute, "the remote to hold the restored run's final state", func() bool {
		n := newestState(remote)
		return n != "" && n != first && n == newestState(local)
	})
	st := loadState(t, remote)
	if !st.Done() || st.Counts()[events.StatusTerminated] != 2 || len(st.Trials) != 2 {
		t.Errorf("the remote's final state: done %v, counts %v; want both trials TERMINATED", st.Done(), st.Counts())
	}
	for _, tr := range st.Trials {
		if _, err := os.Stat(filepath.Join(local, tr.DirName, "result.json")); err != nil {
			t.Errorf("trial %s: %v; sync_down brought back the folder and the restore wrote to it", tr.ID, err)
		}
		if ck, _ := filepath.Glob(filepath.Join(remote, tr.DirName, "checkpoint_*")); len(ck) != 0 {
			t.Errorf("the remote holds %v, which exclude leaves out", ck)
		}
	}
}
