package trainproto

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// These tests run the real Python SDK (sdk/python/tunejet) and example
// (examples/python/train.py) against the real server. python3 is required:
// a missing interpreter fails the tests rather than skipping them.

// repoRoot returns the directory holding go.mod, above the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's working directory")
		}
		dir = parent
	}
}

func python3(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is required by the Python SDK tests and was not found on PATH: %v", err)
	}
	return path
}

// trial is one command trainable attempt against a running server.
type trial struct {
	env    Env
	stderr bytes.Buffer
}

func newTrial(t *testing.T, s *server, config string) *trial {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir()) // as os.getcwd() will see it
	if err != nil {
		t.Fatal(err)
	}
	return &trial{env: Env{
		Config: json.RawMessage(config), TrialID: "t-1", TrialName: "train_t-1",
		Experiment: "exp", TrialDir: dir, Attempt: 1, Socket: s.path,
	}}
}

// run runs python3 with args in the trial directory and returns its error.
func (tr *trial) run(t *testing.T, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, python3(t), args...)
	cmd.Dir = tr.env.TrialDir
	cmd.Env = append(os.Environ(), tr.env.Environ()...)
	cmd.Env = append(cmd.Env, "PYTHONPATH="+filepath.Join(repoRoot(t), "sdk", "python"), "PYTHONDONTWRITEBYTECODE=1")
	cmd.Stderr = &tr.stderr
	return cmd.Run()
}

const sdkScript = `
import json, os, shutil, sys, tempfile
import tunejet

assert tunejet.in_session()
config = tunejet.get_config()
assert config == {"lr": 0.01, "layers": [2, 3]}, config
assert tunejet.get_trial_id() == "t-1"
assert tunejet.get_trial_name() == "train_t-1"
assert tunejet.get_experiment_name() == "exp"
assert tunejet.get_attempt() == 2
assert tunejet.get_trial_dir() == os.getcwd()
with open(os.path.join(tunejet.get_checkpoint(), "state.json")) as f:
    step = json.load(f)["step"]

try:
    tunejet.report({"x": 1}, checkpoint_dir="missing")
except RuntimeError as e:
    print("rejected:", e, file=sys.stderr)
else:
    sys.exit(3)

tunejet.report({"loss": config["lr"] * 2, "step": step + 1, "name": "first",
                "nan": float("nan"), "nested": {"a": [1, 2.5]}, "big": 2**53})
ckpt = tempfile.mkdtemp()
with open(os.path.join(ckpt, "model.json"), "w") as f:
    f.write('{"w": 7}')
tunejet.report({"loss": 0.5, "step": step + 2}, checkpoint_dir=ckpt)
shutil.rmtree(ckpt)  # allowed: report returned, so the runner has the files
with open("ckpt_path", "w") as f:
    f.write(ckpt)
try:
    tunejet.report({"loss": 0.25})  # the runner answers stop: exit 0
finally:
    print("finally ran", file=sys.stderr)
sys.exit(4)
`

func TestPythonSDK(t *testing.T) {
	h := &recordingHandler{stopAt: 3}
	s := startServer(t, h)
	tr := newTrial(t, s, `{"lr": 0.01, "layers": [2, 3]}`)
	tr.env.Attempt = 2
	tr.env.CheckpointDir = t.TempDir()
	if err := os.WriteFile(filepath.Join(tr.env.CheckpointDir, "state.json"), []byte(`{"step": 4}`), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "script.py")
	if err := os.WriteFile(script, []byte(sdkScript), 0o644); err != nil {
		t.Fatal(err)
	}

	if err := tr.run(t, script); err != nil {
		t.Fatalf("script: %v, want exit 0; stderr:\n%s", err, &tr.stderr)
	}
	stderr := tr.stderr.String()
	for _, want := range []string{
		"rejected: tunejet runner rejected the report request: field \"checkpoint_dir\": stat " +
			filepath.Join(tr.env.TrialDir, "missing") + ": no such file or directory",
		"finally ran",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q; stderr:\n%s", want, stderr)
		}
	}
	ckpt, err := os.ReadFile(filepath.Join(tr.env.TrialDir, "ckpt_path"))
	if err != nil {
		t.Fatal(err)
	}
	want := []gotReport{
		{Metrics: map[string]any{
			"loss": 0.02, "step": 5.0, "name": "first", "nan": nil,
			"nested": map[string]any{"a": []any{1.0, 2.5}}, "big": 9007199254740992.0,
		}},
		{Metrics: map[string]any{"loss": 0.5, "step": 6.0}, Dir: string(ckpt), Files: map[string]string{"model.json": `{"w": 7}`}},
		{Metrics: map[string]any{"loss": 0.25}},
	}
	if diff := cmp.Diff(want, h.got()); diff != "" {
		t.Errorf("handler got (-want +got):\n%s", diff)
	}
}

func TestPythonSDKOutsideRunner(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), python3(t), "-c", "import tunejet; tunejet.report({'loss': 1})")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TUNEJET_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PYTHONPATH="+filepath.Join(repoRoot(t), "sdk", "python"), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("report outside a runner exited 0")
	}
	want := "RuntimeError: not running under a tunejet runner: TUNEJET_SOCKET is not set"
	if !strings.Contains(string(out), want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

// TestPythonExample runs examples/python/train.py for a whole trial, then
// once more resuming from one of the checkpoints it reported.
func TestPythonExample(t *testing.T) {
	trainPy := filepath.Join(repoRoot(t), "examples", "python", "train.py")
	h := &recordingHandler{}
	s := startServer(t, h)
	tr := newTrial(t, s, `{"lr": 0.05, "x": 1}`)
	if err := tr.run(t, trainPy); err != nil {
		t.Fatalf("train.py: %v; stderr:\n%s", err, &tr.stderr)
	}
	reports := h.got()
	if got := steps(t, reports); !cmp.Equal(got, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("steps reported: %v, want 1..10", got)
	}
	var checkpointed []float64
	for _, r := range reports {
		if r.Dir != "" {
			var state struct{ Step float64 }
			if err := json.Unmarshal([]byte(r.Files["state.json"]), &state); err != nil || state.Step != r.Metrics["step"] {
				t.Errorf("checkpoint at step %v: state.json %q (%v)", r.Metrics["step"], r.Files["state.json"], err)
			}
			checkpointed = append(checkpointed, state.Step)
		}
	}
	if !cmp.Equal(checkpointed, []float64{3, 6, 9, 10}) {
		t.Errorf("checkpoints at steps %v, want [3 6 9 10]", checkpointed)
	}
	if first, last := reports[0].Metrics["loss"].(float64), reports[9].Metrics["loss"].(float64); last >= first {
		t.Errorf("loss went from %v to %v; want it to fall", first, last)
	}

	// Resume from the checkpoint of step 6, as a second attempt would.
	h2 := &recordingHandler{}
	tr2 := newTrial(t, startServer(t, h2), `{"lr": 0.05, "x": 1}`)
	tr2.env.Attempt, tr2.env.CheckpointDir = 2, t.TempDir()
	if err := os.WriteFile(filepath.Join(tr2.env.CheckpointDir, "state.json"), []byte(reports[5].Files["state.json"]), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tr2.run(t, trainPy); err != nil {
		t.Fatalf("train.py resuming: %v; stderr:\n%s", err, &tr2.stderr)
	}
	if got := steps(t, h2.got()); !cmp.Equal(got, []float64{7, 8, 9, 10}) {
		t.Errorf("steps reported after resuming from step 6: %v, want 7..10", got)
	}
	if got, want := h2.got()[0].Metrics["w"], reports[6].Metrics["w"]; got != want {
		t.Errorf("w at step 7 after resuming = %v, want %v as in the first run", got, want)
	}
}

func steps(t *testing.T, reports []gotReport) []float64 {
	t.Helper()
	var s []float64
	for _, r := range reports {
		step, ok := r.Metrics["step"].(float64)
		if !ok {
			t.Fatalf("report without a numeric step: %v", r.Metrics)
		}
		s = append(s, step)
	}
	return s
}
