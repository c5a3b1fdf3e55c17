package tune_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/tune"
)

// resumable reports loss = x / i with a checkpoint holding i and x at
// every iteration, going on from the checkpoint it resumes from, until it
// is stopped (or paused). Each result says which iteration and x the
// attempt resumed from (from_i, from_x).
func resumable(ctx context.Context, config map[string]any) error {
	x, _ := config["x"].(float64)
	var from struct{ I, X float64 }
	if dir, err := tune.GetCheckpoint(ctx); err != nil {
		return err
	} else if dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, "state.json"))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &from); err != nil {
			return err
		}
	}
	for i := from.I + 1; ; i++ {
		dir, err := os.MkdirTemp("", "ckpt")
		if err != nil {
			return err
		}
		b, _ := json.Marshal(map[string]float64{"I": i, "X": x})
		if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o644); err != nil {
			return err
		}
		err = tune.Report(ctx, map[string]any{"loss": x / i, "from_i": from.I, "from_x": from.X}, tune.WithCheckpoint(dir))
		_ = os.RemoveAll(dir)
		if errors.Is(err, tune.ErrStopped) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// resultIterations reads the training_iteration of each row of a trial's
// result.json.
func resultIterations(t *testing.T, r tune.Result) []int {
	t.Helper()
	var out []int
	for _, line := range readLines(t, filepath.Join(r.Path, "result.json")) {
		var row struct {
			Iteration int `json:"training_iteration"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("%s: result.json: %v", r.TrialID, err)
		}
		out = append(out, row.Iteration)
	}
	return out
}

// consecutive checks that a trial's result.json holds iterations 1..N,
// each once and in order, and returns N.
func consecutive(t *testing.T, r tune.Result) int {
	t.Helper()
	its := resultIterations(t, r)
	for i, it := range its {
		if it != i+1 {
			t.Errorf("trial x=%v: result.json iterations %v, want 1..%d each once, in order", r.Config["x"], its, len(its))
			break
		}
	}
	return len(its)
}

// pauses checks that the log holds trial.paused events, that some paused
// trial ran again, and that every attempt started after a pause resumed
// from a checkpoint.
func pauses(t *testing.T, evs []*events.Event) {
	t.Helper()
	paused := map[string]bool{}
	n, resumed := 0, 0
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.TrialPaused:
			paused[p.TrialID] = true
			n++
		case *events.TrialStarted:
			if paused[p.TrialID] {
				resumed++
				if p.RestoredFrom == "" {
					t.Errorf("trial %s attempt %d started afresh after a pause", p.TrialID, p.Attempt)
				}
			}
			paused[p.TrialID] = false
		}
	}
	if n == 0 || resumed == 0 {
		t.Errorf("%d pauses, %d resumed; want some of each", n, resumed)
	}
}

// HyperBand (max_t 9, reduction factor 3) over 9 trials on 2 slots: the
// first bracket holds all 9, pausing each at milestone 1 until all got
// there, then resuming the best 3 to milestone 3 and the best of those to
// 9. Paused trials free their slots and resume from their checkpoints, so
// every trial's result.json holds each iteration once and in order, and
// every trial ends TERMINATED by the scheduler. (A trial reports on until
// the pause or stop reaches its runner: the scheduler never holds up a
// report, so how far past its milestone a trial got is timing's.)
func TestHyperBandPausesAndResumesTrials(t *testing.T) {
	d := startDeployment(t, 2, map[string]tune.Trainable{"resumable": resumable})
	g := d.fit(t, "resumable", tune.WithName("hb"), tune.WithRunConfig(storage(t)),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)}),
		tune.WithTuneConfig(tune.TuneConfig{
			NumSamples: 1, Metric: "loss", Mode: "min", Scheduler: "hyperband",
			SchedulerConfig: map[string]any{"max_t": 9, "reduction_factor": 3},
		}))
	if g.NumTerminated() != 9 {
		t.Fatalf("%d of 9 trials TERMINATED", g.NumTerminated())
	}
	for _, r := range g.Results() {
		if !strings.HasPrefix(r.EndReason, "scheduler: ") {
			t.Errorf("trial x=%v ended %q, want the scheduler's reason", r.Config["x"], r.EndReason)
		}
		consecutive(t, r)
	}
	evs := d.events(t, "hb")
	pauses(t, evs)
	finished := 0
	for _, ev := range evs {
		if p, ok := ev.Data.(*events.TrialDecided); ok && strings.HasPrefix(p.Reason, "bracket finished") {
			finished++
		}
	}
	if finished == 0 {
		t.Error("no trial was stopped by its bracket finishing at max_t")
	}
}

// The median stopping rule with hard_stop false pauses a trial whose best
// result is worse than the median of the others' while others wait for a
// slot, instead of stopping it: 6 trials on 2 slots all run to the stop
// criterion, the paused ones resuming from their checkpoints.
func TestMedianRulePausesInsteadOfStopping(t *testing.T) {
	d := startDeployment(t, 2, map[string]tune.Trainable{"resumable": resumable})
	rc := storage(t)
	rc.Stop = map[string]float64{"training_iteration": 6}
	g := d.fit(t, "resumable", tune.WithName("median"), tune.WithRunConfig(rc),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1.0, 2.0, 3.0, 4.0, 5.0, 6.0)}),
		tune.WithTuneConfig(tune.TuneConfig{
			NumSamples: 1, Metric: "loss", Mode: "min", Scheduler: "median_stopping_rule",
			SchedulerConfig: map[string]any{"time_attr": "training_iteration", "grace_period": 1, "min_samples_required": 2, "hard_stop": false},
		}))
	if g.NumTerminated() != 6 {
		t.Fatalf("%d of 6 trials TERMINATED", g.NumTerminated())
	}
	for _, r := range g.Results() {
		if n := consecutive(t, r); n < 6 || r.EndReason != "stop_criteria" {
			t.Errorf("trial x=%v ended %q at iteration %d, want stop_criteria at 6 or later", r.Config["x"], r.EndReason, n)
		}
	}
	pauses(t, d.events(t, "median"))
}

// PBT over 4 trials: the lower quantile exploits the upper one. Each
// exploit's work names the donor's checkpoint and the new config; the
// exploiting trial's next attempt starts from that checkpoint (the
// trainable reads the donor's iteration and x from it), goes on from the
// donor's iteration, and runs with the new config.
func TestPBTExploitsTheDonorsCheckpoint(t *testing.T) {
	d := startDeployment(t, 4, map[string]tune.Trainable{"resumable": resumable})
	rc := storage(t)
	rc.Stop = map[string]float64{"training_iteration": 24}
	g := d.fit(t, "resumable", tune.WithName("pbt"), tune.WithRunConfig(rc),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1.0, 2.0, 3.0, 4.0)}),
		tune.WithTuneConfig(tune.TuneConfig{
			NumSamples: 1, Metric: "loss", Mode: "min", Scheduler: "pbt", Seed: ptr(int64(7)),
			SchedulerConfig: map[string]any{
				"time_attr": "training_iteration", "perturbation_interval": 4, "quantile_fraction": 0.25,
				"hyperparam_mutations": map[string]any{"x": []any{1.0, 2.0, 3.0, 4.0}},
			},
		}))
	if g.NumTerminated() != 4 {
		t.Fatalf("%d of 4 trials TERMINATED", g.NumTerminated())
	}
	type exploit struct {
		x    events.Exploit
		conf float64
	}
	pending := map[string]*exploit{}
	checked := 0
	for _, ev := range d.events(t, "pbt") {
		switch p := ev.Data.(type) {
		case *events.TrialScheduled:
			if p.Exploit != nil {
				x, _ := p.Config["x"].(float64)
				pending[p.TrialID] = &exploit{x: *p.Exploit, conf: x}
			}
		case *events.TrialStarted:
			if x := pending[p.TrialID]; x != nil {
				if want := x.x.Source + "/" + x.x.Checkpoint.Name; p.RestoredFrom != want {
					t.Errorf("trial %s resumed from %q after its exploit, want %q", p.TrialID, p.RestoredFrom, want)
				}
			}
		case *events.TrialReported:
			x := pending[p.TrialID]
			if x == nil {
				continue
			}
			delete(pending, p.TrialID)
			r := p.Results()[0]
			want := fmt.Sprint(x.x.Checkpoint.Iteration)
			if got := fmt.Sprint(r["from_i"]); got != want || fmt.Sprint(r["training_iteration"]) != fmt.Sprint(x.x.Checkpoint.Iteration+1) {
				t.Errorf("trial %s after its exploit: from_i %s, training_iteration %v; want from %s, going on from there", p.TrialID, got, r["training_iteration"], want)
			}
			if loss, _ := r["loss"].(float64); loss != x.conf/float64(x.x.Checkpoint.Iteration+1) {
				t.Errorf("trial %s after its exploit: loss %v, want the new config's x %v / %d", p.TrialID, loss, x.conf, x.x.Checkpoint.Iteration+1)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no exploit was carried out")
	}
	t.Logf("%d exploits carried out", checked)
}

func ptr[T any](v T) *T { return &v }
