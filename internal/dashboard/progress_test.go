package dashboard_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/dashboard"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/tune"
	"github.com/tunejet/tunejet/tune/tunetest"
)

type experimentList struct {
	Experiments []dashboard.Summary `json:"experiments"`
}

// An experiment's summary counts its trials ended of the total its search
// creates (not of the trials created so far), with an ETA once one ended.
func TestSummaryShowsProgressOfTheTotal(t *testing.T) {
	e := startStepped(t, "")
	var list experimentList
	bustest.Eventually(t, 20*time.Second, "both trials running", func() bool {
		list = experimentList{}
		getJSON(t, e.dash.URL+"/api/experiments", &list)
		return len(list.Experiments) == 1 && list.Experiments[0].Counts["RUNNING"] == len(xs)
	})
	if s := list.Experiments[0]; s.TotalTrials != len(xs) || s.Progress != "0/2 trials done (0%)" || s.ETASeconds != nil {
		t.Errorf("summary %+v; want 0 of the 2 trials done, no ETA yet", s)
	}
	e.finishTrial(xs[0])
	bustest.Eventually(t, 20*time.Second, "one trial ended", func() bool {
		list = experimentList{}
		getJSON(t, e.dash.URL+"/api/experiments", &list)
		return list.Experiments[0].Counts["TERMINATED"] == 1
	})
	if s := list.Experiments[0]; !strings.HasPrefix(s.Progress, "1/2 trials done (50%), ETA ") || s.ETASeconds == nil || *s.ETASeconds <= 0 {
		t.Errorf("summary %+v; want 1 of 2 done with an ETA", s)
	}
}

// An experiment read from its files shows its total, unbounded here, and
// no ETA: nothing follows it.
func TestStoredSummaryShowsAnUnboundedTotal(t *testing.T) {
	st := state.New("unbounded")
	st.Status, st.Run, st.NumTrials, st.StartTime = state.ExperimentRunning, 1, -1, time.Now().Add(-time.Minute)
	st.Trials["t1"] = &state.Trial{ID: "t1", Name: "t1", DirName: "t1", Status: events.StatusTerminated, EndTime: time.Now()}
	st.Order = []string{"t1"}
	st.Recount()
	var list experimentList
	getJSON(t, serveDashboard(t, storedDashboard(t, st)).URL+"/api/experiments", &list)
	if len(list.Experiments) != 1 {
		t.Fatalf("experiments %+v; want the stored one", list.Experiments)
	}
	if s := list.Experiments[0]; s.TotalTrials != -1 || s.Progress != "1/unbounded trials done (num_samples -1)" || s.ETASeconds != nil {
		t.Errorf("summary %+v; want 1 trial done of an unbounded total, no ETA", s)
	}
}

// A failure in a trial's timeline shows its error's last line, which
// names the cause (a traceback's first line does not).
func TestTimelineShowsTheErrorsLastLine(t *testing.T) {
	st := state.New("failed")
	st.Status, st.Run, st.NumTrials = state.ExperimentCompleted, 1, 1
	st.Trials["t1"] = &state.Trial{ID: "t1", Name: "t1", DirName: "t1", Status: events.StatusError, NumFailures: 1,
		LastError: "Traceback (most recent call last):\n  File \"train.py\", line 1, in <module>\nModuleNotFoundError: No module named 'tunejet'\n"}
	st.Order = []string{"t1"}
	st.Recount()
	url := serveDashboard(t, storedDashboard(t, st)).URL
	var d dashboard.TrialDetail
	getJSON(t, url+"/api/experiments/failed/trials/t1", &d)
	for _, e := range d.Timeline {
		if e.Kind == "trial.failed" {
			if want := "1 failures, the last: … ModuleNotFoundError: No module named 'tunejet'"; e.Text != want {
				t.Errorf("the failure reads %q, want %q", e.Text, want)
			}
			return
		}
	}
	t.Errorf("no failure in the timeline %+v", d.Timeline)
}

// storedDashboard serves st as written in its experiment_state-*.json,
// from its files alone.
func storedDashboard(t *testing.T, st *state.Experiment) *dashboard.Server {
	t.Helper()
	data, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), st.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "experiment_state-2026-12-03_10-00-00.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := dashboard.NewStorage(t.Context(), dir, dashboard.Config{Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// An experiment whose driver does not answer (none attached) says what it
// waits for in its summary.
func TestSummarySaysWhatTheExperimentWaitsForFromItsDriver(t *testing.T) {
	opts := tunetest.Start(t, tunetest.Config{Trainables: map[string]tune.Trainable{"fn": func(context.Context, map[string]any) error { return nil }}, Slots: 1})
	dash := serveDashboard(t, dashboard.New(dashCtx(t), dashBus(t, opts.URL), dashboard.Config{Log: testLog(t)}))
	tuner, err := tune.NewTuner(func(context.Context, map[string]any) error { return nil }, tune.WithNATS(opts), tune.WithTrainableName("fn"),
		tune.WithSpec(tune.Spec{Name: "undriven", TuneConfig: tune.TuneConfig{NumSamples: 2}, RunConfig: tune.RunConfig{StoragePath: t.TempDir()},
			Driver: &events.DriverSpec{Searcher: "MySearcher"}}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	fit := make(chan error, 1)
	go func() { _, err := tuner.Fit(ctx); fit <- err }()
	t.Cleanup(func() {
		cancel()
		if err := <-fit; err != nil && !errors.Is(err, tune.ErrInterrupted) {
			t.Errorf("fit: %v", err)
		}
	})
	var list experimentList
	bustest.Eventually(t, 20*time.Second, "the summary says the experiment waits for its driver", func() bool {
		list = experimentList{}
		getJSON(t, dash.URL+"/api/experiments", &list)
		return len(list.Experiments) == 1 && list.Experiments[0].Waiting == "waits for its driver: the config of trial 0 from MySearcher"
	})
}
