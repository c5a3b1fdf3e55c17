package dashboard_test

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/dashboard"
	"github.com/tunejet/tunejet/tune"
)

// viewsExp is an experiment published straight to the log: viewsTrials
// finished trials of one iteration each, lr log-uniform (one value per
// trial, evenly spaced in log space), opt a choice of three and width
// uniform; two metrics, loss (min) planted to depend on lr alone and acc
// (max) at odds with it.
type viewsExp struct {
	name string
	lr   []float64
	loss []float64
	acc  []float64
	opt  []string
	url  string
}

const viewsTrials = 40

func (v *viewsExp) id(i int) string { return fmt.Sprintf("0f1e2_%05d", i) }

func startViews(t *testing.T) *viewsExp {
	t.Helper()
	v := &viewsExp{name: "views"}
	tuner, err := tune.NewTuner("views", tune.WithName(v.name),
		tune.WithParamSpace(tune.ParamSpace{"lr": tune.LogUniform(1e-4, 1e-1), "opt": tune.Choice("adam", "sgd", "rmsprop"), "width": tune.Uniform(16, 64)}),
		tune.WithTuneConfig(tune.TuneConfig{Metrics: []string{"loss", "acc"}, Modes: []string{"min", "max"}, NumSamples: viewsTrials}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := tuner.Spec()
	if err != nil {
		t.Fatal(err)
	}
	srv := bustest.Start(t)
	bs := srv.Bus("views/publisher")
	publish := func(w events.Writer, p events.Payload) {
		if _, err := bs.Publish(t.Context(), events.New(v.name, w, "views/"+string(w), p)); err != nil {
			t.Fatal(err)
		}
	}
	publish(events.WriterClient, &events.ExperimentSubmitted{Spec: spec})
	publish(events.WriterController, &events.ExperimentStarted{Run: 1, Session: "2026-12-02_00-00-00", Seed: 1, TrialIDPrefix: "0f1e2", NumTrials: viewsTrials, StoragePath: spec.RunConfig.StoragePath})
	opts := []string{"adam", "sgd", "rmsprop"}
	for i := range viewsTrials {
		lr := math.Pow(10, -4+3*float64(i)/(viewsTrials-1))
		d := math.Log10(lr) + 2.5
		loss := d*d + 0.001*float64(i%5)
		acc := 0.9 - 0.1*math.Abs(math.Log10(lr)+2) + 0.05*float64((i*13)%7)/7
		v.lr, v.loss, v.acc, v.opt = append(v.lr, lr), append(v.loss, loss), append(v.acc, acc), append(v.opt, opts[i%3])
		config := map[string]any{"lr": lr, "opt": opts[i%3], "width": 16 + float64((i*7)%48)}
		id, dir := v.id(i), "trial_"+v.id(i)
		publish(events.WriterController, &events.TrialCreated{TrialID: id, Index: i, TrialName: "views_" + strconv.Itoa(i), ExperimentTag: strconv.Itoa(i), DirName: dir, Config: config})
		publish(events.WriterController, &events.TrialScheduled{TrialID: id, TrialName: "views_" + strconv.Itoa(i), DirName: dir, Config: config, Trainable: spec.Trainable, HeartbeatTimeoutS: 30})
		publish(events.WriterRunner, &events.TrialStarted{TrialID: id, Attempt: 1, Runner: "runner-1", Hostname: "views", PID: 4242})
		publish(events.WriterRunner, &events.TrialReported{TrialID: id, Attempt: 1, Result: map[string]any{"loss": loss, "acc": acc, "training_iteration": 1, "time_total_s": 0.5}})
		publish(events.WriterRunner, &events.TrialCompleted{TrialID: id, Attempt: 1, Status: events.StatusTerminated, Reason: "finished"})
	}
	v.url = serveDashboard(t, dashboard.New(dashCtx(t), dashBus(t, srv.URL()), dashboard.Config{Log: testLog(t)})).URL
	return v
}

// TestExperimentJSONCarriesScalesAndObjectives: the update says how to
// draw each key of the param space and, for several metrics, each
// trial's values of them.
func TestExperimentJSONCarriesScalesAndObjectives(t *testing.T) {
	v := startViews(t)
	var u experimentJSON
	bustest.Eventually(t, 20*time.Second, "every trial", func() bool {
		getJSON(t, v.url+"/api/experiments/"+v.name, &u)
		return len(u.Trials) == viewsTrials
	})
	if want := map[string]string{"lr": "log", "opt": "category", "width": "linear"}; !maps.Equal(u.Experiment.Params, want) {
		t.Errorf("params %v, want %v", u.Experiment.Params, want)
	}
	if want := []dashboard.Objective{{Metric: "loss", Mode: "min"}, {Metric: "acc", Mode: "max"}}; !slices.Equal(u.Experiment.Objectives, want) {
		t.Errorf("objectives %v, want %v", u.Experiment.Objectives, want)
	}
	if u.Experiment.Metric != "loss" || u.Experiment.Mode != "min" {
		t.Errorf("metric %q mode %q, want the first of the metrics: loss, min", u.Experiment.Metric, u.Experiment.Mode)
	}
	for _, r := range u.Trials {
		var i int
		if _, err := fmt.Sscanf(r.ID, "0f1e2_%d", &i); err != nil {
			t.Fatal(err)
		}
		if r.Values["loss"] != v.loss[i] || r.Values["acc"] != v.acc[i] || r.LastResultTime == nil {
			t.Errorf("trial %s: values %v, last result at %v; want loss %v, acc %v", r.ID, r.Values, r.LastResultTime, v.loss[i], v.acc[i])
		}
	}
}
