package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/dashboard"
	"github.com/tunejet/tunejet/tune"
)

// browserWait bounds each wait for the page to show something.
const browserWait = 15 * time.Second

// browser starts headless Chromium for t, closed when t ends; when t
// fails, a screenshot of the page is saved under its temp dir (or
// TUNEJET_SCREENSHOT_DIR, which outlives the test).
func browser(t testing.TB) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the browser tests need Chromium on PATH: install it with `apt-get install -y chromium` (%v)", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1200, 900),
	}
	// Chromium now and then exits before it listens when the machine is
	// busy (the benchmarks run beside each other): it gets three tries.
	var ctx context.Context
	for try := 1; ; try++ {
		tryOpts := append(slices.Clip(opts), chromedp.UserDataDir(t.TempDir())) // a fresh profile: a crash may leave its lock
		actx, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()), tryOpts...)
		c, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
		err := chromedp.Do(c)
		if err == nil {
			ctx = c
			t.Cleanup(func() { cancel(); cancelAlloc() })
			break
		}
		cancel()
		cancelAlloc()
		if try == 3 {
			t.Fatalf("start %s (%d tries): %v", path, try, err)
		}
		t.Logf("start %s, try %d: %v; trying again", path, try, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			screenshot(t, ctx)
		}
	})
	return ctx
}

func screenshot(t testing.TB, ctx context.Context) {
	dir := os.Getenv("TUNEJET_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("no screenshot: %v", err)
		return
	}
	file := filepath.Join(dir, filepath.Base(t.Name())+".png")
	err = os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(file, png, 0o644)
	}
	if err != nil {
		t.Logf("no screenshot: %v", err)
		return
	}
	t.Logf("screenshot of the page: %s", file)
}

// waitFor polls the page until the JavaScript expression is true.
func waitFor(t testing.TB, ctx context.Context, what, expr string) {
	t.Helper()
	if err := pollPage(ctx, expr, browserWait); err != nil {
		t.Fatalf("the page never showed %s (%s): %v", what, expr, err)
	}
}

// pollPage polls the page until the JavaScript expression is true, for at
// most within. A poll that loses its page's JavaScript context (the page
// navigated under it: chromedp's "Cannot find context with specified id")
// polls again in the new one.
func pollPage(ctx context.Context, expr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil || !strings.Contains(err.Error(), "Cannot find context with specified id") || time.Now().After(deadline) {
			return err
		}
	}
}

// TestBrowserShowsTrialsAndLiveCurves opens an experiment's page (with a
// token, as off loopback) while its trials run, and watches a trial's
// curve gain a point, without a reload, when the trial reports; then the
// timeline of a trial paused, resumed and restored (runResumed).
func TestBrowserShowsTrialsAndLiveCurves(t *testing.T) {
	const token = "browser-token"
	e := startStepped(t, token)
	ctx := browser(t) // closed, with its screenshot, before the dashboard

	// The trials' ids, from the API.
	ids := map[float64]string{}
	bustest.Eventually(t, 20*time.Second, "the trials appear", func() bool {
		r := get(t, http.DefaultClient, e.dash.URL+"/api/experiments/"+e.name, "Authorization", "Bearer "+token)
		var u experimentJSON
		if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &u) != nil {
			return false
		}
		for _, x := range xs {
			if tr := trialOf(u, x); tr != nil {
				ids[x] = tr.ID
			}
		}
		return len(ids) == len(xs)
	})

	if err := chromedp.Do(ctx, chromedp.Navigate(e.dash.URL+"/experiments/"+e.name+"?token="+token)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "a row per trial", `document.querySelectorAll("#trials-table tbody tr").length === 2`)
	for _, x := range xs {
		waitFor(t, ctx, "each trial's first point",
			`document.querySelector('polyline[data-trial="`+ids[x]+`"]')?.dataset.n === "1"`)
	}
	waitFor(t, ctx, "that it follows the log", `document.getElementById("live").textContent === "live" && !document.getElementById("live").hidden`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`)); err != nil {
		t.Fatal(err)
	}

	e.next(t, xs[0])
	waitFor(t, ctx, "the trial's second point, in the same page",
		`window.notReloaded === true && document.querySelector('polyline[data-trial="`+ids[xs[0]]+`"]')?.dataset.n === "2"`)
	waitFor(t, ctx, "the trial's row at iteration 2",
		`document.querySelector('#trial-`+ids[xs[0]]+` td[data-col="iter"]')?.textContent === "2"`)
	other, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('polyline[data-trial="`+ids[xs[1]]+`"]').dataset.n`))
	if err != nil {
		t.Fatal(err)
	}
	if other != "1" {
		t.Errorf("the other trial's curve has %s points, want 1: it did not report", other)
	}

	// The curves of another axis: a new stream replaces every curve.
	evaluate[chromedp.Void](t, ctx, `(() => { const s = document.getElementById("curve-x"); s.value = "time_total_s"; s.dispatchEvent(new Event("change")); })()`)
	waitFor(t, ctx, "the curves against time_total_s",
		`document.getElementById("curves").dataset.x === "time_total_s" && document.querySelector('polyline[data-trial="`+ids[xs[0]]+`"]')?.dataset.n === "2"`)
	e.next(t, xs[0])
	waitFor(t, ctx, "a third point, live, against time_total_s",
		`document.querySelector('polyline[data-trial="`+ids[xs[0]]+`"]')?.dataset.n === "3"`)

	// A paused, resumed and restored trial's timeline, in the same browser.
	r := runResumed(t)
	navigate(t, ctx, r.dash+"/experiments/"+r.name+"#trial="+r.trial)
	waitFor(t, ctx, "the trial's pause in its timeline", `document.querySelectorAll("#timeline li[data-kind='trial.paused']").length > 0`)
	waitFor(t, ctx, "an attempt restored from its checkpoint",
		`[...document.querySelectorAll("#timeline li[data-kind='trial.started']")].some((li) => li.textContent.includes("restored from checkpoint_"))`)
	waitFor(t, ctx, "the experiment's restore", `document.querySelectorAll("#timeline li[data-kind='experiment.restored']").length === 1`)
}

// evaluate runs JavaScript in the page and returns its value.
func evaluate[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func navigate(t testing.TB, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
}

// typeFilter sets the filter box as a visitor would.
func typeFilter(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	evaluate[chromedp.Void](t, ctx, `(() => { const f = document.getElementById("filter"); f.value = `+jsString(text)+`; f.dispatchEvent(new Event("input")); })()`)
}

func selectStatus(t *testing.T, ctx context.Context, status string) {
	t.Helper()
	evaluate[chromedp.Void](t, ctx, `(() => { const s = document.getElementById("status-filter"); s.value = `+jsString(status)+`; s.dispatchEvent(new Event("change")); })()`)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// shownTrials are the ids of the trials table's rows, sorted.
func shownTrials(t *testing.T, ctx context.Context) []string {
	t.Helper()
	ids := evaluate[[]string](t, ctx, `[...document.querySelectorAll("#trials-table tbody tr")].map((r) => r.dataset.trial)`)
	slices.Sort(ids)
	return ids
}

// trialsWhere are the ids of e's trials that keep says to keep, sorted.
func trialsWhere(e *finished, keep func(r tune.Result) bool) []string {
	var ids []string
	for _, r := range e.results.Results() {
		if keep(r) {
			ids = append(ids, r.TrialID)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestBrowserStoragePathShowsTheResults opens the page of a storage path
// alone: every trial's final numbers are those tunejet results reads, the
// parallel-coordinates plot has a line per finished trial, filters show
// exactly the right rows, and a failed trial shows its error.txt and its
// checkpoints to download.
func TestBrowserStoragePathShowsTheResults(t *testing.T) {
	e := runFinished(t)
	url := storageDashboard(t, e, dashboard.Config{})
	ctx := browser(t)
	navigate(t, ctx, url+"/experiments/"+e.name)
	n := e.results.Len()
	waitFor(t, ctx, "a row per trial", fmt.Sprintf(`document.querySelectorAll("#trials-table tbody tr").length === %d`, n))

	type shown struct {
		ID, Status, Last, Iter, Failures string
	}
	rows := evaluate[[]shown](t, ctx, `[...document.querySelectorAll("#trials-table tbody tr")].map((r) => ({
		ID: r.dataset.trial, Status: r.querySelector('[data-col="status"]').textContent,
		Last: r.querySelector('[data-col="last"]').textContent, Iter: r.querySelector('[data-col="iter"]').textContent,
		Failures: r.querySelector('[data-col="failures"]').textContent}))`)
	byID := map[string]shown{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	for _, r := range e.results.Results() {
		got, ok := byID[r.TrialID]
		if !ok {
			t.Errorf("no row of trial %s", r.TrialID)
			continue
		}
		last, err := strconv.ParseFloat(got.Last, 64)
		loss := floatOf(r.Metrics["loss"])
		if err != nil || math.Abs(last-loss) > 1e-4*math.Abs(loss) || got.Status != r.Status ||
			got.Iter != fmt.Sprint(r.Metrics["training_iteration"]) || got.Failures != strconv.Itoa(r.NumFailures) {
			t.Errorf("trial %s shows %+v; tunejet results: %s, loss %v, iteration %v, %d failures",
				r.TrialID, got, r.Status, loss, r.Metrics["training_iteration"], r.NumFailures)
		}
	}
	if s := evaluate[string](t, ctx, `document.getElementById("summary").textContent`); !strings.Contains(s, "COMPLETED") || !strings.Contains(s, "read from its files") {
		t.Errorf("summary %q; want COMPLETED, read from its files", s)
	}
	if live := evaluate[bool](t, ctx, `document.getElementById("live").hidden`); !live {
		t.Error("a page of files says it follows the log")
	}

	// A line per finished trial.
	finishedTrials := len(trialsWhere(e, func(r tune.Result) bool { return r.Status == "TERMINATED" || r.Status == "ERROR" }))
	waitFor(t, ctx, "a line per finished trial", fmt.Sprintf(`document.querySelectorAll("#parcoords polyline").length === %d`, finishedTrials))

	// Filters.
	typeFilter(t, ctx, "x>=3 opt=adam")
	if got, want := shownTrials(t, ctx), trialsWhere(e, func(r tune.Result) bool { return floatOf(r.Config["x"]) >= 3 && r.Config["opt"] == "adam" }); !slices.Equal(got, want) {
		t.Errorf("filter x>=3 opt=adam shows %v, want %v", got, want)
	}
	typeFilter(t, ctx, "loss<0.9")
	if got, want := shownTrials(t, ctx), trialsWhere(e, func(r tune.Result) bool { return floatOf(r.Metrics["loss"]) < 0.9 }); !slices.Equal(got, want) || len(want) == 0 {
		t.Errorf("filter loss<0.9 shows %v, want %v", got, want)
	}
	typeFilter(t, ctx, "")
	selectStatus(t, ctx, "ERROR")
	failed := e.result(t, 3, "adam")
	if got := shownTrials(t, ctx); !slices.Equal(got, []string{failed.TrialID}) {
		t.Errorf("status ERROR shows %v, want %s alone", got, failed.TrialID)
	}
	typeFilter(t, ctx, "nosuchkey>1")
	if msg := evaluate[string](t, ctx, `document.getElementById("filter-error").textContent`); !strings.Contains(msg, "unknown name") {
		t.Errorf("a filter on an unknown name says %q", msg)
	}
	typeFilter(t, ctx, "")

	// The failed trial's detail.
	evaluate[chromedp.Void](t, ctx, `document.getElementById("trial-`+failed.TrialID+`").click()`)
	waitFor(t, ctx, "the failed trial's error.txt", `document.getElementById("error-text").textContent.includes(`+jsString(divergedMsg)+`)`)
	waitFor(t, ctx, "its checkpoints, to download", `[...document.querySelectorAll("#checkpoints a")].some((a) => a.getAttribute("href").endsWith("/checkpoints/`+failed.Checkpoint.Name+`"))`)
	waitFor(t, ctx, "its timeline", `document.querySelectorAll("#timeline li[data-kind='trial.completed']").length === 1`)
	// The state file has no time for some rows: they align with the others.
	if untimed := evaluate[int](t, ctx, `[...document.querySelectorAll("#timeline .when")].filter((e) => e.textContent === "").length`); untimed == 0 {
		t.Log("every row of the timeline has a time: the alignment below proves little")
	}
	if lefts := evaluate[int](t, ctx, `new Set([...document.querySelectorAll("#timeline .kind")].map((e) => Math.round(e.getBoundingClientRect().left))).size`); lefts != 1 {
		t.Errorf("the timeline's rows start their kind at %d places, want 1", lefts)
	}
}

// TestBrowserStopOnlyWhenAllowed: without --allow-actions the page has no
// stop button and the endpoint answers 403 to the page; with it, the
// button stops the experiment.
func TestBrowserStopOnlyWhenAllowed(t *testing.T) {
	e := startStepped(t, "")
	allowed := serveDashboard(t, dashboard.New(dashCtx(t), e.bus, dashboard.Config{AllowActions: true, Log: testLog(t)})).URL
	ctx := browser(t)

	// The experiments and runners pages, live.
	navigate(t, ctx, e.dash.URL+"/")
	waitFor(t, ctx, "the experiment running in the list", `document.querySelector('#experiments-table tr[data-experiment="`+e.name+`"]')?.dataset.status === "RUNNING"`)
	navigate(t, ctx, e.dash.URL+"/runners")
	waitFor(t, ctx, "the runner with its two trials", `document.querySelectorAll('#runners-table td[data-col="trials"] a').length === 2`)
	waitFor(t, ctx, "what they hold of its capacity", `document.querySelector('#runners-table td[data-col="in use"]')?.textContent.startsWith("cpu 2/2")`)

	navigate(t, ctx, e.dash.URL+"/experiments/"+e.name)
	waitFor(t, ctx, "the running experiment", `document.getElementById("summary").textContent.startsWith("RUNNING")`)
	if present := evaluate[bool](t, ctx, `document.getElementById("stop-experiment") !== null || document.getElementById("stop-confirm") !== null`); present {
		t.Error("a stop button without --allow-actions")
	}
	code := evaluate[int](t, ctx, `fetch("/api/experiments/`+e.name+`/stop", {method: "POST"}).then((r) => r.status)`)
	if code != http.StatusForbidden {
		t.Errorf("the page's stop without --allow-actions: %d, want 403", code)
	}

	navigate(t, ctx, allowed+"/experiments/"+e.name)
	waitFor(t, ctx, "the stop button", `document.getElementById("actions")?.hidden === false`)
	evaluate[chromedp.Void](t, ctx, `document.getElementById("stop-experiment").click()`)
	waitFor(t, ctx, "the confirmation", `document.getElementById("stop-confirm").hidden === false`)
	evaluate[chromedp.Void](t, ctx, `document.getElementById("stop-confirm").click()`)
	waitFor(t, ctx, "the experiment stopped, live", `document.getElementById("summary").textContent.startsWith("COMPLETED")`)
	waitFor(t, ctx, "every trial TERMINATED", `[...document.querySelectorAll("#trials-table tbody tr")].every((r) => r.dataset.status === "TERMINATED")`)
	if hidden := evaluate[bool](t, ctx, `document.getElementById("actions").hidden`); !hidden {
		t.Error("the stop button stays on a completed experiment")
	}
}
