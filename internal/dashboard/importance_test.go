package dashboard_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"

	"github.com/tunejet/tunejet/internal/dashboard"
	"github.com/tunejet/tunejet/tune"
	"github.com/tunejet/tunejet/tune/tunetest"
)

// runPlanted runs, to its end, an experiment of 40 random trials (20
// samples of a two-value grid) whose loss is 10·x1 + x2: x1 matters, x2
// a little, x3, opt and lr not at all; score, reported too, is x3. The
// trials whose x1 is above 0.9 fail before reporting, so they do not
// count. It returns the experiment's storage path and how many trials
// finished.
func runPlanted(t *testing.T) (expPath string, terminated int) {
	t.Helper()
	train := func(ctx context.Context, config map[string]any) error {
		x1, _ := config["x1"].(float64)
		x2, _ := config["x2"].(float64)
		x3, _ := config["x3"].(float64)
		if x1 > 0.9 {
			return errors.New("x1 is too large")
		}
		err := tune.Report(ctx, map[string]any{"loss": 10*x1 + x2, "score": x3})
		if errors.Is(err, tune.ErrStopped) {
			return nil
		}
		return err
	}
	opts := tunetest.Start(t, tunetest.Config{Trainables: map[string]tune.Trainable{"planted": train}, Slots: 4})
	seed := int64(11)
	tuner, err := tune.NewTuner(train, tune.WithNATS(opts), tune.WithName("planted"), tune.WithTrainableName("planted"),
		tune.WithParamSpace(tune.ParamSpace{
			"x1": tune.Uniform(0, 1), "x2": tune.Uniform(0, 1), "x3": tune.Uniform(0, 1),
			"opt": tune.Choice("sgd", "adam", "rmsprop"), "lr": tune.LogUniform(1e-4, 1e-1),
			"batch": tune.GridSearch(32, 64),
		}),
		tune.WithTuneConfig(tune.TuneConfig{NumSamples: 20, Metric: "loss", Mode: "min", Seed: &seed}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	results, err := tuner.Fit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	terminated = results.Len() - results.NumErrors()
	if results.Len() != 40 || results.NumErrors() == 0 || terminated < 20 {
		t.Fatalf("the experiment ran %d trials, %d errors; want 40 with some errors and 20 or more finished", results.Len(), results.NumErrors())
	}
	return results.ExperimentPath, terminated
}

func TestImportanceRanksThePlantedParameterFirst(t *testing.T) {
	expPath, terminated := runPlanted(t)
	srv, err := dashboard.NewStorage(t.Context(), expPath, dashboard.Config{Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	url := serveDashboard(t, srv).URL + "/api/experiments/planted/importance"

	shares := func(r dashboard.ImportanceReply) map[string]float64 {
		t.Helper()
		out, sum := map[string]float64{}, 0.0
		for _, imp := range r.Importances {
			out[imp.Param] = imp.Importance
			sum += imp.Importance
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("importances %v sum to %v; want 1", r.Importances, sum)
		}
		return out
	}

	var r dashboard.ImportanceReply
	getJSON(t, url, &r)
	if r.Metric != "loss" || r.Mode != "min" || r.Method != "fanova" || r.Trials != terminated {
		t.Errorf("reply %+v; want loss, min, fanova over the %d finished trials", r, terminated)
	}
	got := shares(r)
	if len(r.Importances) != 5 || r.Importances[0].Param != "x1" {
		t.Fatalf("importances %v; want x1 first among x1, x2, x3, opt and lr (the grid's batch left out)", r.Importances)
	}
	for _, p := range []string{"x3", "opt", "lr"} {
		if got[p] > 0.1 {
			t.Errorf("%s, which the loss ignores, has importance %v", p, got[p])
		}
	}

	// Another metric: score is x3.
	getJSON(t, url+"?metric=score", &r)
	if r.Metric != "score" || r.Mode != "" || len(r.Importances) == 0 || r.Importances[0].Param != "x3" {
		t.Errorf("?metric=score: %+v; want x3 first, no mode", r)
	}
	shares(r)

	// A metric no trial reported: no trial counts.
	getJSON(t, url+"?metric=accuracy", &r)
	if r.Trials != 0 || r.Importances == nil || len(r.Importances) != 0 {
		t.Errorf("?metric=accuracy: %+v; want 0 trials and an empty list", r)
	}

	if rep := get(t, http.DefaultClient, serveDashboard(t, srv).URL+"/api/experiments/nothing/importance"); rep.code != http.StatusNotFound {
		t.Errorf("an unknown experiment's importance: %s; want 404", rep.status)
	}
}
