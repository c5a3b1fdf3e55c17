package main_test

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
)

// TestForgetAnExperimentWhoseBucketIsGone: an experiment ran on a bucket
// that is then deleted, so every later embedded command's syncer tries to
// reach it and says it cannot. tunejet experiments lists it,
// tunejet forget removes it from the store, and a following embedded run
// of another experiment neither lists it nor mentions its storage.
func TestForgetAnExperimentWhoseBucketIsGone(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket(storagetest.BucketName); err != nil {
		t.Fatal(err)
	}
	s3 := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(s3.Close)
	bucket := storagetest.S3At(t, s3.URL)
	store := t.TempDir()
	env := embeddedEnv(t, "MARK="+filepath.Join(t.TempDir(), "started"))
	gone := writeFile(t, t.TempDir(), "gone.yaml", fmt.Sprintf(markingExperiment, "gone"))
	if r := tunejet(t, "", env, "run", gone, "--store-dir", store, "--storage-path", bucket); r.code != 0 {
		t.Fatalf("run on the bucket:\n%s", r)
	}
	if err := backend.ForceDeleteBucket(storagetest.BucketName); err != nil {
		t.Fatal(err)
	}

	r := tunejet(t, "", env, "experiments", "--store-dir", store)
	if r.code != 0 || !strings.Contains(lineWith(r.stdout, "gone"), "COMPLETED") || !strings.Contains(lineWith(r.stdout, "gone"), "s3://"+storagetest.BucketName) {
		t.Fatalf("tunejet experiments: want gone listed COMPLETED with its bucket:\n%s", r)
	}
	r = tunejet(t, "", env, "forget", "gone", "--store-dir", store)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Forgot gone: removed ") || !strings.Contains(r.stdout, "sync_gone") {
		t.Fatalf("tunejet forget gone: want it removed with its syncer's consumer:\n%s", r)
	}
	if r := tunejet(t, "", env, "forget", "gone", "--store-dir", store); r.code != 1 || !strings.Contains(r.stderr, `holds no experiment "gone"`) {
		t.Errorf("a second forget: want exit status 1 saying the log does not hold it:\n%s", r)
	}

	other := writeFile(t, t.TempDir(), "other.yaml", fmt.Sprintf(markingExperiment, "other"))
	r = tunejet(t, "", env, "run", other, "--store-dir", store, "--storage-path", t.TempDir())
	if r.code != 0 || strings.Contains(r.stderr, "gone") || strings.Contains(r.stderr, "s3://") {
		t.Fatalf("a run after forget: want exit status 0 and nothing about the forgotten experiment:\n%s", r)
	}
	r = tunejet(t, "", env, "experiments", "--store-dir", store)
	if r.code != 0 || strings.Contains(r.stdout, "gone") || !strings.Contains(lineWith(r.stdout, "other"), "COMPLETED") {
		t.Fatalf("tunejet experiments after forget: want other only:\n%s", r)
	}
}

// gatedExperiment's one trial reports, then waits for the file $GATE.
const gatedExperiment = `name: %s
trainable:
  name: gated
  command: ["/bin/sh", "-c", "\"$TUNEJET_BIN\" report loss=1 && while [ ! -e \"$GATE\" ]; do sleep 0.05; done"]
param_space:
  x: 1
run_config:
  storage_path: %s
`

// TestForgetRefusesARunningExperiment: on a deployment, tunejet forget of
// an experiment whose controller holds its lease is refused, naming the
// controller, and the log keeps it; once it completed, forget removes it.
func TestForgetRefusesARunningExperiment(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	gate := filepath.Join(t.TempDir(), "gate")
	env := baseEnv("TUNEJET_BIN="+tunejetBin, "GATE="+gate)
	startTunejet(t, "", env, "controller", "--nats", srv.URL())
	startTunejet(t, "", env, "syncer", "--nats", srv.URL())
	startTunejet(t, "", env, "runner", "--nats", srv.URL(), "--slots", "1", "--work-dir", t.TempDir())
	file := writeFile(t, t.TempDir(), "exp.yaml", fmt.Sprintf(gatedExperiment, "held", t.TempDir()))
	run := startTunejet(t, "", env, "run", "--nats", srv.URL(), file)
	bustest.Eventually(t, 2*time.Minute, "the trial's report", func() bool {
		for _, ev := range replay(t, srv, "held") {
			if ev.Type() == events.TypeTrialReported {
				return true
			}
		}
		return false
	})

	r := tunejet(t, "", env, "forget", "held", "--nats", srv.URL())
	if r.code != 1 || !strings.Contains(r.stderr, "refused") || !strings.Contains(r.stderr, "led by controller tunejet/controller/") {
		t.Fatalf("forget of a running experiment: want it refused, naming its controller:\n%s", r)
	}
	if len(replay(t, srv, "held")) == 0 {
		t.Fatal("the refused forget removed the experiment's events")
	}

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run.wait(t); r.code != 0 {
		t.Fatalf("tunejet run:\n%s", r)
	}
	// The controller lets its lease go as its run of the experiment ends.
	bustest.Eventually(t, time.Minute, "forget of the completed experiment", func() bool {
		return tunejet(t, "", env, "forget", "held", "--nats", srv.URL()).code == 0
	})
	if evs := replay(t, srv, "held"); len(evs) != 0 {
		t.Fatalf("the log still holds %d events of the forgotten experiment", len(evs))
	}
}
