package main_test

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tunejet/tunejet/events"
)

// pbtExampleLoss is examples/pbt/train.py's loss after its 30 iterations
// of 10 steps at a fixed lr: what a trial of the example reaches without
// PBT.
func pbtExampleLoss(lr float64) float64 {
	const noise, steps = 0.01, 300
	loss := 1.0
	for range steps {
		loss = (1-lr)*(1-lr)*loss + lr*lr*noise
	}
	return loss
}

// medianOf is the median of xs: the mean of the middle two of an even
// count.
func medianOf(xs []float64) float64 {
	ys := slices.Sorted(slices.Values(xs))
	n := len(ys)
	return (ys[(n-1)/2] + ys[n/2]) / 2
}

// restartsElsewhere counts, in a trial's result.json, the attempts whose
// first kept result does not follow the trial's previous result: the
// attempt started (training_iteration - iterations_since_restore) at
// another iteration than the last one reported. A resume after a pause
// starts from the trial's latest checkpoint, so only exploits may do so.
// train.py reports its attempt.
func restartsElsewhere(t *testing.T, path string) int {
	t.Helper()
	n := 0
	rows := resultLines(t, path)
	for i := 1; i < len(rows); i++ {
		prev, row := rows[i-1], rows[i]
		if row["attempt"] == prev["attempt"] {
			continue
		}
		it, _ := row["training_iteration"].(float64)
		since, _ := row["iterations_since_restore"].(float64)
		if last, _ := prev["training_iteration"].(float64); it-since != last {
			n++
		}
	}
	return n
}

// TestPBTExample runs examples/pbt as its README says, on the embedded
// stack, with short iterations: every trial ends TERMINATED at iteration
// 30; PBT paused trials to let waiting ones run (8 trials, 4 at a time)
// and had trials exploit others; a paused trial resumed where it was; and
// the population ended better than it started: the median of the trials' final losses is below the median of
// the losses their initial learning rates reach alone (without PBT).
//
// The median is the claim that holds whatever order the results come in.
// internal/sched's TestPBTExampleOrders runs this experiment on sched.PBT
// 600 times per seed, with the trials' iterations interleaved at random or
// in bursts, 2 or 4 at a time. On this seed's initial configs the median
// and the best trial both ended below every time; on seeds 1 to 5 the
// median did in all 3,000 runs (at 0.65 times at most), the best trial
// below the best initial lr alone in only 87% of them. The best is logged
// here, not checked: when restarts are slow next to iterations (a loaded
// machine), a trial may run its 30 iterations before the others start,
// and end as it would alone.
func TestPBTExample(t *testing.T) {
	t.Parallel()
	storagePath, store := t.TempDir(), t.TempDir()
	r := tunejet(t, moduleRoot, embeddedEnv(t, "ITERATION_SECONDS=0.01"), "run", "examples/pbt/experiment.yaml",
		"--storage-path", storagePath, "--store-dir", store, "--name", "pbt_example")
	if r.code != 0 {
		t.Fatalf("tunejet run examples/pbt/experiment.yaml:\n%s", r)
	}
	expDir := filepath.Join(storagePath, "pbt_example")
	got := resultsJSON(t, expDir)
	if len(got.Trials) != 8 {
		t.Fatalf("%d trials, want 8", len(got.Trials))
	}
	best, bestTrial := math.Inf(1), ""
	var finals, alone []float64
	for _, tr := range got.Trials {
		if tr.Status != events.StatusTerminated {
			t.Errorf("trial %s ended %s, want TERMINATED; error: %s", tr.TrialName, tr.Status, tr.Error)
			continue
		}
		if tr.Metrics["training_iteration"] != 30.0 {
			t.Errorf("trial %s ended at training_iteration %v, want 30", tr.TrialName, tr.Metrics["training_iteration"])
		}
		loss, _ := tr.Metrics["loss"].(float64)
		finals = append(finals, loss)
		if loss < best {
			best, bestTrial = loss, tr.TrialName
		}
	}
	exploits, pauses := 0, 0
	for _, tr := range got.Trials {
		r := tunejet(t, "", baseEnv(), "explain", expDir, tr.TrialID, "--store-dir", store, "--json")
		if r.code != 0 {
			t.Fatalf("tunejet explain --json %s:\n%s", tr.TrialID, r)
		}
		var x struct {
			Config    map[string]any        `json:"config"`
			Decisions []events.TrialDecided `json:"decisions"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &x); err != nil {
			t.Fatalf("tunejet explain --json %s: %v\n%s", tr.TrialID, err, r.stdout)
		}
		lr, ok := x.Config["lr"].(float64)
		if !ok {
			t.Fatalf("trial %s was created with config %v, want a number lr", tr.TrialID, x.Config)
		}
		alone = append(alone, pbtExampleLoss(lr))
		own := 0
		for _, d := range x.Decisions {
			switch d.Action {
			case "exploit":
				own++
			case "pause":
				pauses++
			}
		}
		exploits += own
		if n := restartsElsewhere(t, filepath.Join(tr.Path, "result.json")); n > own {
			t.Errorf("trial %s: %d attempts did not start from the trial's last iteration, but it exploited only %d times: "+
				"a resume after a pause went back to an older checkpoint", tr.TrialName, n, own)
		}
	}
	t.Logf("%d exploits, %d pauses; median final loss %.3g, median initial lr alone %.3g; best trial %s ends at %.3g, the best initial lr alone at %.3g",
		exploits, pauses, medianOf(finals), medianOf(alone), bestTrial, best, slices.Min(alone))
	if exploits == 0 {
		t.Error("no trial exploited another")
	}
	if pauses == 0 {
		t.Error("no trial was paused to let a waiting one run")
	}
	if len(finals) == len(alone) && !(medianOf(finals) < medianOf(alone)) {
		t.Errorf("median final loss %.3g is not below %.3g, the median of the initial lrs' losses alone", medianOf(finals), medianOf(alone))
	}
}
