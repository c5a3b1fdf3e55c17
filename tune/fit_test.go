package tune_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/tune"
)

// steps reports loss = x / i for i = 1..n, then returns.
func steps(n int) tune.Trainable {
	return func(ctx context.Context, config map[string]any) error {
		x, _ := config["x"].(float64)
		for i := 1; i <= n; i++ {
			if err := tune.Report(ctx, map[string]any{"loss": x / float64(i), "score": float64(i)}); err != nil {
				return err
			}
		}
		return nil
	}
}

func storage(t testing.TB) tune.RunConfig { return tune.RunConfig{StoragePath: t.TempDir()} }

func TestGridTimesSamples(t *testing.T) {
	d := startDeployment(t, 4, map[string]tune.Trainable{"steps": steps(2)})
	g := d.fit(t, "steps", tune.WithName("grid"), tune.WithRunConfig(storage(t)),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1.0, 2.0, 3.0), "y": tune.GridSearch("a", "b", "c")}),
		tune.WithTuneConfig(tune.TuneConfig{NumSamples: 3}))
	if g.Len() != 27 || g.NumTerminated() != 27 {
		t.Fatalf("got %d trials, %d terminated; want 27, 27", g.Len(), g.NumTerminated())
	}
	counts := map[string]int{}
	for _, r := range g.Results() {
		counts[fmt.Sprint(r.Config["x"], r.Config["y"])]++
	}
	if len(counts) != 9 {
		t.Fatalf("got %d distinct grid points, want 9: %v", len(counts), counts)
	}
	for k, n := range counts {
		if n != 3 {
			t.Errorf("grid point %s ran %d times, want 3", k, n)
		}
	}
}

func TestRandomSearchIsReproducibleWithASeed(t *testing.T) {
	d := startDeployment(t, 4, map[string]tune.Trainable{"steps": steps(1)})
	configs := func(name string, seed int64) []map[string]any {
		g := d.fit(t, "steps", tune.WithName(name), tune.WithRunConfig(storage(t)),
			tune.WithParamSpace(tune.ParamSpace{"x": tune.Uniform(0, 1), "n": tune.RandInt(0, 1000)}),
			tune.WithTuneConfig(tune.TuneConfig{NumSamples: 5, Seed: &seed}))
		var out []map[string]any
		for _, r := range g.Results() {
			out = append(out, r.Config)
		}
		return out
	}
	a, b, c := configs("seed_a", 42), configs("seed_b", 42), configs("seed_c", 43)
	if len(a) != 5 {
		t.Fatalf("got %d trials, want 5", len(a))
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different configs:\n%v\n%v", a, b)
	}
	if reflect.DeepEqual(a, c) {
		t.Fatalf("different seeds gave the same configs: %v", a)
	}
}

func TestMaxConcurrentTrialsIsNeverExceeded(t *testing.T) {
	slow := func(ctx context.Context, config map[string]any) error {
		for i := 0; i < 3; i++ {
			if err := tune.Report(ctx, map[string]any{"i": i}); err != nil {
				return err
			}
			time.Sleep(20 * time.Millisecond) // simulated training work
		}
		return nil
	}
	d := startDeployment(t, 8, map[string]tune.Trainable{"slow": slow})
	d.fit(t, "slow", tune.WithName("concurrency"), tune.WithRunConfig(storage(t)),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.Uniform(0, 1)}),
		tune.WithTuneConfig(tune.TuneConfig{NumSamples: 12, MaxConcurrentTrials: 2}))
	running, peak := map[string]bool{}, 0
	for _, ev := range d.events(t, "concurrency") {
		switch ev.Data.(type) {
		case *events.TrialStarted:
			running[ev.Trial()] = true
		case *events.TrialCompleted, *events.TrialFailed:
			delete(running, ev.Trial())
		}
		peak = max(peak, len(running))
	}
	if peak != 2 {
		t.Fatalf("peak running trials from the log = %d, want exactly 2 (limit 2, 8 slots)", peak)
	}
}

func TestStopCriteriaUseGreaterOrEqual(t *testing.T) {
	d := startDeployment(t, 2, map[string]tune.Trainable{"steps": steps(100)})
	rc := storage(t)
	rc.Stop = map[string]float64{"score": 5}
	g := d.fit(t, "steps", tune.WithName("stop"), tune.WithRunConfig(rc),
		tune.WithParamSpace(tune.ParamSpace{"x": 1.0}))
	r := g.Get(0)
	if r.Status != events.StatusTerminated || r.Metrics["training_iteration"] != 5.0 || r.Metrics["done"] != true {
		t.Fatalf("got status %s, iteration %v, done %v; want TERMINATED at exactly 5 with done=true",
			r.Status, r.Metrics["training_iteration"], r.Metrics["done"])
	}
	rows := readLines(t, filepath.Join(r.Path, "result.json"))
	if len(rows) != 5 {
		t.Fatalf("result.json has %d rows, want 5", len(rows))
	}
}

func TestTimeBudgetStopsTheExperiment(t *testing.T) {
	forever := func(ctx context.Context, config map[string]any) error {
		for {
			if err := tune.Report(ctx, map[string]any{"alive": 1}); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond): // simulated training work
			}
		}
	}
	d := startDeployment(t, 2, map[string]tune.Trainable{"forever": forever})
	g := d.fit(t, "forever", tune.WithName("budget"), tune.WithRunConfig(storage(t)),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.Uniform(0, 1)}),
		tune.WithTuneConfig(tune.TuneConfig{NumSamples: 4, TimeBudgetS: 0.5}))
	if g.NumTerminated() != g.Len() {
		t.Fatalf("%d of %d trials TERMINATED, want all", g.NumTerminated(), g.Len())
	}
	var reason string
	for _, ev := range d.events(t, "budget") {
		if p, ok := ev.Data.(*events.ExperimentCompleted); ok {
			reason = p.Reason
		}
	}
	if reason != "time_budget" {
		t.Fatalf("experiment ended with reason %q, want time_budget", reason)
	}
}

func TestFailingCommandEndsErrorWithStderrTail(t *testing.T) {
	d := startDeployment(t, 2, nil)
	dir := t.TempDir()
	script := filepath.Join(dir, "fail.sh")
	body := "#!/bin/sh\necho first line >&2\necho \"config is $TUNEJET_CONFIG\" >&2\necho 'fatal: out of cheese' >&2\nexit 3\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	g := d.fit(t, tune.Command{script}, tune.WithName("failing"), tune.WithRunConfig(storage(t)),
		tune.WithParamSpace(tune.ParamSpace{"x": 7}))
	r := g.Get(0)
	if r.Status != events.StatusError || g.NumErrors() != 1 {
		t.Fatalf("got status %s, %d errors; want ERROR, 1", r.Status, g.NumErrors())
	}
	errTxt, err := os.ReadFile(filepath.Join(r.Path, "error.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Failure # 1 (occurred at ", "exited with status 3", "fatal: out of cheese", `config is {"x":7}`} {
		if !strings.Contains(string(errTxt), want) {
			t.Errorf("error.txt lacks %q:\n%s", want, errTxt)
		}
	}
}

func TestResultsLayoutAndLoad(t *testing.T) {
	d := startDeployment(t, 2, map[string]tune.Trainable{"steps": steps(3)})
	rc := storage(t)
	g := d.fit(t, "steps", tune.WithName("layout"), tune.WithRunConfig(rc),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1.0, 2.0)}),
		tune.WithTuneConfig(tune.TuneConfig{Metric: "loss", Mode: "min"}))
	root := filepath.Join(rc.StoragePath, "layout")
	for _, f := range []string{".validate_storage_marker"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	states, _ := filepath.Glob(filepath.Join(root, "experiment_state-*.json"))
	if len(states) != 1 {
		t.Fatalf("got %d experiment_state files, want 1", len(states))
	}
	for _, r := range g.Results() {
		var params map[string]any
		b, err := os.ReadFile(filepath.Join(r.Path, "params.json"))
		if err != nil || json.Unmarshal(b, &params) != nil || params["x"] != r.Config["x"] {
			t.Errorf("params.json of %s: %s (%v)", r.TrialID, b, err)
		}
		if rows := readLines(t, filepath.Join(r.Path, "result.json")); len(rows) != 3 {
			t.Errorf("result.json of %s has %d rows, want 3", r.TrialID, len(rows))
		}
		if rows := readLines(t, filepath.Join(r.Path, "progress.csv")); len(rows) != 4 {
			t.Errorf("progress.csv of %s has %d lines, want header + 3", r.TrialID, len(rows))
		}
	}
	loaded, err := tune.LoadResults(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	best, err := loaded.GetBestResult("", "", "last")
	if err != nil {
		t.Fatal(err)
	}
	if best.Config["x"] != 1.0 || best.Metrics["loss"] != 1.0/3 {
		t.Fatalf("best trial: config %v metrics %v; want x=1 with loss 1/3", best.Config, best.Metrics)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestFastReportsAreSentTogether: trials reporting in a tight loop, far
// faster than the log answers a publish, get every result into
// result.json once and in order, in fewer trial.reported events than
// results: what queued while a publish was answered went in one event.
func TestFastReportsAreSentTogether(t *testing.T) {
	const n = 3000
	d := startDeployment(t, 2, map[string]tune.Trainable{"steps": steps(n)})
	g := d.fit(t, "steps", tune.WithName("fast"), tune.WithRunConfig(storage(t)),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1.0, 2.0)}))
	for _, r := range g.Results() {
		rows := readLines(t, filepath.Join(r.Path, "result.json"))
		if len(rows) != n {
			t.Fatalf("result.json of %s has %d rows, want %d", r.TrialID, len(rows), n)
		}
		for i, row := range rows {
			var res map[string]any
			if err := json.Unmarshal([]byte(row), &res); err != nil || res["training_iteration"] != float64(i+1) || res["score"] != float64(i+1) {
				t.Fatalf("result.json of %s line %d: %s (%v); want iteration and score %d", r.TrialID, i+1, row, err, i+1)
			}
		}
	}
	reports, results := 0, 0
	for _, ev := range d.events(t, "fast") {
		if p, ok := ev.Data.(*events.TrialReported); ok {
			reports++
			results += len(p.Results())
		}
	}
	if results != 2*n {
		t.Errorf("the log holds %d results, want %d", results, 2*n)
	}
	if reports >= results {
		t.Errorf("%d trial.reported events for %d results: none were sent together", reports, results)
	}
	t.Logf("%d results in %d trial.reported events", results, reports)
}

// TestReportsFromManyGoroutines: a trainable may call Report from several
// goroutines at once. Every event the runner sends stays valid (results
// in increasing order), so the trial ends TERMINATED, and result.json
// holds increasing iterations ending with the last one.
func TestReportsFromManyGoroutines(t *testing.T) {
	const goroutines, each = 8, 500
	fn := func(ctx context.Context, config map[string]any) error {
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for range goroutines {
			wg.Go(func() {
				for i := 0; i < each; i++ {
					if err := tune.Report(ctx, map[string]any{"loss": 1.0}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	d := startDeployment(t, 1, map[string]tune.Trainable{"many": fn})
	g := d.fit(t, "many", tune.WithName("many"), tune.WithRunConfig(storage(t)))
	r := g.Get(0)
	if r.Error != nil {
		t.Fatalf("trial ended with %v", r.Error)
	}
	rows := readLines(t, filepath.Join(r.Path, "result.json"))
	last := 0
	for i, row := range rows {
		var res map[string]any
		if err := json.Unmarshal([]byte(row), &res); err != nil {
			t.Fatal(err)
		}
		it := int(res["training_iteration"].(float64))
		if it <= last {
			t.Fatalf("result.json line %d: iteration %d after %d", i+1, it, last)
		}
		last = it
	}
	if last != goroutines*each {
		t.Errorf("the last result is iteration %d, want %d", last, goroutines*each)
	}
	t.Logf("%d of %d reports in result.json", len(rows), goroutines*each)
}
