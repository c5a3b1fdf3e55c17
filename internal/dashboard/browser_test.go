package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// browserWait bounds each wait for the page to show something.
const browserWait = 15 * time.Second

// browser starts headless Chromium for t, closed when t ends; when t
// fails, a screenshot of the page is saved under its temp dir (or
// TUNEJET_SCREENSHOT_DIR, which outlives the test).
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the browser tests need Chromium on PATH: install it with `apt-get install -y chromium` (%v)", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1200, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			screenshot(t, ctx)
		}
	})
	return ctx
}

func screenshot(t *testing.T, ctx context.Context) {
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
func waitFor(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(browserWait))); err != nil {
		t.Fatalf("the page never showed %s (%s): %v", what, expr, err)
	}
}

// TestBrowserShowsTrialsAndLiveCurves opens an experiment's page (with a
// token, as off loopback) while its trials run, and watches a trial's
// curve gain a point, without a reload, when the trial reports.
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
		`document.querySelector('#trial-`+ids[xs[0]]+` td:nth-child(5)')?.textContent === "2"`)
	other, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('polyline[data-trial="`+ids[xs[1]]+`"]').dataset.n`))
	if err != nil {
		t.Fatal(err)
	}
	if other != "1" {
		t.Errorf("the other trial's curve has %s points, want 1: it did not report", other)
	}
}
