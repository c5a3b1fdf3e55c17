package dashboard_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/dashboard"
	"github.com/tunejet/tunejet/tune"
)

// viewsExp is an experiment published straight to the log: viewsTrials
// finished trials of one iteration each, lr log-uniform (one value per
// trial, evenly spaced in log space), opt a choice of three and width
// uniform; two metrics, loss (min) planted to depend on lr alone and acc
// (max) at odds with it.
type viewsExp struct {
	name string
	lr   []float64
	loss []float64
	acc  []float64
	opt  []string
	url  string
}

const viewsTrials = 40

func (v *viewsExp) id(i int) string { return fmt.Sprintf("0f1e2_%05d", i) }

func startViews(t *testing.T) *viewsExp {
	t.Helper()
	v := &viewsExp{name: "views"}
	tuner, err := tune.NewTuner("views", tune.WithName(v.name),
		tune.WithParamSpace(tune.ParamSpace{"lr": tune.LogUniform(1e-4, 1e-1), "opt": tune.Choice("adam", "sgd", "rmsprop"), "width": tune.Uniform(16, 64)}),
		tune.WithTuneConfig(tune.TuneConfig{Metrics: []string{"loss", "acc"}, Modes: []string{"min", "max"}, NumSamples: viewsTrials}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := tuner.Spec()
	if err != nil {
		t.Fatal(err)
	}
	srv := bustest.Start(t)
	bs := srv.Bus("views/publisher")
	publish := func(w events.Writer, p events.Payload) {
		if _, err := bs.Publish(t.Context(), events.New(v.name, w, "views/"+string(w), p)); err != nil {
			t.Fatal(err)
		}
	}
	publish(events.WriterClient, &events.ExperimentSubmitted{Spec: spec})
	publish(events.WriterController, &events.ExperimentStarted{Run: 1, Session: "2026-12-02_00-00-00", Seed: 1, TrialIDPrefix: "0f1e2", NumTrials: viewsTrials, StoragePath: spec.RunConfig.StoragePath})
	opts := []string{"adam", "sgd", "rmsprop"}
	for i := range viewsTrials {
		lr := math.Pow(10, -4+3*float64(i)/(viewsTrials-1))
		d := math.Log10(lr) + 2.5
		loss := d*d + 0.001*float64(i%5)
		acc := 0.9 - 0.1*math.Abs(math.Log10(lr)+2) + 0.05*float64((i*13)%7)/7
		v.lr, v.loss, v.acc, v.opt = append(v.lr, lr), append(v.loss, loss), append(v.acc, acc), append(v.opt, opts[i%3])
		config := map[string]any{"lr": lr, "opt": opts[i%3], "width": 16 + float64((i*7)%48)}
		id, dir := v.id(i), "trial_"+v.id(i)
		publish(events.WriterController, &events.TrialCreated{TrialID: id, Index: i, TrialName: "views_" + strconv.Itoa(i), ExperimentTag: strconv.Itoa(i), DirName: dir, Config: config})
		publish(events.WriterController, &events.TrialScheduled{TrialID: id, TrialName: "views_" + strconv.Itoa(i), DirName: dir, Config: config, Trainable: spec.Trainable, HeartbeatTimeoutS: 30})
		publish(events.WriterRunner, &events.TrialStarted{TrialID: id, Attempt: 1, Runner: "runner-1", Hostname: "views", PID: 4242})
		publish(events.WriterRunner, &events.TrialReported{TrialID: id, Attempt: 1, Result: map[string]any{"loss": loss, "acc": acc, "training_iteration": 1, "time_total_s": 0.5}})
		publish(events.WriterRunner, &events.TrialCompleted{TrialID: id, Attempt: 1, Status: events.StatusTerminated, Reason: "finished"})
	}
	publish(events.WriterController, &events.ExperimentCompleted{Reason: "finished"})
	v.url = serveDashboard(t, dashboard.New(dashCtx(t), dashBus(t, srv.URL()), dashboard.Config{Log: testLog(t)})).URL
	return v
}

// front are the trials no other trial dominates (loss min, acc max).
func (v *viewsExp) front() []string {
	var out []string
	for j := range v.lr {
		dominated := false
		for k := range v.lr {
			if v.loss[k] <= v.loss[j] && v.acc[k] >= v.acc[j] && (v.loss[k] < v.loss[j] || v.acc[k] > v.acc[j]) {
				dominated = true
				break
			}
		}
		if !dominated {
			out = append(out, v.id(j))
		}
	}
	slices.Sort(out)
	return out
}

// openViews opens the experiment's page once every trial is in it.
func openViews(t *testing.T, v *viewsExp) context.Context {
	t.Helper()
	ctx := browser(t)
	navigate(t, ctx, v.url+"/experiments/"+v.name)
	waitFor(t, ctx, "every trial", fmt.Sprintf(`document.getElementById("filter-count").textContent === "%d of %d trials"`, viewsTrials, viewsTrials))
	waitFor(t, ctx, "a line per trial", fmt.Sprintf(`document.querySelectorAll("#parcoords polyline[data-trial]").length === %d`, viewsTrials))
	return ctx
}

// mouse dispatches mouse events at the screen point of the JavaScript
// expression at (an {x, y} or null): "move", "click" (down and up), or
// "down", "up".
func mouse(t *testing.T, ctx context.Context, target, at, what string) {
	t.Helper()
	ok := evaluate[bool](t, ctx, `(() => {
		const p = `+at+`;
		if (!p) return false;
		const el = `+target+`;
		const ev = (type) => el.dispatchEvent(new MouseEvent(type, {clientX: p.x, clientY: p.y, bubbles: true, button: 0}));
		const kinds = {move: ["mousemove"], click: ["mousedown", "mouseup"], down: ["mousedown"], up: ["mousemove", "mouseup"]}[`+jsString(what)+`];
		kinds.forEach(ev);
		return true;
	})()`)
	if !ok {
		t.Fatalf("no point on screen for %s", at)
	}
}

// TestBrowserViews drives the charts of an experiment of two metrics:
// the log axis of a log-uniform parameter, hover, click-select, zoom,
// the filter and the brushes driving every view, the history, the
// scatter of each parameter, the Pareto front, the one-iteration curves
// and the row click that scrolls to the trial.
func TestBrowserViews(t *testing.T) {
	v := startViews(t)
	ctx := openViews(t, v)
	byID := map[string]int{}
	for i := range v.lr {
		byID[v.id(i)] = i
	}

	t.Run("log axis", func(t *testing.T) {
		if got := evaluate[string](t, ctx, `document.querySelector('#parcoords .pc-axis[data-axis="lr"]').dataset.scale`); got != "log" {
			t.Errorf("the lr axis is %q, want log", got)
		}
		labels := evaluate[[]string](t, ctx, `[...document.querySelectorAll('#parcoords .pc-axis[data-axis="lr"] .tick-label')].map((e) => e.textContent)`)
		if !slices.Equal(labels, []string{"1e-4", "0.001", "0.01", "0.1"}) {
			t.Errorf("the lr axis's ticks are %q, want the powers of ten 1e-4 … 0.1", labels)
		}
		if got := evaluate[string](t, ctx, `document.querySelector('#parcoords .pc-axis[data-axis="width"]').dataset.scale`); got != "linear" {
			t.Errorf("the width axis is %q, want linear", got)
		}
		cats := evaluate[[]string](t, ctx, `[...document.querySelectorAll('#parcoords .pc-axis[data-axis="opt"] .tick-label')].map((e) => e.textContent)`)
		if !slices.Equal(cats, []string{"adam", "rmsprop", "sgd"}) {
			t.Errorf("the opt axis's categories are %q, want them in order", cats)
		}
	})

	t.Run("one-iteration trials open on the history, their curves dots", func(t *testing.T) {
		waitFor(t, ctx, "the history shown first", `document.getElementById("tab-history").classList.contains("active") && !document.getElementById("view-history").hidden && document.getElementById("view-curves").hidden`)
		evaluate[chromedp.Void](t, ctx, `document.getElementById("tab-curves").click()`)
		waitFor(t, ctx, "a dot per trial", fmt.Sprintf(`document.querySelectorAll("#curves polyline.dot").length === %d`, viewsTrials))
		if note := evaluate[string](t, ctx, `document.getElementById("curves-note").textContent`); !strings.Contains(note, "one iteration") {
			t.Errorf("the curves' note is %q", note)
		}
	})

	evaluate[chromedp.Void](t, ctx, `document.getElementById("tab-history").click()`)
	waitFor(t, ctx, "the history of every trial", fmt.Sprintf(`document.getElementById("history").dataset.points === "%d" && !!document.querySelector("#history path.best-so-far")`, viewsTrials))

	t.Run("hover names the trial and its config", func(t *testing.T) {
		const i = 7
		mouse(t, ctx, `document.getElementById("history")`, `clientPointOf("history", "`+v.id(i)+`")`, "move")
		waitFor(t, ctx, "the tooltip", `!document.getElementById("tooltip").hidden`)
		tip := evaluate[string](t, ctx, `document.getElementById("tooltip").textContent`)
		num := func(f float64) string { return evaluate[string](t, ctx, fmt.Sprintf("fmt(%v)", f)) }
		for _, want := range []string{"views_7 (TERMINATED)", "lr = " + num(v.lr[i]), "opt = " + v.opt[i], "loss " + num(v.loss[i])} {
			if !strings.Contains(tip, want) {
				t.Errorf("the tooltip %q does not say %q", tip, want)
			}
		}
	})

	t.Run("click on a chart selects the row", func(t *testing.T) {
		const i = 12
		mouse(t, ctx, `document.getElementById("history")`, `clientPointOf("history", "`+v.id(i)+`")`, "click")
		waitFor(t, ctx, "the row selected", `document.getElementById("trial-`+v.id(i)+`")?.classList.contains("selected")`)
		waitFor(t, ctx, "the trial's panel", `document.getElementById("trial").dataset.trial === "`+v.id(i)+`"`)
		waitFor(t, ctx, "the trial ringed in the history", `document.querySelector("#history circle.selected-ring")?.dataset.trial === "`+v.id(i)+`"`)
		evaluate[chromedp.Void](t, ctx, `document.getElementById("tab-parcoords").click()`)
		waitFor(t, ctx, "its line selected in the parallel coordinates", `document.querySelector("#parcoords polyline.selected")?.dataset.trial === "`+v.id(i)+`"`)
		// And from the parallel coordinates and the curves.
		const j, k = 33, 3
		mouse(t, ctx, `document.getElementById("parcoords")`, `clientPointOf("parcoords", "`+v.id(j)+`")`, "click")
		waitFor(t, ctx, "the row selected from its line", `document.getElementById("trial-`+v.id(j)+`")?.classList.contains("selected") && document.querySelectorAll("#trials-table tr.selected").length === 1`)
		evaluate[chromedp.Void](t, ctx, `document.getElementById("tab-curves").click()`)
		mouse(t, ctx, `document.getElementById("curves")`, `clientPointOf("curves", "`+v.id(k)+`")`, "click")
		waitFor(t, ctx, "the row selected from its curve", `document.getElementById("trial-`+v.id(k)+`")?.classList.contains("selected") && document.querySelector("#curves polyline.selected")?.dataset.trial === "`+v.id(k)+`"`)
		evaluate[chromedp.Void](t, ctx, `document.getElementById("tab-history").click()`)
	})

	t.Run("log y and by time", func(t *testing.T) {
		evaluate[chromedp.Void](t, ctx, `document.getElementById("log-y").click()`)
		waitFor(t, ctx, "a log y axis", `document.querySelector("#history .axis-y")?.dataset.scale === "log"`)
		evaluate[chromedp.Void](t, ctx, `document.getElementById("log-y").click()`)
		waitFor(t, ctx, "a linear y axis again", `document.querySelector("#history .axis-y")?.dataset.scale === "linear"`)
		evaluate[chromedp.Void](t, ctx, `document.getElementById("history-by-time").click()`)
		waitFor(t, ctx, "the history by time", fmt.Sprintf(`document.querySelector("#history .axis-x .axis-name")?.textContent === "seconds since the start" && document.getElementById("history").dataset.points === "%d"`, viewsTrials))
		evaluate[chromedp.Void](t, ctx, `document.getElementById("history-by-time").click()`)
		waitFor(t, ctx, "the history by trial", `document.querySelector("#history .axis-x .axis-name")?.textContent === "trial number"`)
	})

	t.Run("past 1,000 lines the best and a sample", func(t *testing.T) {
		type sample struct {
			Lines int
			Best  bool
			Note  string
		}
		got := evaluate[sample](t, ctx, `(() => {
			const trials = Array.from({length: 3000}, (_, i) => ({trial_id: "t" + i, last: (i * 7919) % 3000}));
			const s = pcSample(trials);
			const ids = new Set(s.lines.map((t) => t.trial_id));
			return {Lines: s.lines.length, Best: trials.filter((t) => t.last < 200).every((t) => ids.has(t.trial_id)), Note: s.note};
		})()`)
		if got.Lines != 1000 || !got.Best || !strings.Contains(got.Note, "the best 200") {
			t.Errorf("3,000 trials draw %+v; want 1,000 lines holding the best 200, and a caption saying so", got)
		}
	})

	t.Run("zoom and reset", func(t *testing.T) {
		before := evaluate[[]string](t, ctx, `[...document.querySelectorAll("#history .axis-x .tick-label")].map((e) => e.textContent)`)
		evaluate[chromedp.Void](t, ctx, `(() => { const s = document.getElementById("history"), p = clientPointOf("history", "`+v.id(20)+`");
			s.dispatchEvent(new WheelEvent("wheel", {clientX: p.x, clientY: p.y, deltaY: -100, bubbles: true, cancelable: true})); })()`)
		waitFor(t, ctx, "the history zoomed", `document.getElementById("history").dataset.zoomed === "true"`)
		after := evaluate[[]string](t, ctx, `[...document.querySelectorAll("#history .axis-x .tick-label")].map((e) => e.textContent)`)
		if slices.Equal(before, after) {
			t.Errorf("the x ticks did not change with the zoom: %q", after)
		}
		evaluate[chromedp.Void](t, ctx, `document.getElementById("reset-zoom-left").click()`)
		waitFor(t, ctx, "the zoom reset", `document.getElementById("history").dataset.zoomed === undefined`)
	})

	t.Run("the filter drives the charts", func(t *testing.T) {
		n := 0
		for _, o := range v.opt {
			if o == "adam" {
				n++
			}
		}
		typeFilter(t, ctx, "opt=adam")
		waitFor(t, ctx, "the history of adam's trials", fmt.Sprintf(`document.getElementById("history").dataset.points === "%d"`, n))
		waitFor(t, ctx, "their lines", fmt.Sprintf(`document.querySelectorAll("#parcoords polyline[data-trial]").length === %d`, n))
		typeFilter(t, ctx, "")
		waitFor(t, ctx, "every trial again", fmt.Sprintf(`document.getElementById("history").dataset.points === "%d"`, viewsTrials))
	})

	t.Run("brushing an axis filters the table", func(t *testing.T) {
		// From between trials 25 and 26 down to between 10 and 11 on the
		// lr axis (halfway in log space: some pixels from each).
		mid := func(i int) float64 { return math.Sqrt(v.lr[i] * v.lr[i+1]) }
		hi, lo := mid(25), mid(10)
		var want []string
		for i, lr := range v.lr {
			if lr >= lo && lr <= hi {
				want = append(want, v.id(i))
			}
		}
		svg := `document.getElementById("parcoords")`
		mouse(t, ctx, svg, fmt.Sprintf(`pcClientPoint("lr", %g)`, hi), "down")
		mouse(t, ctx, svg, fmt.Sprintf(`pcClientPoint("lr", %g)`, lo), "up")
		waitFor(t, ctx, "the brushed rows", fmt.Sprintf(`document.getElementById("filter-count").textContent === "%d of %d trials"`, len(want), viewsTrials))
		if got := shownTrials(t, ctx); !slices.Equal(got, want) {
			t.Errorf("the brush shows %v, want %v", got, want)
		}
		// A second brush, on opt, ANDs with the first.
		var both []string
		for _, id := range want {
			if v.opt[byID[id]] == "sgd" {
				both = append(both, id)
			}
		}
		mouse(t, ctx, svg, `pcClientPoint("opt", "sgd")`, "down")
		evaluate[chromedp.Void](t, ctx, `(() => { const p = pcClientPoint("opt", "sgd"); window.dispatchEvent(new MouseEvent("mouseup", {clientX: p.x, clientY: p.y + 6})); })()`)
		waitFor(t, ctx, "the rows of both brushes", fmt.Sprintf(`document.getElementById("filter-count").textContent === "%d of %d trials"`, len(both), viewsTrials))
		if got := shownTrials(t, ctx); !slices.Equal(got, both) {
			t.Errorf("the two brushes show %v, want %v", got, both)
		}
		// A click on the opt axis clears its brush alone.
		mouse(t, ctx, svg, `pcClientPoint("opt", "adam")`, "click")
		waitFor(t, ctx, "the rows of the lr brush again", fmt.Sprintf(`document.getElementById("filter-count").textContent === "%d of %d trials"`, len(want), viewsTrials))
		evaluate[chromedp.Void](t, ctx, `document.getElementById("clear-brushes").click()`)
		waitFor(t, ctx, "every row again", fmt.Sprintf(`document.getElementById("filter-count").textContent === "%d of %d trials"`, viewsTrials, viewsTrials))
	})

	t.Run("parameters against the metric", func(t *testing.T) {
		evaluate[chromedp.Void](t, ctx, `document.getElementById("tab-scatter").click()`)
		waitFor(t, ctx, "a chart per parameter", `[...document.querySelectorAll("#scatter svg")].map((s) => s.dataset.param).join() === "lr,opt,width"`)
		if got := evaluate[string](t, ctx, `document.querySelector('#scatter svg[data-param="lr"] .axis-x').dataset.scale + " " + document.querySelector('#scatter svg[data-param="opt"] .axis-x').dataset.scale`); got != "log band" {
			t.Errorf("the lr and opt charts' x axes are %q, want log band", got)
		}
		mouse(t, ctx, `document.querySelector('#scatter svg[data-param="opt"]')`, `clientPointOf("scatter-opt", "`+v.id(5)+`")`, "move")
		waitFor(t, ctx, "the tooltip of trial 5", `document.getElementById("tooltip").dataset.trial === "`+v.id(5)+`" && !document.getElementById("tooltip").hidden`)
	})

	t.Run("Pareto front", func(t *testing.T) {
		waitFor(t, ctx, "the Pareto tab", `!document.getElementById("tab-pareto").hidden`)
		evaluate[chromedp.Void](t, ctx, `document.getElementById("tab-pareto").click()`)
		want := v.front()
		waitFor(t, ctx, "the front", fmt.Sprintf(`document.querySelectorAll("#pareto circle.front").length === %d`, len(want)))
		got := evaluate[[]string](t, ctx, `[...document.querySelectorAll("#pareto circle.front")].map((c) => c.dataset.trial)`)
		slices.Sort(got)
		if !slices.Equal(got, want) || len(want) < 2 || len(want) == viewsTrials {
			t.Errorf("the front marks %v, want %v", got, want)
		}
	})

	t.Run("importance", func(t *testing.T) {
		evaluate[chromedp.Void](t, ctx, `document.getElementById("tab-importance").click()`)
		waitFor(t, ctx, "the importance or its absence", `!!document.querySelector("#importance-chart, #importance-missing")`)
		if missing := evaluate[string](t, ctx, `document.getElementById("importance-missing")?.textContent || ""`); missing != "" {
			if strings.Contains(missing, "not available") {
				t.Skip("the importance endpoint (GET /api/experiments/NAME/importance) is not in this build: " + missing)
			}
			t.Fatalf("the importance view says %q", missing)
		}
		params := evaluate[[]string](t, ctx, `[...document.querySelectorAll("#importance-chart .bar")].map((g) => g.dataset.param)`)
		if len(params) == 0 || params[0] != "lr" {
			t.Errorf("the importance lists %v, want lr, on which the loss depends, first", params)
		}
	})

	t.Run("importance draws the answer's bars in order", func(t *testing.T) {
		// The endpoint's answer, stubbed in the page: this checks the view
		// alone, with or without the endpoint in the build.
		evaluate[chromedp.Void](t, ctx, `(() => {
			const real = window.fetch;
			window.fetch = (url, opts) => String(url).includes("/importance?metric=loss") ?
				Promise.resolve(new Response(JSON.stringify({metric: "loss", mode: "min", method: "fanova", trials: 40,
					importances: [{param: "width", importance: 0.7}, {param: "lr", importance: 0.2}, {param: "opt", importance: 0.1}]}), {status: 200})) :
				real(url, opts);
			document.getElementById("tab-parcoords").click();
			document.getElementById("tab-importance").click();
			window.fetch = real;
		})()`)
		waitFor(t, ctx, "the bars", `document.querySelectorAll("#importance-chart .bar").length === 3`)
		params := evaluate[[]string](t, ctx, `[...document.querySelectorAll("#importance-chart .bar")].map((g) => g.dataset.param)`)
		if !slices.Equal(params, []string{"width", "lr", "opt"}) {
			t.Errorf("the bars are %v, want the answer's order width, lr, opt", params)
		}
		widths := evaluate[[]float64](t, ctx, `[...document.querySelectorAll("#importance-chart .bar rect")].map((r) => +r.getAttribute("width"))`)
		if !(widths[0] > widths[1] && widths[1] > widths[2]) {
			t.Errorf("the bars' widths %v do not follow the importances", widths)
		}
	})

	t.Run("a row click scrolls to the trial", func(t *testing.T) {
		evaluate[chromedp.Void](t, ctx, `window.scrollTo(0, 0)`)
		if below := evaluate[bool](t, ctx, `document.getElementById("trial").getBoundingClientRect().top > window.innerHeight`); !below {
			t.Fatal("the trial's panel is in view before the click: the test proves nothing")
		}
		evaluate[chromedp.Void](t, ctx, `document.getElementById("trial-`+v.id(30)+`").click()`)
		waitFor(t, ctx, "the trial's panel in view", `document.getElementById("trial").dataset.trial === "`+v.id(30)+`" && window.scrollY > 0 &&
			document.getElementById("trial").getBoundingClientRect().top >= -1 && document.getElementById("trial").getBoundingClientRect().top < window.innerHeight - 100`)
	})
}

// TestExperimentJSONCarriesScalesAndObjectives: the update says how to
// draw each key of the param space and, for several metrics, each
// trial's values of them.
func TestExperimentJSONCarriesScalesAndObjectives(t *testing.T) {
	v := startViews(t)
	var u experimentJSON
	bustest.Eventually(t, 20*time.Second, "every trial", func() bool {
		getJSON(t, v.url+"/api/experiments/"+v.name, &u)
		return len(u.Trials) == viewsTrials
	})
	if want := map[string]string{"lr": "log", "opt": "category", "width": "linear"}; !maps.Equal(u.Experiment.Params, want) {
		t.Errorf("params %v, want %v", u.Experiment.Params, want)
	}
	if want := []dashboard.Objective{{Metric: "loss", Mode: "min"}, {Metric: "acc", Mode: "max"}}; !slices.Equal(u.Experiment.Objectives, want) {
		t.Errorf("objectives %v, want %v", u.Experiment.Objectives, want)
	}
	if u.Experiment.Metric != "loss" || u.Experiment.Mode != "min" {
		t.Errorf("metric %q mode %q, want the first of the metrics: loss, min", u.Experiment.Metric, u.Experiment.Mode)
	}
	for _, r := range u.Trials {
		var i int
		if _, err := fmt.Sscanf(r.ID, "0f1e2_%d", &i); err != nil {
			t.Fatal(err)
		}
		if r.Values["loss"] != v.loss[i] || r.Values["acc"] != v.acc[i] || r.LastResultTime == nil {
			t.Errorf("trial %s: values %v, last result at %v; want loss %v, acc %v", r.ID, r.Values, r.LastResultTime, v.loss[i], v.acc[i])
		}
	}
}
