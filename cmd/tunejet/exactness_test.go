package main_test

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// The crash-at-random-points equivalence test of the tuner, with the whole
// embedded process killed: `tunejet run FILE` on the embedded stack runs an
// experiment uninterrupted and its decisions are read from the store's
// log; then the same experiment (same seed) runs again, and at a few
// seeded random moments its process group gets SIGKILL, its trainables
// are killed as a crash of their host would kill them, and `tunejet
// restore PATH FILE` continues it, itself killed at the next moment.
//
// The trainable (testdata/exactness/train.sh) reports a pure function of
// its config and iteration, checkpointing each; with max_concurrent_trials
// 1, the results of the log come in a fixed order, so each run gets "the
// same later results". A moment is when the trainable has had its k-th
// report accepted (k seeded among the uninterrupted run's reports); the
// kill lands wherever the process is then, a few events later.
//
// "The same" is as in the controller's TestTunerDecidesTheSameAfterACrash:
// the trial.decided events, in log order, equal byte for byte in ordinal,
// trial, maker, action, reason and detail, and the trial.created events in
// index and config, trial ids compared by index. The test takes about a
// minute (more on a loaded machine); -short skips it.
func TestDecisionsSurviveKillingTheProcess(t *testing.T) {
	t.Parallel()
	script := filepath.Join(moduleRoot, "cmd", "tunejet", "testdata", "exactness", "train.sh")
	for _, c := range exactCases {
		t.Run(c.name, func(t *testing.T) {
			h := fnv.New64a()
			_, _ = h.Write([]byte(c.name))
			rng := rand.New(rand.NewPCG(exactSeed, h.Sum64()))
			file := c.file(t, script)
			want := runExact(t, c, file, script, nil)
			if c.stops && !slices.ContainsFunc(want.decisions, func(d string) bool { return strings.Contains(d, `"action":"stop"`) }) {
				t.Fatalf("the uninterrupted run stopped no trial: the test tests little; decisions %v", want.decisions)
			}
			for i := range exactReplays {
				var moments []int
				for len(moments) < min(exactKillsPerReplay, want.reports-1) {
					if k := 1 + rng.IntN(want.reports-1); !slices.Contains(moments, k) {
						moments = append(moments, k)
					}
				}
				slices.Sort(moments)
				t.Run(strconv.Itoa(i), func(t *testing.T) {
					got := runExact(t, c, file, script, moments)
					where := fmt.Sprintf("seed %d, killed after reports %v (log seq then %v)", exactSeed, moments, got.killedAt)
					if len(got.killedAt) == 0 {
						t.Errorf("%s: the run ended before the first kill", where)
					}
					t.Logf("%s: %d decisions, %d trials; %d trials resumed from a checkpoint", where, len(got.decisions), len(got.created), got.resumed)
					if diff := cmp.Diff(want.decisions, got.decisions); diff != "" {
						t.Errorf("%s: the decisions differ from the uninterrupted run's (-uninterrupted +killed):\n%s", where, diff)
					}
					if diff := cmp.Diff(want.created, got.created); diff != "" {
						t.Errorf("%s: the trials created differ from the uninterrupted run's (-uninterrupted +killed):\n%s", where, diff)
					}
				})
			}
		})
	}
}

// With tune_config.reproducible, the GP's suggestions are the same
// whatever the timing (without it they differ here; TPE's constant liar
// hides the difference on so small a run): one trial at a time on one slot, or three at once on three
// slots, where the odd trials are slow and finish after the even ones
// started after them, with the process killed twice and restored.
func TestReproducibleSearchAcrossSlotsAndCrashes(t *testing.T) {
	t.Parallel()
	script := filepath.Join(moduleRoot, "cmd", "tunejet", "testdata", "exactness", "train.sh")
	c := exactCase{name: "reproducible", trials: 8, iters: 2, window: 3, tune: `  search_alg: bayesopt
  search_alg_config: {n_startup_trials: 2}
  reproducible: true
`}
	file := c.file(t, script)
	one := runExact(t, c, file, script, nil)
	c.slots, c.slow = 3, "0.3"
	three := runExact(t, c, file, script, []int{3, 9})
	if len(three.killedAt) == 0 {
		t.Errorf("the run on three slots ended before the first kill")
	}
	if diff := cmp.Diff(one.created, three.created); diff != "" {
		t.Errorf("the trials created differ (-one slot +three slots, killed after reports 3 and 9):\n%s", diff)
	}
}

const (
	// exactSeed seeds the kill moments; a failure names it.
	exactSeed = 12
	// exactReplays is how many times each case runs with kills, and
	// exactKillsPerReplay how many kills each (the last restore runs to
	// the end).
	exactReplays        = 1
	exactKillsPerReplay = 3
)

// exactExperiment is the experiment file: name, script, the objective's
// lines, num_samples, max_concurrent_trials and the tuner's lines.
const exactExperiment = `name: %s
trainable:
  name: exact
  command: ["/bin/sh", %q]
param_space:
  x: {uniform: [-4, 4]}
tune_config:
%s
  num_samples: %d
  max_concurrent_trials: %d
  seed: 2026
%s`

// An exactCase is one tuner setting.
type exactCase struct {
	name   string
	trials int
	iters  int    // the results a trial reports when nothing stops it
	tune   string // tune_config lines
	multi  bool   // optimize loss and size together, not loss alone
	stops  bool   // whether the uninterrupted run must stop a trial
	window int    // max_concurrent_trials; 0 is 1
	slots  int    // the runner's; 0 is 1
	slow   string // the sleep of odd trials before each report (train.sh's SLOW); "" none
}

// file writes the case's experiment file.
func (c exactCase) file(t *testing.T, script string) string {
	t.Helper()
	objective := "  metric: loss\n  mode: min"
	if c.multi {
		objective = "  metric: [loss, size]\n  mode: [min, min]"
	}
	return writeFile(t, t.TempDir(), "experiment.yaml", fmt.Sprintf(exactExperiment, c.name, script, objective, c.trials, max(c.window, 1), c.tune))
}

// The searchers' cases (tpe, bayesopt, and with two metrics tpe's MOTPE
// and nsga2, whose population of 2 makes every trial after the first two
// a child of the generation before) have no scheduler, so no
// trial.decided: their decisions are the searcher's suggestions, the
// trial.created configs.
var exactCases = []exactCase{
	{name: "asha", trials: 6, iters: 4, stops: true, tune: `  scheduler: asha
  scheduler_config: {grace_period: 1, reduction_factor: 2, max_t: 4}
`},
	{name: "tpe", trials: 6, iters: 2, tune: `  search_alg: tpe
  search_alg_config: {n_startup_trials: 2}
`},
	{name: "bayesopt", trials: 6, iters: 2, tune: `  search_alg: bayesopt
  search_alg_config: {n_startup_trials: 2}
`},
	{name: "motpe", trials: 6, iters: 2, multi: true, tune: `  search_alg: tpe
  search_alg_config: {n_startup_trials: 2}
`},
	{name: "nsga2", trials: 6, iters: 2, multi: true, tune: `  search_alg: nsga2
  search_alg_config: {population_size: 2}
`},
}

// exactOutcome is what a run decided, in canonical JSON, trial ids by
// index.
type exactOutcome struct {
	decisions []string
	created   []string
	reports   int      // the trainable's accepted reports
	killedAt  []uint64 // the log's last sequence at each kill
	resumed   int      // trials resumed from a checkpoint after a restore
}

// runExact runs the experiment to its end on the embedded stack, killed
// after each of the moments' numbers of reports, and restored.
func runExact(t *testing.T, c exactCase, file, script string, moments []int) exactOutcome {
	t.Helper()
	store, storage, marks := t.TempDir(), t.TempDir(), t.TempDir()
	t.Cleanup(func() { killTrainablesOf(t, marks, script) })
	env := embeddedEnv(t, "MARK_DIR="+marks, "ITERS="+strconv.Itoa(c.iters), "SLOW="+c.slow)
	expDir := filepath.Join(storage, c.name)
	var out exactOutcome
	slots := strconv.Itoa(max(c.slots, 1))
	p := startGroup(t, env, "run", file, "--store-dir", store, "--storage-path", storage, "--slots", slots)
	for _, k := range moments {
		if !waitReports(t, p, marks, k) {
			break // it completed first
		}
		p.killGroup()
		killTrainablesOf(t, marks, script)
		evs := storeLog(t, store, c.name)
		out.killedAt = append(out.killedAt, evs[len(evs)-1].Seq)
		p = startGroup(t, env, "restore", expDir, file, "--store-dir", store, "--slots", slots)
	}
	r := p.wait(t)
	evs := storeLog(t, store, c.name)
	if want := fmt.Sprintf("Experiment finished: %d trials", c.trials); r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Fatalf("%s: want exit 0 and %q:\n%s\nthe log:\n%s", p.name, want, r, timeline(evs))
	}
	out.reports = reportsMarked(t, marks)
	out.decisions, out.created = exactDecisions(t, evs)
	for _, ev := range evs {
		if s, ok := ev.Data.(*events.TrialStarted); ok && s.RestoredFrom != "" {
			out.resumed++
		}
	}
	return out
}

// exactDecisions reads a log's decisions and created trials.
func exactDecisions(t *testing.T, evs []*events.Event) (decisions, created []string) {
	t.Helper()
	prefix := ""
	for _, ev := range evs {
		if s, ok := ev.Data.(*events.ExperimentStarted); ok {
			prefix = s.TrialIDPrefix + "_"
		}
	}
	canonical := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(string(b), prefix, "trial_")
	}
	type decision struct {
		Ordinal int            `json:"ordinal"`
		Trial   string         `json:"trial"`
		By      string         `json:"by"`
		Action  string         `json:"action"`
		Reason  string         `json:"reason"`
		Detail  map[string]any `json:"detail"`
	}
	type trial struct {
		Index  int            `json:"index"`
		Config map[string]any `json:"config"`
	}
	for _, ev := range evs {
		switch d := ev.Data.(type) {
		case *events.TrialDecided:
			decisions = append(decisions, canonical(decision{d.Ordinal, d.TrialID, d.By, d.Action, d.Reason, d.Detail}))
		case *events.TrialCreated:
			created = append(created, canonical(trial{d.Index, d.Config}))
		}
	}
	return decisions, created
}

// waitReports waits until the trainable has had k reports accepted; false
// if p exits first.
func waitReports(t *testing.T, p *proc, marks string, k int) bool {
	t.Helper()
	reached := false
	bustest.Eventually(t, processTimeout, fmt.Sprintf("%d reports", k), func() bool {
		reached = reportsMarked(t, marks) >= k
		return reached || p.exited()
	})
	return reached && !p.exited()
}

// reportsMarked counts the reports the trainable recorded.
func reportsMarked(t *testing.T, marks string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(marks, "reports"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// startGroup starts tunejet as startTunejet does, in a process group of
// its own, which killGroup kills.
func startGroup(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startProc(t, "", env, true, args...)
}

// killGroup sends SIGKILL to the process group and waits for the process
// to be reaped.
func (p *proc) killGroup() {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(processTimeout):
	}
}

// tunejet restore --num-samples adds trials to a finished experiment: the
// trials it had stay as they were, the new ones are numbered after them,
// and TPE suggests them from every trial so far; the log records the new
// count. A smaller count is refused, and the experiment is left as it was.
func TestRestoreAddsTrialsToAFinishedExperiment(t *testing.T) {
	t.Parallel()
	script := filepath.Join(moduleRoot, "cmd", "tunejet", "testdata", "exactness", "train.sh")
	c := exactCase{name: "extended", trials: 4, iters: 1, tune: `  search_alg: tpe
  search_alg_config: {n_startup_trials: 2}
`}
	file := c.file(t, script)
	store, storage, marks := t.TempDir(), t.TempDir(), t.TempDir()
	env := embeddedEnv(t, "MARK_DIR="+marks, "ITERS=1")
	expDir := filepath.Join(storage, c.name)
	if r := tunejet(t, "", env, "run", file, "--store-dir", store, "--storage-path", storage, "--slots", "1"); r.code != 0 ||
		!strings.Contains(r.stdout, "Experiment finished: 4 trials") {
		t.Fatalf("tunejet run: want 4 trials:\n%s", r)
	}
	_, before := exactDecisions(t, storeLog(t, store, c.name))

	if r := tunejet(t, "", env, "restore", expDir, "--store-dir", store, "--slots", "1", "--num-samples", "3"); r.code == 0 ||
		!strings.Contains(r.stderr, "num_samples 3 makes 3 trials, and the experiment has created 4") {
		t.Fatalf("tunejet restore --num-samples 3: want a refusal naming the 4 trials created:\n%s", r)
	}
	r := tunejet(t, "", env, "restore", expDir, "--store-dir", store, "--slots", "1", "--num-samples", "7")
	if r.code != 0 || !strings.Contains(r.stdout, "Experiment finished: 7 trials, 7 TERMINATED") {
		t.Fatalf("tunejet restore --num-samples 7: want 7 trials TERMINATED:\n%s", r)
	}
	evs := storeLog(t, store, c.name)
	_, after := exactDecisions(t, evs)
	if len(after) != 7 || !slices.Equal(after[:4], before) {
		t.Fatalf("trials created: %v, want the first run's 4 (%v) and 3 more", after, before)
	}
	var restored *events.ExperimentRestored
	history := map[int]int{} // trial index → TPE's history size at its suggestion (its searcher_seq's trials)
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.ExperimentRestored:
			restored = p
		case *events.TrialCreated:
			if p.Index >= 4 && p.SearcherSeq == 0 {
				t.Errorf("trial %d was not suggested from the log (searcher_seq 0)", p.Index)
			}
			history[p.Index] = int(p.SearcherSeq)
		}
	}
	if restored == nil || restored.NumSamples != 7 {
		t.Errorf("experiment.restored %+v, want num_samples 7", restored)
	}
	if history[4] <= history[3] {
		t.Errorf("trial 4 was suggested from the log up to seq %d, trial 3 up to %d: want a later one", history[4], history[3])
	}
}

// tune_config.warm_start seeds TPE with another experiment's finished
// trials: the new experiment's first trials are suggested from them (not
// drawn at random, as without), the submitted spec in the log holds them,
// and an experiment whose param space differs is refused before anything
// runs, naming the difference.
func TestWarmStartSeedsTPE(t *testing.T) {
	t.Parallel()
	script := filepath.Join(moduleRoot, "cmd", "tunejet", "testdata", "exactness", "train.sh")
	store, storage, marks := t.TempDir(), t.TempDir(), t.TempDir()
	env := embeddedEnv(t, "MARK_DIR="+marks, "ITERS=1")
	run := func(c exactCase) result {
		return tunejet(t, "", env, "run", c.file(t, script), "--store-dir", store, "--storage-path", storage, "--slots", "1")
	}
	tpe := "  search_alg: tpe\n  search_alg_config: {n_startup_trials: 4}\n"
	if r := run(exactCase{name: "first", trials: 6, tune: tpe}); r.code != 0 || !strings.Contains(r.stdout, "Experiment finished: 6 trials, 6 TERMINATED") {
		t.Fatalf("the first experiment:\n%s", r)
	}
	warm := tpe + "  warm_start: " + filepath.Join(storage, "first") + "\n"
	if r := run(exactCase{name: "warm", trials: 2, tune: warm}); r.code != 0 || !strings.Contains(r.stdout, "Experiment finished: 2 trials") {
		t.Fatalf("the warm-started experiment:\n%s", r)
	}
	if r := run(exactCase{name: "cold", trials: 2, tune: tpe}); r.code != 0 {
		t.Fatalf("the experiment without warm start:\n%s", r)
	}
	var warmTrials []events.WarmTrial
	for _, ev := range storeLog(t, store, "warm") {
		if p, ok := ev.Data.(*events.ExperimentSubmitted); ok {
			warmTrials = p.Spec.TuneConfig.WarmStartTrials
		}
	}
	if len(warmTrials) != 6 {
		t.Fatalf("the submitted spec holds %d warm-start trials, want the first experiment's 6: %v", len(warmTrials), warmTrials)
	}
	_, warmCreated := exactDecisions(t, storeLog(t, store, "warm"))
	_, coldCreated := exactDecisions(t, storeLog(t, store, "cold"))
	// Same seed, same index: only what TPE learned from tells them apart.
	if len(warmCreated) != 2 || len(coldCreated) != 2 || warmCreated[0] == coldCreated[0] || warmCreated[1] == coldCreated[1] {
		t.Errorf("warm-started trials %v, without warm start %v: want TPE's suggestions, not the random draws", warmCreated, coldCreated)
	}

	other := strings.Replace(exactExperiment, "x: {uniform: [-4, 4]}", "x: {uniform: [-4, 5]}", 1)
	file := writeFile(t, t.TempDir(), "experiment.yaml", fmt.Sprintf(other, "changed", script, "  metric: loss\n  mode: min", 2, 1, warm))
	r := tunejet(t, "", env, "run", file, "--store-dir", store, "--storage-path", storage, "--slots", "1")
	if want := "param_space.x is uniform [-4, 5] here and uniform [-4, 4] there"; r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Fatalf("a warm start from a different space: want a refusal saying %q:\n%s", want, r)
	}
}
