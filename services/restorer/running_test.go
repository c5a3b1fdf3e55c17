package restorer

import (
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/storage"
)

// A restore of an experiment that a live controller still runs (the log
// says running, and the controller renews its lease) is refused, naming
// the controller: the restored run and the running one would run the same
// trials side by side. Once the controller is gone without a word (its
// lease is no longer renewed), the same restore goes ahead, as after a
// kill -9.
func TestRunningExperimentIsRestoredOnlyOnceItsControllerIsGone(t *testing.T) {
	srv := bustest.Start(t)
	h := &history{t: t, b: srv.Bus("history"), storage: t.TempDir(), now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), reports: 1}
	h.add(events.WriterClient, &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
		Name: exp, Trainable: events.Trainable{Name: "fn"}, TuneConfig: events.TuneConfig{NumSamples: 1},
		ParamSpace: map[string]any{"x": 1.0}, RunConfig: events.RunConfig{StoragePath: h.storage},
	}})
	h.add(events.WriterController, &events.ExperimentStarted{Run: 1, Session: session1, Seed: 1, TrialIDPrefix: "abcde", NumTrials: 1, StoragePath: h.storage})
	ask := serve(t, srv, Config{})
	req := request(t, api.RestoreRequest{Path: storage.Join(h.storage, exp), Resume: restore.FromFlags(true, false, false)})

	lease, err := srv.Bus("controller").Lease(t.Context(), exp, "controller-7")
	if err != nil {
		t.Fatal(err)
	}
	if !lease.Acquire(t.Context()) {
		t.Fatal("acquire the lease")
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() { // the controller lives: it renews its lease, as a leader does
		defer close(stopped)
		tick := time.NewTicker(bus.LeaseTTL / 3)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				lease.Acquire(t.Context())
			}
		}
	}()
	rep := ask(api.RestoreSubject, req)
	close(stop)
	<-stopped
	if rep.OK || rep.Code != api.CodeRunning || !strings.Contains(rep.Error, "controller-7") || !strings.Contains(rep.Error, "tunejet stop") {
		t.Fatalf("restore of an experiment its live controller runs: %+v; want refused with code %q, naming the controller and how to stop it", rep, api.CodeRunning)
	}
	if last, err := srv.Bus("check").LastSeq(t.Context(), events.TypeSubjects(exp, events.WriterRestorer, events.TypeExperimentRestored)); err != nil || last != 0 {
		t.Fatalf("the refused restore published experiment.restored (seq %d, %v)", last, err)
	}

	// The controller died: its lease is no longer renewed.
	if rep := ask(api.RestoreSubject, req); !rep.OK {
		t.Fatalf("restore once the controller is gone: %+v", rep)
	}
}
