package main_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// nestedConfigs grids over config values that are a mapping and a list,
// as a Python driver's configs often hold; the mapping has characters
// that JSON encoders escape for HTML by default.
const nestedConfigs = `name: nested_configs
trainable:
  name: nested
  command: ["/bin/sh", "-c", "\"$TUNEJET_BIN\" report loss=1"]
param_space:
  opt: {grid_search: [{name: "a<b&c", ref: py_put_0}, [1, [2, null]]]}
tune_config:
  metric: loss
  mode: min
`

// TestConfigValuesReadAsJSON: a config value that is a mapping or a list
// reads as compact JSON with its keys sorted, never as Go prints it
// (map[...], <nil>), in the status table, tunejet results, tunejet
// explain and the dashboard's API.
func TestConfigValuesReadAsJSON(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "exp.yaml", nestedConfigs)
	store, storagePath := t.TempDir(), t.TempDir()
	run := tunejet(t, "", embeddedEnv(t), "run", file, "--store-dir", store, "--storage-path", storagePath)
	if run.code != 0 {
		t.Fatalf("tunejet run:\n%s", run)
	}
	const (
		mapping = `{"name":"a<b&c","ref":"py_put_0"}`
		list    = `[1,[2,null]]`
	)
	goFormatting := regexp.MustCompile(`map\[|<nil>|\\u00`)
	check := func(what, text string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s does not show %s:\n%s", what, w, text)
			}
		}
		if m := goFormatting.FindString(text); m != "" {
			t.Errorf("%s shows Go's formatting or escapes (%q):\n%s", what, m, text)
		}
	}
	check("the status table", run.stdout[:strings.Index(run.stdout, "Experiment finished")], mapping, list)

	expDir := filepath.Join(storagePath, "nested_configs")
	results := tunejet(t, "", baseEnv(), "results", expDir)
	if results.code != 0 {
		t.Fatalf("tunejet results:\n%s", results)
	}
	check("tunejet results", results.stdout, `{"opt":`+mapping+`}`, `{"opt":`+list+`}`)

	var mapTrial string
	for _, tr := range resultsJSON(t, expDir).Trials {
		if _, ok := tr.Config["opt"].(map[string]any); ok {
			mapTrial = tr.TrialID
		}
	}
	explain := tunejet(t, "", baseEnv(), "explain", expDir, mapTrial, "--store-dir", store)
	if explain.code != 0 {
		t.Fatalf("tunejet explain:\n%s", explain)
	}
	check("tunejet explain", explain.stdout, `config {"opt":`+mapping+`}`)

	url := startDashboard(t, "--storage", expDir)
	var detail struct {
		Timeline []struct {
			Kind string `json:"kind"`
			Text string `json:"text"`
		} `json:"timeline"`
	}
	getJSON(t, url+"api/experiments/nested_configs/trials/"+mapTrial, &detail)
	if len(detail.Timeline) == 0 || detail.Timeline[0].Kind != "trial.created" {
		t.Fatalf("the trial's timeline %+v does not start with its creation", detail.Timeline)
	}
	check("the dashboard's timeline", detail.Timeline[0].Text, `with config {"opt":`+mapping+`}`)
}

var dashboardURLLine = regexp.MustCompile(`Dashboard: (http://\S+/)`)

// startDashboard runs tunejet dashboard with args on a free loopback port
// until the test ends, and returns its URL.
func startDashboard(t *testing.T, args ...string) string {
	t.Helper()
	p := startTunejet(t, "", baseEnv(), append([]string{"dashboard", "--addr", "127.0.0.1:0"}, args...)...)
	var url string
	bustest.Eventually(t, 20*time.Second, "the dashboard's URL", func() bool {
		if p.exited() {
			t.Fatalf("tunejet dashboard exited:\n%s\n%s", p.stdout, p.stderr)
		}
		if m := dashboardURLLine.FindStringSubmatch(p.stderr.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	return url
}

// getJSON decodes the JSON answer of a GET of url into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// allFailing's two trials fail at once, as a Python trainable does on a
// runner without the SDK: the cause is the last line of their stderr.
const allFailing = `name: all_failing
trainable:
  name: fails
  command:
    - /bin/sh
    - -c
    - |
      echo "Traceback (most recent call last):" >&2
      echo "ModuleNotFoundError: No module named 'tunejet'" >&2
      exit 3
param_space:
  x: {grid_search: [1, 2]}
tune_config:
  metric: loss
  mode: min
`

const lastErrorLine = "ModuleNotFoundError: No module named 'tunejet'"

// TestRunSummaryShowsErroredTrials: a run whose trials all failed ends,
// as Ray's, with the number of errored trials and a table of them (name,
// failures, error file), each with its error's last line, before "No best
// trial"; tunejet results shows the same, and 0 iterations for trials
// that never reported. The run still exits 0. The wording is Ray's
// (ray-project/ray python/ray/tune/progress_reporter.py, trial_errors_str,
// at commit 032e6c2824d4cc3b275b5d4498c5d44db5badaeb).
func TestRunSummaryShowsErroredTrials(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "exp.yaml", allFailing)
	run, storagePath := embeddedRun(t, file)
	if run.code != 0 {
		t.Fatalf("want exit status 0 for a completed experiment without --fail-on-error, got:\n%s", run)
	}
	expDir := filepath.Join(storagePath, "all_failing")
	trials := resultsJSON(t, expDir).Trials
	if len(trials) != 2 {
		t.Fatalf("%d trials, want 2", len(trials))
	}
	checkErrorTable := func(what, out string) {
		t.Helper()
		summary := out[max(strings.Index(out, "Experiment finished"), 0):]
		table, noBest := strings.Index(summary, "Number of errored trials: 2\n"), strings.Index(summary, "No best trial")
		if table < 0 || noBest < table {
			t.Fatalf("%s does not say the number of errored trials before No best trial:\n%s", what, out)
		}
		header := lineWith(summary, "# failures")
		for _, col := range []string{"Trial name", "# failures", "error file", "last error line"} {
			if !strings.Contains(header, col) {
				t.Errorf("%s: the errored trials' header %q lacks %q", what, header, col)
			}
		}
		for _, tr := range trials {
			errFile := filepath.Join(tr.Path, "error.txt")
			line := lineWith(summary[table:], tr.TrialName)
			if fields := strings.Fields(line); len(fields) < 3 || fields[1] != "1" || fields[2] != errFile || !strings.HasSuffix(line, lastErrorLine) {
				t.Errorf("%s: trial %s's line %q; want its 1 failure, %s and %q", what, tr.TrialName, line, errFile, lastErrorLine)
			}
			if _, err := os.Stat(errFile); err != nil {
				t.Errorf("%s names %s: %v", what, errFile, err)
			}
		}
	}
	checkErrorTable("tunejet run", run.stdout)

	results := tunejet(t, "", baseEnv(), "results", expDir)
	if results.code != 0 {
		t.Fatalf("tunejet results:\n%s", results)
	}
	checkErrorTable("tunejet results", results.stdout)
	for _, tr := range trials {
		if fields := strings.Fields(lineWith(results.stdout, tr.TrialName)); len(fields) < 3 || fields[1] != "ERROR" || fields[2] != "0" {
			t.Errorf("tunejet results shows trial %s as %q; want ERROR at iteration 0", tr.TrialName, fields)
		}
	}
	if strings.Contains(results.stdout, "<nil>") {
		t.Errorf("tunejet results shows <nil>:\n%s", results.stdout)
	}
}

// TestRunFailOnError: with --fail-on-error, a run with an errored trial
// exits 3 after its summary; one without exits 0, as without the flag.
func TestRunFailOnError(t *testing.T) {
	t.Parallel()
	failing := writeFile(t, t.TempDir(), "exp.yaml", allFailing)
	r, _ := embeddedRun(t, failing, "--fail-on-error")
	if r.code != 3 {
		t.Fatalf("want exit status 3 with --fail-on-error and errored trials, got:\n%s", r)
	}
	if !strings.Contains(r.stdout, "Number of errored trials: 2") || !strings.Contains(r.stderr, "2 trials ended ERROR") {
		t.Errorf("want the summary on stdout and the reason for the exit status on stderr:\n%s", r)
	}
	passing := writeFile(t, t.TempDir(), "exp.yaml", nestedConfigs)
	if r, _ := embeddedRun(t, passing, "--fail-on-error"); r.code != 0 {
		t.Errorf("want exit status 0 with --fail-on-error and no errored trial, got:\n%s", r)
	}
	help := tunejet(t, "", baseEnv(), "run", "--help")
	if !strings.Contains(help.stdout, "--fail-on-error") || !strings.Contains(help.stdout, "exit status 3 with --fail-on-error") {
		t.Errorf("tunejet run --help does not document --fail-on-error and its exit status:\n%s", help)
	}
}

// TestRunAnnouncesALargeGrid: a run of 10,000 trials or more says how many
// on stderr, in one line, before it starts; a small one says nothing.
func TestRunAnnouncesALargeGrid(t *testing.T) {
	t.Parallel()
	values := make([]string, 100)
	for i := range values {
		values[i] = strconv.Itoa(i)
	}
	grid := "{grid_search: [" + strings.Join(values, ", ") + "]}"
	file := writeFile(t, t.TempDir(), "exp.yaml", `name: large_grid
trainable:
  command: ["/bin/sh", "-c", "exit 0"]
param_space: {a: `+grid+`, b: `+grid+`}
tune_config: {num_samples: 2}
`)
	p := startTunejet(t, "", embeddedEnv(t), "run", file, "--verbose", "0", "--store-dir", t.TempDir(), "--storage-path", t.TempDir())
	const notice = "tunejet: experiment large_grid creates 20000 trials (a grid of 10000 points × num_samples 2)\n"
	bustest.Eventually(t, time.Minute, "the notice of the grid's size", func() bool {
		if p.exited() {
			t.Fatalf("tunejet run exited:\n%s\n%s", p.stdout, p.stderr)
		}
		return strings.Contains(p.stderr.String(), notice)
	})
	p.kill() // its 20000 trials are not the test's
	if n := strings.Count(p.stderr.String(), "creates 20000 trials"); n != 1 {
		t.Errorf("the notice is printed %d times, want once:\n%s", n, p.stderr)
	}

	small := writeFile(t, t.TempDir(), "exp.yaml", nestedConfigs)
	if r, _ := embeddedRun(t, small); r.code != 0 || strings.Contains(r.stderr, "creates") {
		t.Errorf("a run of 2 trials: want exit status 0 and no notice of its size:\n%s", r)
	}
}
