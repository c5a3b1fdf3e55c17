package tune_test

// End-to-end tests of the upload_dir mirror (issue 13, item 5): a command
// syncer of real shell commands copies the experiment's folder to a second
// folder, leaving out excluded checkpoints; a restore brings a deleted
// folder back with sync_down; a Go Syncer plugged with WithSyncer.

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/blobsync/blobsynctest"
	"github.com/tunejet/tunejet/services/syncer"
	"github.com/tunejet/tunejet/tune"
)

// copySyncer copies with tar (which takes --exclude PATTERN) up and cp
// down, and deletes with rm.
func copySyncer(t *testing.T) *tune.CommandSyncer {
	t.Helper()
	for _, tool := range []string{"sh", "tar", "cp", "rm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	return &tune.CommandSyncer{
		SyncUp:   "mkdir -p {target} && tar -C {source} -cf - {exclude} . | tar -C {target} -xf -",
		SyncDown: "cp -r {source}/. {target}",
		Delete:   "rm -rf {target}",
	}
}

// TestCommandSyncerMirrorsTheExperiment: the remote folder ends with the
// experiment's state, every trial's result.json and progress.csv, and no
// checkpoint_* folder, which exclude leaves out.
func TestCommandSyncerMirrorsTheExperiment(t *testing.T) {
	testMirror(t, copySyncer(t))
}

// TestUploadDirMirrorsWithGocloud: the same without a syncer, to a folder
// gocloud opens, excluding as fnmatch does.
func TestUploadDirMirrorsWithGocloud(t *testing.T) {
	testMirror(t, nil)
}

func testMirror(t *testing.T, syncer *tune.CommandSyncer) {
	const name = "mirrored"
	storagePath := filepath.Join(t.TempDir(), "storage")
	upload := filepath.Join(t.TempDir(), "remote's dir")
	var hold atomic.Bool
	tuner, err := tune.NewTuner(gate(&hold, &sync.Map{}), tune.WithTrainableName("gate"), tune.WithName(name),
		tune.WithStoreDir(t.TempDir()), tune.WithRunnerSlots(2),
		tune.WithRunConfig(tune.RunConfig{StoragePath: storagePath, SyncConfig: tune.SyncConfig{
			SyncPeriodS: 0.1, UploadDir: upload, Syncer: syncer, Exclude: []string{"*/checkpoint_*"},
		}}),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(0, 1)}))
	if err != nil {
		t.Fatal(err)
	}
	g, err := tuner.Fit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if g.NumTerminated() != 2 {
		t.Fatalf("%d TERMINATED, want 2", g.NumTerminated())
	}
	local, remote := filepath.Join(storagePath, name), filepath.Join(upload, name)
	poll(t, "the remote's state to show both trials TERMINATED", func() bool {
		st, _, ok := storedState(t, remote)
		return ok && st.Done() && len(st.Trials) == 2 && st.Trials[st.TrialList()[0].ID].Status == events.StatusTerminated &&
			st.Trials[st.TrialList()[1].ID].Status == events.StatusTerminated
	})
	for _, r := range g.Results() {
		dir := filepath.Base(r.Path)
		for _, f := range []string{"result.json", "progress.csv", "params.json"} {
			want, err := os.ReadFile(filepath.Join(local, dir, f))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(remote, dir, f))
			if err != nil || string(got) != string(want) {
				t.Errorf("remote %s/%s = %q, %v; want the local file %q", dir, f, got, err, want)
			}
		}
		if ck, _ := filepath.Glob(filepath.Join(local, dir, "checkpoint_*")); len(ck) == 0 {
			t.Errorf("no checkpoint in the local trial folder %s: the exclusion proves nothing", dir)
		}
	}
	if ck, _ := filepath.Glob(filepath.Join(remote, "*", "checkpoint_*")); len(ck) != 0 {
		t.Errorf("the remote holds %v, which exclude */checkpoint_* leaves out", ck)
	}
}

// TestCommandSyncerRestoresADeletedFolder: an interrupted experiment is
// mirrored, its local folder deleted, and a restore given the experiment's
// sync_config brings the folder back with sync_down and finishes it from
// the mirrored checkpoint.
func TestCommandSyncerRestoresADeletedFolder(t *testing.T) {
	const name = "brought_back"
	storagePath := filepath.Join(t.TempDir(), "storage")
	upload := filepath.Join(t.TempDir(), "remote")
	sc := tune.SyncConfig{SyncPeriodS: 0.1, UploadDir: upload, Syncer: copySyncer(t)}
	var hold atomic.Bool
	hold.Store(true)
	resumed := &sync.Map{}
	fn := gate(&hold, resumed)
	tuner, err := tune.NewTuner(fn, tune.WithTrainableName("gate"), tune.WithName(name),
		tune.WithStoreDir(t.TempDir()), tune.WithRunnerSlots(2),
		tune.WithRunConfig(tune.RunConfig{StoragePath: storagePath, SyncConfig: sc}),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(0, 1)}))
	if err != nil {
		t.Fatal(err)
	}
	cancel, wait := fitInBackground(t, tuner)
	local, remote := filepath.Join(storagePath, name), filepath.Join(upload, name)
	poll(t, "x=1's second checkpoint persisted", func() bool {
		st, _, ok := storedState(t, local)
		if !ok {
			return false
		}
		by := trialsByX(st)
		return by[0] != nil && by[0].Status == events.StatusTerminated && by[1] != nil && by[1].Persisted["checkpoint_000001"]
	})
	cancel()
	if err := wait(); !errors.Is(err, tune.ErrInterrupted) {
		t.Fatalf("Fit after Ctrl-C: %v; want ErrInterrupted", err)
	}
	hold.Store(false)
	_, localKey, _ := storedState(t, local)
	poll(t, "the remote to hold the interrupted state and x=1's checkpoint", func() bool {
		_, key, ok := storedState(t, remote)
		_, err := os.Stat(filepath.Join(remote, filepath.Base(trialDir(t, local, 1)), "checkpoint_000001", "step"))
		return ok && key == localKey && err == nil
	})
	if err := os.RemoveAll(local); err != nil {
		t.Fatal(err)
	}
	// Someone who can write the remote edits the state file's commands
	// (its checksum recomputed): sync_down brings the file back, and the
	// restore must run the caller's commands, never these.
	marker := filepath.Join(t.TempDir(), "edited")
	editStoredSyncer(t, remote, &tune.CommandSyncer{
		SyncUp: "touch '" + marker + "' # {source} {target}", SyncDown: "touch '" + marker + "' # {source} {target}",
		Delete: "touch '" + marker + "' # {target}",
	})

	restored, err := tune.Restore(t.Context(), local, fn, tune.WithTrainableName("gate"),
		tune.WithStoreDir(t.TempDir()), tune.WithRunnerSlots(2), tune.WithSyncConfig(sc))
	if err != nil {
		t.Fatalf("Restore from upload_dir: %v", err)
	}
	g, err := restored.Fit(t.Context())
	if err != nil {
		t.Fatalf("Fit of the restored experiment: %v", err)
	}
	if g.NumTerminated() != 2 {
		t.Fatalf("restored: %d TERMINATED, want 2", g.NumTerminated())
	}
	if step, ok := resumed.Load(1); !ok || step != 2 {
		t.Errorf("x=1 resumed at step %v (%v), want 2: from the checkpoint sync_down brought back", step, ok)
	}
	if _, key, ok := storedState(t, local); !ok || key == localKey {
		t.Errorf("the restored run wrote no new state to the folder brought back (newest %q)", key)
	}
	// The restored run mirrors with the caller's sync_config: the remote
	// ends with the restored run's final state.
	poll(t, "the remote to hold the restored run's final state", func() bool {
		_, lkey, lok := storedState(t, local)
		st, rkey, rok := storedState(t, remote)
		return lok && rok && rkey == lkey && rkey != localKey && st.Done()
	})
	if _, err := os.Stat(marker); err == nil {
		t.Error("a command of the edited state file ran")
	}
}

// editStoredSyncer rewrites the newest state file of the experiment at dir
// with syncer as its spec's command syncer, the checksum recomputed, as
// anyone who can write the folder could.
func editStoredSyncer(t *testing.T, dir string, syncer *tune.CommandSyncer) {
	t.Helper()
	st, key, ok := storedState(t, dir)
	if !ok {
		t.Fatalf("no state at %s", dir)
	}
	st.Spec.RunConfig.SyncConfig.Syncer = syncer
	b, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, key), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCommandSyncerFailureIsAnnounced: a sync_up that fails after its
// retries is announced with sync.failed, carrying the command's exit
// status and stderr, and the experiment still finishes.
func TestCommandSyncerFailureIsAnnounced(t *testing.T) {
	const name = "unreachable"
	// The mirror's retries wait 20 ms, not Ray's 5 s.
	d := startSyncDeployment(t, 1, map[string]tune.Trainable{"gate": gate(&atomic.Bool{}, &sync.Map{})}, syncer.Config{RetryBackoff: 20 * time.Millisecond})
	tuner, err := tune.NewTuner("gate", tune.WithName(name), d.nats(),
		tune.WithRunConfig(tune.RunConfig{StoragePath: t.TempDir(), SyncConfig: tune.SyncConfig{
			SyncPeriodS: 0.1, UploadDir: "remote:nowhere",
			Syncer: &tune.CommandSyncer{SyncUp: "echo no route to {target} >&2; exit 3 # {source}"},
		}}),
		tune.WithParamSpace(tune.ParamSpace{"x": 0}))
	if err != nil {
		t.Fatal(err)
	}
	g, err := tuner.Fit(t.Context())
	if err != nil || g.NumTerminated() != 1 {
		t.Fatalf("Fit: %v, %v; want the trial TERMINATED whatever the mirror does", g, err)
	}
	var failed *events.SyncFailed
	poll(t, "sync.failed for the mirror", func() bool {
		for _, ev := range d.events(t, name) {
			if p, ok := ev.Data.(*events.SyncFailed); ok && strings.HasPrefix(p.Operation, "sync_up ") {
				failed = p
				return true
			}
		}
		return false
	})
	if failed.Operation != "sync_up remote:nowhere/"+name || !strings.Contains(failed.Error, "Error message (3): no route to remote:nowhere/"+name) || failed.Attempt != 3 {
		t.Errorf("sync.failed = %+v; want the command's exit status and stderr after 3 attempts", failed)
	}
}

// TestRestoreSyncDownNeedsACommand: a sync_config with a syncer but no
// sync_down cannot bring a missing folder back, and says so.
func TestRestoreSyncDownNeedsACommand(t *testing.T) {
	sc := tune.SyncConfig{UploadDir: t.TempDir(), Syncer: &tune.CommandSyncer{SyncUp: "cp -r {source} {target}"}}
	_, err := tune.Restore(t.Context(), filepath.Join(t.TempDir(), "gone"), "fn", tune.WithStoreDir(t.TempDir()), tune.WithSyncConfig(sc))
	if err == nil || !strings.Contains(err.Error(), "syncer has no sync_down command") {
		t.Fatalf("Restore: %v; want the missing sync_down named", err)
	}
}

// trialDir is the folder of the trial with x in the experiment at dir.
func trialDir(t *testing.T, dir string, x int) string {
	t.Helper()
	st, _, ok := storedState(t, dir)
	if !ok {
		t.Fatalf("no state at %s", dir)
	}
	return filepath.Join(dir, trialsByX(st)[x].DirName)
}

// TestWithSyncerMirrorsWithAGoSyncer: the embedded syncer mirrors with the
// Go Syncer, to an upload_dir gocloud could not open.
func TestWithSyncerMirrorsWithAGoSyncer(t *testing.T) {
	const name = "go_syncer"
	storagePath := filepath.Join(t.TempDir(), "storage")
	rec := &blobsynctest.Recorder{}
	tuner, err := tune.NewTuner(gate(&atomic.Bool{}, &sync.Map{}), tune.WithTrainableName("gate"), tune.WithName(name),
		tune.WithStoreDir(t.TempDir()), tune.WithRunnerSlots(1), tune.WithSyncer(rec),
		tune.WithRunConfig(tune.RunConfig{StoragePath: storagePath, SyncConfig: tune.SyncConfig{
			SyncPeriodS: 0.1, UploadDir: "hdfs://namenode/tune/", Exclude: []string{"*/checkpoint_*"},
		}}),
		tune.WithParamSpace(tune.ParamSpace{"x": 0}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tuner.Fit(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := "up " + filepath.Join(storagePath, name) + " hdfs://namenode/tune/" + name + " */checkpoint_*"
	poll(t, "the Go Syncer's sync_up", func() bool {
		return slices.Contains(rec.Calls(), want)
	})
}
