package tune_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tunejet/tunejet/tune"
)

// TestObjectReferences: a param_space value from tune.Put reaches trials
// through tune.Get; on restore a re-specified reference reaches both the
// resumed trials and those not generated yet.
func TestObjectReferences(t *testing.T) {
	var block atomic.Bool
	block.Store(true)
	started := make(chan struct{}, 16)
	reader := func(ctx context.Context, config map[string]any) error {
		data, err := tune.Get(ctx, config["data"])
		if err != nil {
			return err
		}
		if err := tune.Report(ctx, map[string]any{"data": string(data)}); err != nil {
			return err
		}
		if block.Load() {
			started <- struct{}{}
			<-ctx.Done() // held until the test interrupts the run
			return ctx.Err()
		}
		return nil
	}
	v1, err := tune.Put(t.Context(), "dataset_v1", []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	store, rc := t.TempDir(), storage(t)
	ctx, cancel := context.WithCancel(t.Context())
	tuner, err := tune.NewTuner(reader, tune.WithName("refs"), tune.WithRunConfig(rc), tune.WithStoreDir(store),
		tune.WithParamSpace(tune.ParamSpace{"data": v1, "x": tune.GridSearch(1, 2, 3)}),
		tune.WithTuneConfig(tune.TuneConfig{MaxConcurrentTrials: 1}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := tuner.Fit(ctx); done <- err }()
	<-started
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Fit of an interrupted experiment returned no error")
	}
	block.Store(false)
	v2, err := tune.Put(t.Context(), "dataset_v2", []byte("second"))
	if err != nil {
		t.Fatal(err)
	}
	restored, err := tune.Restore(t.Context(), filepath.Join(rc.StoragePath, "refs"), reader, tune.WithStoreDir(store),
		tune.WithParamSpace(tune.ParamSpace{"data": v2, "x": tune.GridSearch(1, 2, 3)}))
	if err != nil {
		t.Fatal(err)
	}
	g, err := restored.Fit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if g.Len() != 3 || g.NumTerminated() != 3 {
		t.Fatalf("%d trials, %d terminated; want 3 and 3", g.Len(), g.NumTerminated())
	}
	for _, r := range g.Results() {
		if r.Metrics["data"] != "second" {
			t.Errorf("trial %s read %v, want the re-specified object", r.TrialID, r.Metrics["data"])
		}
	}
}

// TestMissingObjectSaysWhatToDo: a reference whose object is gone fails
// the trial with an error that says to re-specify param_space.
func TestMissingObjectSaysWhatToDo(t *testing.T) {
	var fail atomic.Bool
	d := startDeployment(t, 1, map[string]tune.Trainable{"get": func(ctx context.Context, config map[string]any) error {
		_, err := tune.Get(ctx, map[string]any{"object_ref": "never_put"})
		fail.Store(err != nil)
		return err
	}})
	g := d.fit(t, "get", tune.WithName("gone"), tune.WithRunConfig(storage(t)), tune.WithParamSpace(tune.ParamSpace{"x": 1}))
	if !fail.Load() || g.NumErrors() != 1 || !strings.Contains(fmt.Sprint(g.Errors()), "re-specify param_space") {
		t.Fatalf("errors %v; want the trial ERROR saying to re-specify param_space", g.Errors())
	}
}

// TestCommandTrainableGetsObject: a command trainable reads an object
// with the protocol's get_object, both one its config refers to and one
// stored only by WithObjects (a reference the trainable holds itself).
func TestCommandTrainableGetsObject(t *testing.T) {
	d := startDeployment(t, 2, nil)
	script := filepath.Join(t.TempDir(), "get.py")
	body := `import json, os, socket
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["TUNEJET_SOCKET"])
f = s.makefile("rw")
def ask(req):
    f.write(json.dumps(req) + "\n"); f.flush()
    return json.loads(f.readline())
config = json.loads(os.environ["TUNEJET_CONFIG"])
got = {}
for key, name in (("from_config", config["data"]["object_ref"]), ("held", "weights")):
    reply = ask({"op": "get_object", "name": name})
    got[key] = open(reply["path"]).read()
missing = ask({"op": "get_object", "name": "never_put"})
got["missing_error"] = missing["error"]
ask({"op": "report", "metrics": got})
`
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := tune.Put(t.Context(), "cmd_data", []byte("from the config"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tune.Put(t.Context(), "weights", []byte("held by the trainable")); err != nil {
		t.Fatal(err)
	}
	if _, err := tune.NewTuner(tune.Command{"python3", script}, tune.WithObjects("not_put")); err == nil || !strings.Contains(err.Error(), "not_put") {
		t.Fatalf("WithObjects of a name never put = %v, want an error naming it", err)
	}
	g := d.fit(t, tune.Command{"python3", script}, tune.WithName("cmdobjects"), tune.WithRunConfig(storage(t)),
		tune.WithParamSpace(tune.ParamSpace{"data": data, "x": tune.GridSearch(1, 2)}), tune.WithObjects("weights"))
	if g.NumTerminated() != 2 {
		t.Fatalf("%d of %d trials terminated; errors %v", g.NumTerminated(), g.Len(), g.Errors())
	}
	for _, r := range g.Results() {
		if r.Metrics["from_config"] != "from the config" || r.Metrics["held"] != "held by the trainable" {
			t.Errorf("trial %s read %v", r.TrialID, r.Metrics)
		}
		if e, _ := r.Metrics["missing_error"].(string); !strings.Contains(e, "re-specify param_space") {
			t.Errorf("trial %s: get_object of a missing object said %q, want why and what to do", r.TrialID, e)
		}
	}
}
