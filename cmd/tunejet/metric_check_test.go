package main_test

import (
	"strings"
	"testing"
)

// rayMissingMetric is the start of Ray's strict metric check error, word
// for word: TuneController._validate_result_metrics in
// ray-project/ray python/ray/tune/execution/tune_controller.py at
// bde9c15a44ce3b309504e2bce936c9e3ae4b18ed.
const rayMissingMetric = "Trial returned a result which did not include the specified metric(s) `loss` that `tune.TuneConfig()` expects. " +
	"Make sure your calls to `tune.report()` include the metric, or set the TUNE_DISABLE_STRICT_METRIC_CHECKING environment variable to 1. Result: "

// reportsAcc reports acc while the experiment's metric is loss; each trial
// then sleeps for as long as its config says.
const reportsAcc = `name: reports_acc
trainable:
  name: acc
  command:
    - /bin/sh
    - -c
    - |
      "$TUNEJET_BIN" report acc=0.5
      "$TUNEJET_BIN" report acc=0.75
      exec sleep "$(printf '%s' "$TUNEJET_CONFIG" | sed 's/.*"sleep":\([0-9]*\).*/\1/')"
param_space:
  x: {grid_search: [1, 2]}
  sleep: SLEEP
tune_config:
  metric: loss
  mode: min
`

// A trainable that never reports the experiment's metric fails the
// experiment at its first result, with Ray's message, instead of running
// to the end and only then finding no best trial.
func TestRunFailsAtFirstResultWithoutTheMetric(t *testing.T) {
	t.Parallel()
	// The trials would sleep for an hour: only the check ends them.
	file := writeFile(t, t.TempDir(), "exp.yaml", strings.Replace(reportsAcc, "SLEEP", "3600", 1))
	r := tunejet(t, "", embeddedEnv(t, "TUNE_DISABLE_STRICT_METRIC_CHECKING=0"),
		"run", file, "--store-dir", t.TempDir(), "--storage-path", t.TempDir())
	if r.code != 1 {
		t.Fatalf("want exit status 1 for a metric no trial reports, got:\n%s", r)
	}
	if !strings.Contains(r.stderr, rayMissingMetric) || !strings.Contains(r.stderr, `"acc":0.5`) {
		t.Fatalf("stderr does not carry Ray's message with the result:\n%s", r)
	}
	if strings.Contains(r.stdout, "No best trial") {
		t.Errorf("the run went on to its summary:\n%s", r)
	}
}

// TUNE_DISABLE_STRICT_METRIC_CHECKING=1, as in Ray, lets such an
// experiment run to its end.
func TestRunWithoutStrictMetricCheckingRunsToTheEnd(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "exp.yaml", strings.Replace(reportsAcc, "SLEEP", "0", 1))
	storagePath := t.TempDir()
	r := tunejet(t, "", embeddedEnv(t, "TUNE_DISABLE_STRICT_METRIC_CHECKING=1"),
		"run", file, "--store-dir", t.TempDir(), "--storage-path", storagePath)
	if r.code != 0 {
		t.Fatalf("want exit status 0 with strict metric checking off, got:\n%s", r)
	}
	if !strings.Contains(r.stdout, "2 TERMINATED") || !strings.Contains(r.stdout, "No best trial") {
		t.Errorf("want both trials to end and no best trial:\n%s", r)
	}
	for _, tr := range resultsJSON(t, storagePath+"/reports_acc").Trials {
		if tr.Status != "TERMINATED" || tr.Metrics["acc"] != 0.75 {
			t.Errorf("trial %s: status %s, metrics %v; want TERMINATED with acc 0.75", tr.TrialID, tr.Status, tr.Metrics)
		}
	}
}

// A value that is not a number JSON can carry is refused by `tunejet
// report`: Infinity is not stored as the string "Infinity".
func TestReportRefusesNonFiniteNumbers(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"Infinity", "-Infinity", "NaN", "inf", "nan"} {
		r := tunejet(t, "", baseEnv("TUNEJET_SOCKET=/nonexistent"), "report", "loss="+v)
		if r.code == 0 || !strings.Contains(r.stderr, `"loss=`+v+`"`) || !strings.Contains(r.stderr, "null") {
			t.Errorf("tunejet report loss=%s: want a refusal that names the argument and null:\n%s", v, r)
		}
	}
}

// A metric reported as a string is stored as that string and never
// compared as a number: "0x0" (which Go and Python would parse as 0) does
// not beat a trial's 2.
func TestStringMetricIsNeverCompared(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "exp.yaml", `name: string_metric
trainable:
  name: s
  command:
    - /bin/sh
    - -c
    - |
      case "$TUNEJET_CONFIG" in
      *'"x":1'*) "$TUNEJET_BIN" report loss=0x0 ;;
      *) "$TUNEJET_BIN" report loss=2 ;;
      esac
param_space:
  x: {grid_search: [1, 2]}
tune_config:
  metric: loss
  mode: min
`)
	r, storagePath := embeddedRun(t, file)
	if r.code != 0 {
		t.Fatalf("want exit status 0, got:\n%s", r)
	}
	got := resultsJSON(t, storagePath+"/string_metric")
	for _, tr := range got.Trials {
		want := map[float64]any{1: "0x0", 2: 2.0}[tr.Config["x"].(float64)]
		if tr.Metrics["loss"] != want {
			t.Errorf("trial x=%v: loss %#v, want %#v", tr.Config["x"], tr.Metrics["loss"], want)
		}
		if tr.Config["x"] == 2.0 && got.Best != tr.TrialID {
			t.Errorf("best trial %s, want x=2's %s", got.Best, tr.TrialID)
		}
	}
}

// A switch that is not an integer is refused before anything runs (Ray
// would fail at the first result, reading it with int()).
func TestRunRefusesAStrictMetricSwitchThatIsNotAnInteger(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "exp.yaml", strings.Replace(reportsAcc, "SLEEP", "0", 1))
	r := tunejet(t, "", embeddedEnv(t, "TUNE_DISABLE_STRICT_METRIC_CHECKING=yes"),
		"run", file, "--store-dir", t.TempDir(), "--storage-path", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, `TUNE_DISABLE_STRICT_METRIC_CHECKING="yes": want an integer`) || strings.Contains(r.stdout, "Status") {
		t.Fatalf("want the switch refused before the run, got:\n%s", r)
	}
}
