package dashboard_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color/palette"
	"image/draw"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tunejet/tunejet/internal/dashboard"
	"github.com/tunejet/tunejet/tune"
	"github.com/tunejet/tunejet/tune/tunetest"
)

// ScreenshotEnv names the file TestDashboardScreenshot writes; the test is
// skipped without it. Beside it, the picture of each view:
// dashboard-history.png, dashboard-scatter.png, dashboard-parcoords.png
// (brushed), dashboard-importance.png and dashboard-pareto.png (of an
// experiment of two metrics).
// docs/dashboard.md's pictures come from
//
//	TUNEJET_DASHBOARD_PNG=$PWD/docs/dashboard.png go test -run TestDashboardScreenshot ./internal/dashboard/
const screenshotEnv = "TUNEJET_DASHBOARD_PNG"

// TestDashboardScreenshot runs a small ASHA search on a stack of its own,
// opens its page with its best trial selected, and saves the page as a
// PNG: the picture the README shows.
func TestDashboardScreenshot(t *testing.T) {
	file := os.Getenv(screenshotEnv)
	if file == "" {
		t.Skip("set " + screenshotEnv + " to the PNG to write")
	}
	// A noisy quadratic in log10(lr) and momentum, learnt over iterations.
	train := func(ctx context.Context, config map[string]any) error {
		lr, _ := config["lr"].(float64)
		mom, _ := config["momentum"].(float64)
		d := math.Log10(lr) + 2.5
		floor := d*d/4 + 10*(mom-0.9)*(mom-0.9)
		for i := 1; i <= 30; i++ {
			time.Sleep(20 * time.Millisecond) // some training, so that ASHA stops the worst trials
			loss := floor + 2/math.Sqrt(float64(i)) + 0.05*math.Sin(float64(i)*lr*1e3)
			if err := tune.Report(ctx, map[string]any{"loss": loss}); err != nil {
				if errors.Is(err, tune.ErrStopped) {
					return nil
				}
				return err
			}
		}
		return nil
	}
	opts := tunetest.Start(t, tunetest.Config{Trainables: map[string]tune.Trainable{"sgd": train}, Slots: 4})
	tuner, err := tune.NewTuner(train, tune.WithNATS(opts), tune.WithName("sgd_asha"), tune.WithTrainableName("sgd"),
		tune.WithParamSpace(tune.ParamSpace{"lr": tune.LogUniform(1e-4, 1e-1), "momentum": tune.Uniform(0.5, 0.99)}),
		tune.WithTuneConfig(tune.TuneConfig{Metric: "loss", Mode: "min", NumSamples: 24, Scheduler: "asha",
			SchedulerConfig: map[string]any{"max_t": 30, "grace_period": 3, "reduction_factor": 3}}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	results, err := tuner.Fit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	best, err := results.GetBestResult("", "", "")
	if err != nil {
		t.Fatal(err)
	}
	url := serveDashboard(t, dashboard.New(dashCtx(t), dashBus(t, opts.URL), dashboard.Config{Log: testLog(t)})).URL
	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 1280)); err != nil {
		t.Fatal(err)
	}
	navigate(t, ctx, url+"/experiments/sgd_asha#trial="+best.TrialID)
	waitFor(t, ctx, "the best trial's timeline", `document.querySelectorAll("#timeline li").length > 0`)
	waitFor(t, ctx, "the plots", `document.querySelectorAll("#parcoords polyline").length > 0 && document.querySelectorAll("#curves polyline").length === 24`)
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	writePNG(t, file, shot)

	// Each view, its figure alone.
	evaluate[chromedp.Void](t, ctx, `document.getElementById("tab-history").click()`)
	waitFor(t, ctx, "the history", `document.getElementById("history").dataset.points > 0`)
	figure(t, ctx, "#figure-left", beside(file, "history"))
	evaluate[chromedp.Void](t, ctx, `document.getElementById("tab-scatter").click()`)
	waitFor(t, ctx, "the scatter of each parameter", `document.querySelectorAll("#scatter svg").length === 2`)
	figure(t, ctx, "#figure-right", beside(file, "scatter"))
	// The parallel coordinates with a brush on lr around its best values.
	evaluate[chromedp.Void](t, ctx, `(() => {
		document.getElementById("tab-parcoords").click();
		const svg = document.getElementById("parcoords"), a = pcClientPoint("lr", 0.01), b = pcClientPoint("lr", 0.0008);
		svg.dispatchEvent(new MouseEvent("mousedown", {clientX: a.x, clientY: a.y, bubbles: true}));
		window.dispatchEvent(new MouseEvent("mouseup", {clientX: b.x, clientY: b.y}));
	})()`)
	waitFor(t, ctx, "the brush", `document.querySelectorAll("#parcoords rect.brush").length === 1`)
	figure(t, ctx, "#figure-right", beside(file, "parcoords"))
	evaluate[chromedp.Void](t, ctx, `document.getElementById("tab-importance").click()`)
	waitFor(t, ctx, "the importance bars", `document.querySelectorAll("#importance-chart .bar").length === 2`)
	figure(t, ctx, "#figure-right", beside(file, "importance"))

	// The Pareto front of an experiment of two metrics.
	v := startViews(t)
	navigate(t, ctx, v.url+"/experiments/"+v.name)
	waitFor(t, ctx, "the Pareto tab", `!document.getElementById("tab-pareto").hidden`)
	evaluate[chromedp.Void](t, ctx, `document.getElementById("tab-pareto").click()`)
	waitFor(t, ctx, "the front", `document.querySelectorAll("#pareto circle.front").length > 1`)
	figure(t, ctx, "#figure-left", beside(file, "pareto"))
}

// beside is the file of a view's picture beside the page's: dashboard.png
// → dashboard-history.png.
func beside(file, view string) string {
	return strings.TrimSuffix(file, filepath.Ext(file)) + "-" + view + filepath.Ext(file)
}

// figure saves a picture of the element sel.
func figure(t *testing.T, ctx context.Context, sel, file string) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel)))
	if err != nil {
		t.Fatal(err)
	}
	writePNG(t, file, shot)
}

func writePNG(t *testing.T, file string, shot []byte) {
	t.Helper()
	small, err := paletted(shot)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, small, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes; %d before its colours were reduced)", file, len(small), len(shot))
}

// paletted re-encodes a PNG with 256 colours (dithered), a third of its
// size or less for a page of text and lines.
func paletted(data []byte) ([]byte, error) {
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decode the screenshot: %w", err)
	}
	p := image.NewPaletted(img.Bounds(), palette.Plan9)
	draw.FloydSteinberg.Draw(p, img.Bounds(), img, image.Point{})
	var out bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&out, p); err != nil {
		return nil, fmt.Errorf("encode the screenshot: %w", err)
	}
	return out.Bytes(), nil
}
