package dashboard_test

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/dashboard"
	"github.com/tunejet/tunejet/tune"
)

// storageDashboard serves the dashboard of e's files alone.
func storageDashboard(t *testing.T, e *finished, cfg dashboard.Config) string {
	t.Helper()
	cfg.Log = testLog(t)
	srv, err := dashboard.NewStorage(t.Context(), e.expPath, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return serveDashboard(t, srv).URL
}

// rowByID indexes an experiment's rows by trial id.
func rowByID(u experimentJSON) map[string]dashboard.TrialRow {
	out := map[string]dashboard.TrialRow{}
	for _, r := range u.Trials {
		out[r.ID] = r
	}
	return out
}

func floatOf(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case json.Number:
		f, _ := n.Float64()
		return f
	}
	return math.NaN()
}

// TestStoragePathMatchesResults: the dashboard of a storage path alone
// says what tunejet results says of every trial.
func TestStoragePathMatchesResults(t *testing.T) {
	e := runFinished(t)
	url := storageDashboard(t, e, dashboard.Config{})
	var list struct {
		Experiments []dashboard.Summary `json:"experiments"`
	}
	getJSON(t, url+"/api/experiments", &list)
	if len(list.Experiments) != 1 || list.Experiments[0].Name != e.name || list.Experiments[0].Source != "files" {
		t.Fatalf("experiments of the storage path: %+v; want %s alone, from files", list.Experiments, e.name)
	}
	var u experimentJSON
	getJSON(t, url+"/api/experiments/"+e.name, &u)
	if u.Experiment.Status != "COMPLETED" || u.Experiment.Counts["TERMINATED"] != 7 || u.Experiment.Counts["ERROR"] != 1 {
		t.Errorf("experiment %+v; want COMPLETED with 7 trials TERMINATED and 1 ERROR", u.Experiment)
	}
	rows := rowByID(u)
	bestAll := math.Inf(1)
	for _, r := range e.results.Results() {
		row, ok := rows[r.TrialID]
		if !ok {
			t.Errorf("no row of trial %s", r.TrialID)
			continue
		}
		loss := floatOf(r.Metrics["loss"])
		if row.Status != r.Status || row.Last == nil || *row.Last != loss || float64(row.Iteration) != floatOf(r.Metrics["training_iteration"]) ||
			row.NumFailures != r.NumFailures || row.EndReason != r.EndReason {
			t.Errorf("trial %s: %s, last %v, iteration %d, %d failures, %q; tunejet results: %s, loss %v, iteration %v, %d failures, %q",
				r.TrialID, row.Status, ptr(row.Last), row.Iteration, row.NumFailures, row.EndReason,
				r.Status, loss, r.Metrics["training_iteration"], r.NumFailures, r.EndReason)
		}
		if len(row.Points) == 0 || row.Points[len(row.Points)-1][1] != loss {
			t.Errorf("trial %s: curve %v does not end at its last loss %v", r.TrialID, row.Points, loss)
		}
		if it := floatOf(r.Metrics["training_iteration"]); r.NumFailures == 0 && float64(len(row.Points)) != it {
			t.Errorf("trial %s: %d points from result.json, want %v", r.TrialID, len(row.Points), it)
		}
		bestAll = min(bestAll, loss)
	}
	best, err := e.results.GetBestResult("", "", "all")
	if err != nil {
		t.Fatal(err)
	}
	if u.Experiment.Best == nil || *u.Experiment.Best != floatOf(best.Metrics["loss"]) || *u.Experiment.Best != bestAll {
		t.Errorf("the experiment's best %v; tunejet results' best trial %s has loss %v", ptr(u.Experiment.Best), best.TrialName, best.Metrics["loss"])
	}

	// The error of the trial that failed twice, from its error.txt.
	failed := e.result(t, 3, "adam")
	var d dashboard.TrialDetail
	getJSON(t, url+"/api/experiments/"+e.name+"/trials/"+failed.TrialID, &d)
	if !strings.Contains(d.ErrorText, "Failure # 2") || !strings.Contains(d.ErrorText, divergedMsg) || d.TimelineSource != "state file" {
		t.Errorf("the failed trial's detail: error.txt %q (%s), timeline from the %s; want both failures, from the state file", d.ErrorText, d.ErrorNote, d.TimelineSource)
	}

	// Nothing to stop, no runners.
	if r := post(t, url+"/api/experiments/"+e.name+"/stop"); r.code != http.StatusForbidden {
		t.Errorf("stop without --allow-actions: %s %s, want 403", r.status, r.body)
	}
	var runners struct {
		Runners []map[string]any `json:"runners"`
		Note    string           `json:"note"`
	}
	getJSON(t, url+"/api/runners", &runners)
	if len(runners.Runners) != 0 || runners.Note == "" {
		t.Errorf("runners of a storage path: %+v, want none and a note", runners)
	}
}

// weights is what the fixture wrote in the latest checkpoint of a trial
// that never failed.
func weights(r *tune.Result) string {
	return fmt.Sprintf("x=%v opt=%v i=%v", r.Config["x"], r.Config["opt"], r.Checkpoint.Metrics["training_iteration"])
}

func ptr(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

func post(t *testing.T, url string, hdr ...string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, status: resp.Status, header: resp.Header, body: string(body)}
}

// untar returns a tar's files by name.
func untar(t *testing.T, data string) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(strings.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("not a tar: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = string(b)
	}
}

// TestCheckpointDownloadStaysInTheExperiment downloads checkpoints of a
// storage path, and tries to leave the experiment's folder.
func TestCheckpointDownloadStaysInTheExperiment(t *testing.T) {
	e := runFinished(t)
	url := storageDashboard(t, e, dashboard.Config{})
	const secret = "TOP-SECRET-OUTSIDE"
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	beside := filepath.Join(filepath.Dir(e.expPath), "secret.txt") // next to the experiment directory
	if err := os.WriteFile(beside, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}

	r1 := e.result(t, 1, "sgd")
	base := url + "/api/experiments/" + e.name + "/trials/" + r1.TrialID + "/checkpoints/"
	ck := r1.Checkpoint.Name
	// A symlink inside the checkpoint, pointing out: left out of the tar.
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(r1.Checkpoint.Path, "leak")); err != nil {
		t.Fatal(err)
	}
	r := get(t, http.DefaultClient, base+ck)
	if r.code != http.StatusOK || r.header.Get("Content-Type") != "application/x-tar" || !strings.Contains(r.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("download %s: %s %s", ck, r.status, r.header)
	}
	files := untar(t, r.body)
	if want := weights(r1); files["weights"] != want {
		t.Errorf("the checkpoint's tar holds %v; want weights %q", files, want)
	}
	// The same from the log: the runner wrote the checkpoint to storage
	// (its Location), which the dashboard reads.
	live := serveDashboard(t, dashboard.New(dashCtx(t), dashBus(t, e.nats.URL), dashboard.Config{Log: testLog(t)})).URL
	var d dashboard.TrialDetail
	getJSON(t, live+"/api/experiments/"+e.name+"/trials/"+r1.TrialID, &d)
	if n := len(d.Checkpoints); n == 0 || !d.Checkpoints[n-1].Persisted || d.Checkpoints[n-1].Staged {
		t.Errorf("checkpoints on the log %+v; want the latest in storage, not staged", d.Checkpoints)
	}
	if r := get(t, http.DefaultClient, live+"/api/experiments/"+e.name+"/trials/"+r1.TrialID+"/checkpoints/"+ck); r.code != http.StatusOK || untar(t, r.body)["weights"] != weights(r1) {
		t.Errorf("download from the log's dashboard: %s", r.status)
	}
	if _, ok := files["leak"]; ok || strings.Contains(r.body, secret) {
		t.Errorf("the tar carries the symlink pointing out of the experiment: %v", files)
	}

	// A checkpoint folder replaced by a symlink to a folder outside.
	r2 := e.result(t, 2, "sgd")
	if err := os.RemoveAll(r2.Checkpoint.Path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, r2.Checkpoint.Path); err != nil {
		t.Fatal(err)
	}
	attempts := map[string]string{
		"a checkpoint folder that is a symlink out": "/trials/" + r2.TrialID + "/checkpoints/" + r2.Checkpoint.Name,
		"..":                      "/trials/" + r1.TrialID + "/checkpoints/..",
		"../..":                   "/trials/" + r1.TrialID + "/checkpoints/../../secret.txt",
		"encoded dots":            "/trials/" + r1.TrialID + "/checkpoints/%2e%2e",
		"encoded slashes":         "/trials/" + r1.TrialID + "/checkpoints/..%2F..%2F..%2Fsecret.txt",
		"encoded slash after":     "/trials/" + r1.TrialID + "/checkpoints/" + ck + "%2F..%2F..%2F..%2Fsecret.txt",
		"an absolute path":        "/trials/" + r1.TrialID + "/checkpoints/%2F" + strings.TrimPrefix(filepath.Join(outside, "secret.txt"), "/"),
		"a double slash":          "/trials/" + r1.TrialID + "/checkpoints//etc/passwd",
		"a trial id with dots":    "/trials/..%2F..%2F/checkpoints/" + ck,
		"a trial id of dots":      "/trials/../checkpoints/" + ck,
		"a name of the trial's":   "/trials/" + r1.TrialID + "/checkpoints/" + "result.json",
		"a name with a backslash": "/trials/" + r1.TrialID + "/checkpoints/..%5C..%5Csecret.txt",
	}
	for what, path := range attempts {
		r := get(t, http.DefaultClient, url+"/api/experiments/"+e.name+path)
		if r.code != http.StatusNotFound && r.code != http.StatusBadRequest {
			t.Errorf("%s (%s): %s, want 400 or 404", what, path, r.status)
		}
		if strings.Contains(r.body, secret) || strings.Contains(r.body, "root:") {
			t.Errorf("%s (%s): bytes from outside the experiment: %q", what, path, r.body)
		}
	}
}

// TestTrialTimelineFromTheLog reads a trial's story from the log: its
// attempts with their runner, reports, checkpoints, its failure with the
// cause, the stopper's decision with its reason, and its end; and a failed
// trial's error.txt from storage.
//
// Its checkpoints go through the Object Store, so that the syncer's
// checkpoint.persisted are on the log, and a checkpoint gone from storage
// can come from its staged copy.
func TestTrialTimelineFromTheLog(t *testing.T) {
	e := runFinishedRoute(t, events.RouteObjectStore)
	b := dashBus(t, e.nats.URL)
	url := serveDashboard(t, dashboard.New(dashCtx(t), b, dashboard.Config{Log: testLog(t)})).URL

	r := e.result(t, 4, "adam") // failed once, then finished
	var d dashboard.TrialDetail
	// The syncer may persist the last checkpoints after the experiment
	// ended.
	bustest.Eventually(t, 20*time.Second, "every checkpoint persisted", func() bool {
		d = dashboard.TrialDetail{}
		getJSON(t, url+"/api/experiments/"+e.name+"/trials/"+r.TrialID, &d)
		return len(d.Checkpoints) > 0 && !slices.ContainsFunc(d.Checkpoints, func(c dashboard.CheckpointInfo) bool { return !c.Persisted })
	})
	if d.TimelineSource != "log" || d.Trial.Status != "TERMINATED" {
		t.Fatalf("detail %+v; want the TERMINATED trial's timeline from the log", d)
	}
	kinds := map[string][]dashboard.Entry{}
	var order []string
	for _, en := range d.Timeline {
		kinds[en.Kind] = append(kinds[en.Kind], en)
		order = append(order, en.Kind)
	}
	want := []string{"trial.created", "trial.scheduled", "trial.started", "trial.reported", "checkpoint.persisted", "trial.failed", "trial.decided", "trial.completed"}
	for _, k := range want {
		if len(kinds[k]) == 0 {
			t.Errorf("no %s in the timeline %v", k, order)
		}
	}
	if started := kinds["trial.started"]; len(started) != 2 || !strings.Contains(started[1].Text, "attempt 2 started on runner ") {
		t.Errorf("starts %+v; want two attempts, each with its runner", started)
	}
	if f := kinds["trial.failed"]; len(f) != 1 || !strings.Contains(f[0].Text, "(error") || !strings.Contains(f[0].Text, divergedMsg) {
		t.Errorf("failures %+v; want one, with its cause and message", f)
	}
	if dec := kinds["trial.decided"]; len(dec) == 0 || !strings.HasPrefix(dec[0].Text, "stopper decided stop") || !strings.Contains(dec[0].Text, ": ") {
		t.Errorf("decisions %+v; want the stopper's stop with its reason", dec)
	}
	if c := kinds["trial.completed"]; len(c) != 1 || !strings.Contains(c[0].Text, "TERMINATED") {
		t.Errorf("completion %+v", c)
	}
	reports, checkpoints := 0, 0
	for _, en := range kinds["trial.reported"] {
		if en.Reports == 0 || en.Value == nil {
			t.Errorf("a run of reports without its count or last loss: %+v", en)
		}
		reports += en.Reports
		checkpoints += en.Checkpoints
	}
	if checkpoints+len(kinds["trial.checkpointed"]) == 0 || reports < d.Trial.Iteration {
		t.Errorf("the timeline counts %d reports and %d checkpoints; the trial reached iteration %d with a checkpoint each", reports, checkpoints, d.Trial.Iteration)
	}
	// Its curve holds every result, those reported with a checkpoint too.
	var u experimentJSON
	getJSON(t, url+"/api/experiments/"+e.name, &u)
	for _, row := range u.Trials {
		if row.NumFailures == 0 && len(row.Points) != row.Iteration {
			t.Errorf("trial %s on the log: %d points at iteration %d", row.ID, len(row.Points), row.Iteration)
		}
	}

	failed := e.result(t, 3, "adam")
	getJSON(t, url+"/api/experiments/"+e.name+"/trials/"+failed.TrialID, &d)
	if !strings.Contains(d.ErrorText, "Failure # 2") || !strings.Contains(d.ErrorText, divergedMsg) {
		t.Errorf("the failed trial's error.txt from the log's dashboard: %q (%s)", d.ErrorText, d.ErrorNote)
	}

	// A checkpoint gone from storage comes from the Object Store.
	r1 := e.result(t, 1, "sgd")
	if err := os.RemoveAll(r1.Checkpoint.Path); err != nil {
		t.Fatal(err)
	}
	resp := get(t, http.DefaultClient, url+"/api/experiments/"+e.name+"/trials/"+r1.TrialID+"/checkpoints/"+r1.Checkpoint.Name)
	if resp.code != http.StatusOK {
		t.Fatalf("download of a checkpoint gone from storage: %s %s; want its staged copy from the Object Store", resp.status, resp.body)
	}
	if files := untar(t, resp.body); files["weights"] != weights(r1) {
		t.Errorf("the staged checkpoint's tar holds %v, want weights %q", files, weights(r1))
	}

	// The stack's runner, with its slots.
	var runners struct {
		Runners []map[string]any `json:"runners"`
	}
	getJSON(t, url+"/api/runners", &runners)
	if len(runners.Runners) != 1 || runners.Runners[0]["slots"] != 2.0 || runners.Runners[0]["name"] == "" {
		t.Errorf("runners %+v; want the stack's runner with 2 slots", runners.Runners)
	}
}

// TestActionsAreGuarded: stopping needs --allow-actions, refuses other
// sites' pages, and a dashboard without a token answers loopback names
// alone.
func TestActionsAreGuarded(t *testing.T) {
	e := startStepped(t, "")
	stop := e.dash.URL + "/api/experiments/" + e.name + "/stop"
	if r := post(t, stop); r.code != http.StatusForbidden || !strings.Contains(r.body, "--allow-actions") {
		t.Errorf("stop without --allow-actions: %s %s, want 403 naming the flag", r.status, r.body)
	}
	allowed := serveDashboard(t, dashboard.New(dashCtx(t), e.bus, dashboard.Config{AllowActions: true, Log: testLog(t)})).URL
	stop = allowed + "/api/experiments/" + e.name + "/stop"
	for what, hdr := range map[string][]string{
		"another site's Origin":       {"Origin", "https://evil.example"},
		"a cross-site fetch":          {"Sec-Fetch-Site", "cross-site"},
		"a name that is not loopback": {"Host", "evil.example"},
	} {
		if r := post(t, stop, hdr...); r.code != http.StatusForbidden {
			t.Errorf("stop with %s: %s %s, want 403", what, r.status, r.body)
		}
	}
	if r := get(t, http.DefaultClient, allowed+"/api/experiments", "Host", "rebound.example"); r.code != http.StatusForbidden {
		t.Errorf("a read through a name that is not loopback: %s, want 403", r.status)
	}
	if r := post(t, allowed+"/api/experiments/nope/stop"); r.code != http.StatusNotFound {
		t.Errorf("stop an unknown experiment: %s %s, want 404", r.status, r.body)
	}
	var info map[string]any
	getJSON(t, allowed+"/api/info", &info)
	if info["allow_actions"] != true || info["source"] != "log" {
		t.Errorf("info %v", info)
	}
}

// sseData decodes the data of a stream's "update" events into new values
// of T.
func sseData[T any](t *testing.T, ctx context.Context, url string) <-chan T {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // closed when the test ends
	if err != nil {
		t.Fatal(err)
	}
	body := resp.Body
	t.Cleanup(func() { _ = body.Close() })
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("GET %s: %s, %s", url, resp.Status, ct)
	}
	out := make(chan T, 64)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var v T
				if err := json.Unmarshal([]byte(data), &v); err != nil {
					t.Errorf("update %s: %v", data, err)
					return
				}
				out <- v
			}
		}
	}()
	return out
}

// next waits for an update that ok accepts.
func next[T any](t *testing.T, ctx context.Context, ch <-chan T, what string, ok func(T) bool) T {
	t.Helper()
	for {
		select {
		case v, open := <-ch:
			if !open {
				t.Fatalf("the stream ended before %s", what)
			}
			if ok(v) {
				return v
			}
		case <-ctx.Done():
			t.Fatalf("no update with %s", what)
		}
	}
}

// TestExperimentsAndRunnersStreams: the experiments list and the runners
// follow the experiment as it runs and ends, without a reload.
func TestExperimentsAndRunnersStreams(t *testing.T) {
	e := startStepped(t, "")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	type list struct {
		Experiments []dashboard.Summary `json:"experiments"`
	}
	type runners struct {
		Runners []map[string]any `json:"runners"`
	}
	exps := sseData[list](t, ctx, e.dash.URL+"/api/stream/experiments")
	runs := sseData[runners](t, ctx, e.dash.URL+"/api/stream/runners")
	statusIs := func(status string) func(list) bool {
		return func(l list) bool { return len(l.Experiments) == 1 && l.Experiments[0].Status == status }
	}
	next(t, ctx, exps, "the experiment running", statusIs("RUNNING"))
	running := func(n int) func(runners) bool {
		return func(r runners) bool {
			if len(r.Runners) != 1 {
				return false
			}
			trials, _ := r.Runners[0]["trials"].([]any)
			for _, tr := range trials {
				if m, _ := tr.(map[string]any); m["experiment"] != e.name || m["ack"] != nil {
					return false
				}
			}
			return len(trials) == n && r.Runners[0]["slots"] == float64(len(xs))
		}
	}
	next(t, ctx, runs, "the runner running both trials", running(len(xs)))

	e.finish()
	l := next(t, ctx, exps, "the experiment completed", statusIs("COMPLETED"))
	if l.Experiments[0].Counts["TERMINATED"] != len(xs) || l.Experiments[0].Best == nil || *l.Experiments[0].Best != xs[0] {
		t.Errorf("the completed experiment: %+v; want %d trials TERMINATED, best loss %v", l.Experiments[0], len(xs), xs[0])
	}
	next(t, ctx, runs, "the runner idle", func(r runners) bool {
		return len(r.Runners) == 1 && (r.Runners[0]["trials"] == nil || len(r.Runners[0]["trials"].([]any)) == 0)
	})
}

// TestStopOneTrial: with --allow-actions the page stops one trial (a
// client's trial.stop_requested, which the controller carries out): it
// ends TERMINATED, "stopped", and the other goes on. Unknown trials are
// 404, and without --allow-actions the endpoint is 403.
func TestStopOneTrial(t *testing.T) {
	e := startSteppedWith(t, dashboard.Config{AllowActions: true})
	url := e.dash.URL + "/api/experiments/" + e.name
	rows := func() map[float64]dashboard.TrialRow {
		out := map[float64]dashboard.TrialRow{}
		r := get(t, http.DefaultClient, url)
		if r.code == http.StatusNotFound { // not submitted yet
			return out
		}
		var u experimentJSON
		if err := json.Unmarshal([]byte(r.body), &u); err != nil {
			t.Fatalf("GET %s: %s %v", url, r.status, err)
		}
		for _, r := range u.Trials {
			x, _ := r.Config["x"].(float64)
			out[x] = r
		}
		return out
	}
	bustest.Eventually(t, time.Minute, "both trials running", func() bool {
		r := rows()
		return r[1].Status == "RUNNING" && r[2].Status == "RUNNING"
	})
	first := rows()[1].ID
	if r := post(t, url+"/trials/nope_00000/stop"); r.code != http.StatusNotFound {
		t.Errorf("stop an unknown trial: %s %s, want 404", r.status, r.body)
	}
	readOnly := serveDashboard(t, dashboard.New(dashCtx(t), e.bus, dashboard.Config{Log: testLog(t)})).URL
	if r := post(t, readOnly+"/api/experiments/"+e.name+"/trials/"+first+"/stop"); r.code != http.StatusForbidden {
		t.Errorf("stop a trial without --allow-actions: %s %s, want 403", r.status, r.body)
	}
	if r := post(t, url+"/trials/"+first+"/stop"); r.code != http.StatusAccepted {
		t.Fatalf("stop trial %s: %s %s, want 202", first, r.status, r.body)
	}
	bustest.Eventually(t, time.Minute, "the stopped trial TERMINATED", func() bool {
		r := rows()[1]
		return r.Status == "TERMINATED" && r.EndReason == "stopped"
	})
	e.next(t, 2) // the other trial still runs and reports
	if r := rows()[2]; r.Status != "RUNNING" {
		t.Errorf("the other trial is %s, want RUNNING", r.Status)
	}
	if r := post(t, url+"/trials/"+first+"/stop"); r.code != http.StatusConflict {
		t.Errorf("stop a trial that ended: %s %s, want 409", r.status, r.body)
	}
}

// TestCurvesOfAnyMetric: a reader chooses the curves' metric and x axis
// (?metric=, ?x=); the points are then (x, metric) of each result, and
// the summary lists the numeric fields there are to choose from.
func TestCurvesOfAnyMetric(t *testing.T) {
	e := startStepped(t, "")
	url := e.dash.URL + "/api/experiments/" + e.name
	bustest.Eventually(t, time.Minute, "a trial at iteration 1", func() bool {
		r := get(t, http.DefaultClient, url)
		var u experimentJSON
		return r.code == http.StatusOK && json.Unmarshal([]byte(r.body), &u) == nil && len(u.Trials) == len(xs) && trialOf(u, 1).Iteration >= 1
	})
	e.next(t, 1)
	bustest.Eventually(t, time.Minute, "iteration 2", func() bool {
		var u experimentJSON
		getJSON(t, url, &u)
		return trialOf(u, 1).Iteration == 2
	})
	var u experimentJSON
	getJSON(t, url+"?metric=time_this_iter_s&x=time_total_s", &u)
	if !slices.Contains(u.Experiment.Metrics, "loss") || !slices.Contains(u.Experiment.Metrics, "time_total_s") {
		t.Errorf("metrics to choose from: %v; want loss and time_total_s among them", u.Experiment.Metrics)
	}
	if u.Experiment.CurveMetric != "time_this_iter_s" || u.Experiment.CurveX != "time_total_s" {
		t.Errorf("curve %s against %s, want time_this_iter_s against time_total_s", u.Experiment.CurveMetric, u.Experiment.CurveX)
	}
	pts := trialOf(u, 1).Points
	if len(pts) != 2 {
		t.Fatalf("points %v, want one per result", pts)
	}
	// time_total_s sums time_this_iter_s: the second x is the first plus
	// the second y.
	if math.Abs(pts[1][0]-(pts[0][0]+pts[1][1])) > 1e-6 || pts[0][0] <= 0 {
		t.Errorf("points %v are not (time_total_s, time_this_iter_s) of the results", pts)
	}
	getJSON(t, url, &u)
	if pts := trialOf(u, 1).Points; len(pts) != 2 || pts[0] != [2]float64{1, 1} || pts[1] != [2]float64{2, 0.5} {
		t.Errorf("default curve %v, want loss by iteration (1, 1), (2, 0.5)", pts)
	}
	if r := get(t, http.DefaultClient, url+"?x=bogus"); r.code != http.StatusBadRequest || !strings.Contains(r.body, "time_total_s") {
		t.Errorf("x=bogus: %s %s, want 400 naming the axes", r.status, r.body)
	}
}
