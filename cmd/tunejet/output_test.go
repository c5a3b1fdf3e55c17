package main_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
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
