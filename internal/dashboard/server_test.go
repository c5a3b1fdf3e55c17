package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/dashboard"
)

// emptyDashboard serves the dashboard of an empty log.
func emptyDashboard(t *testing.T, token string) *httptest.Server {
	t.Helper()
	srv := bustest.Start(t)
	ts := httptest.NewServer(dashboard.New(t.Context(), srv.Bus("tunejet/dashboard-test"), dashboard.Config{Token: token, Log: testLog(t)}).Handler())
	t.Cleanup(ts.Close)
	return ts
}

// reply is a response, read whole.
type reply struct {
	code    int
	status  string
	header  http.Header
	cookies []*http.Cookie
	body    string
}

func get(t *testing.T, c *http.Client, url string, hdr ...string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
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
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{code: resp.StatusCode, status: resp.Status, header: resp.Header, cookies: resp.Cookies(), body: string(body)}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	r := get(t, http.DefaultClient, url)
	if r.code != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, r.status, r.body)
	}
	if err := json.Unmarshal([]byte(r.body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, r.body)
	}
}

func TestUnknownExperimentIs404(t *testing.T) {
	ts := emptyDashboard(t, "")
	for _, name := range []string{"nope", "not.a.name", "%2A"} {
		for _, path := range []string{"/api/experiments/" + name, "/api/experiments/" + name + "/events"} {
			r := get(t, http.DefaultClient, ts.URL+path)
			if r.code != http.StatusNotFound || !strings.Contains(r.body, "no experiment named") {
				t.Errorf("GET %s: %s %s; want 404 saying there is no such experiment", path, r.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("GET %s: Content-Type %q, want application/json", path, ct)
			}
		}
	}
	var list struct {
		Experiments []dashboard.Summary `json:"experiments"`
	}
	getJSON(t, ts.URL+"/api/experiments", &list)
	if list.Experiments == nil || len(list.Experiments) != 0 {
		t.Errorf("experiments of an empty log: %+v, want an empty list", list.Experiments)
	}
}

func TestSecurityHeaders(t *testing.T) {
	ts := emptyDashboard(t, "")
	want := map[string]string{
		"X-Content-Type-Options": "nosniff",
		"X-Frame-Options":        "DENY",
		"Referrer-Policy":        "no-referrer",
	}
	for _, path := range []string{"/", "/experiments/x", "/static/app.js", "/api/experiments", "/api/experiments/nope", "/nothing/here"} {
		r := get(t, http.DefaultClient, ts.URL+path)
		for k, v := range want {
			if got := r.header.Get(k); got != v {
				t.Errorf("GET %s: %s = %q, want %q", path, k, got, v)
			}
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q, want default-src 'self'", path, csp)
		}
	}
	r := get(t, http.DefaultClient, ts.URL+"/")
	if r.code != http.StatusOK || !strings.Contains(r.body, "/static/app.js") {
		t.Errorf("GET /: %s, want the page loading /static/app.js:\n%s", r.status, r.body)
	}
	if strings.Contains(r.body, "<script>") || strings.Contains(r.body, "style=") {
		t.Error("the page has inline script or style, which its Content-Security-Policy blocks")
	}
}

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8265", "", true},
		{"localhost:0", "", true},
		{"[::1]:8265", "", true},
		{"127.0.0.2:8265", "", true},
		{"0.0.0.0:8265", "", false},
		{":8265", "", false},
		{"[::]:8265", "", false},
		{"192.168.1.2:8265", "", false},
		{"example.com:8265", "", false},
		{"0.0.0.0:8265", "secret", true},
		{"8265", "", false},
	} {
		err := dashboard.CheckAddr(tc.addr, tc.token)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%q, %q) = %v; want ok=%v", tc.addr, tc.token, err, tc.ok)
		}
		if err != nil && tc.token == "" && !strings.Contains(err.Error(), "token") && strings.Contains(tc.addr, ":") {
			t.Errorf("CheckAddr(%q): %v does not say a token is needed", tc.addr, err)
		}
	}
}

func TestTokenIsRequired(t *testing.T) {
	const token = "s3cret-token"
	ts := emptyDashboard(t, token)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	for _, path := range []string{"/", "/static/app.js", "/api/experiments", "/api/experiments/x/events", "/?token=wrong"} {
		r := get(t, noRedirect, ts.URL+path)
		if r.code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %s %s, want 401", path, r.status, r.body)
		}
		if r.header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: a refusal without the security headers", path)
		}
	}
	if r := get(t, noRedirect, ts.URL+"/api/experiments", "Authorization", "Bearer wrong"); r.code != http.StatusUnauthorized {
		t.Errorf("a wrong bearer token: %s %s, want 401", r.status, r.body)
	}
	if r := get(t, noRedirect, ts.URL+"/api/experiments", "Authorization", "Bearer "+token); r.code != http.StatusOK {
		t.Errorf("the bearer token: %s %s, want 200", r.status, r.body)
	}

	// ?token= sets the cookie and sends the browser on without it.
	r := get(t, noRedirect, ts.URL+"/experiments/x?token="+token+"&a=b")
	if r.code != http.StatusSeeOther || r.header.Get("Location") != "/experiments/x?a=b" {
		t.Fatalf("?token=: %s to %q, want 303 to /experiments/x?a=b", r.status, r.header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range r.cookies {
		cookie = c
	}
	if cookie == nil || cookie.Value != token || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("?token= set the cookie %+v; want the token, HttpOnly, SameSite=Strict", cookie)
	}
	if r := get(t, noRedirect, ts.URL+"/api/experiments", "Cookie", cookie.Name+"="+cookie.Value); r.code != http.StatusOK {
		t.Errorf("with the cookie: %s %s, want 200", r.status, r.body)
	}
}

// experimentJSON is the experiment endpoint's answer.
type experimentJSON struct {
	Experiment dashboard.Summary    `json:"experiment"`
	Trials     []dashboard.TrialRow `json:"trials"`
}

// trialOf finds the trial of x.
func trialOf(u experimentJSON, x float64) *dashboard.TrialRow {
	for i, r := range u.Trials {
		if r.Config["x"] == x {
			return &u.Trials[i]
		}
	}
	return nil
}

func TestExperimentJSONAndLiveStream(t *testing.T) {
	e := startStepped(t, "")

	// Both trials report their first result.
	var u experimentJSON
	bustest.Eventually(t, 20*time.Second, "both trials report", func() bool {
		r := get(t, http.DefaultClient, e.dash.URL+"/api/experiments/"+e.name)
		if r.code != http.StatusOK {
			return false
		}
		u = experimentJSON{}
		if err := json.Unmarshal([]byte(r.body), &u); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range u.Trials {
			if len(r.Points) == 1 {
				n++
			}
		}
		return n == len(xs)
	})
	if u.Experiment.Name != e.name || u.Experiment.Status != "RUNNING" || u.Experiment.Metric != "loss" || u.Experiment.Counts["RUNNING"] != len(xs) {
		t.Errorf("experiment %+v; want %s RUNNING on loss with %d running trials", u.Experiment, e.name, len(xs))
	}
	for _, x := range xs {
		r := trialOf(u, x)
		if r == nil {
			t.Fatalf("no trial of x=%v in %+v", x, u.Trials)
		}
		if r.Status != "RUNNING" || r.Iteration != 1 || r.Attempt < 1 || r.Last == nil || *r.Last != x || r.Points[0] != [2]float64{1, x} {
			t.Errorf("trial of x=%v: %+v; want RUNNING at iteration 1, loss %v", x, r, x)
		}
	}

	var list struct {
		Experiments []dashboard.Summary `json:"experiments"`
	}
	getJSON(t, e.dash.URL+"/api/experiments", &list)
	if len(list.Experiments) != 1 || list.Experiments[0].Name != e.name || list.Experiments[0].NumTrials != len(xs) {
		t.Errorf("experiments: %+v; want %s with %d trials", list.Experiments, e.name, len(xs))
	}

	// A subscriber gets the whole experiment, then the next result of a
	// trial as it is reported.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.dash.URL+"/api/experiments/"+e.name+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("event stream Content-Type %q", ct)
	}
	updates := sseUpdates(t, resp.Body)
	first := <-updates
	if len(first.Trials) != len(xs) || trialOf(first, xs[0]) == nil || trialOf(first, xs[0]).PointsFrom != 0 {
		t.Fatalf("first update %+v; want every trial with its whole curve", first)
	}
	was := trialOf(first, xs[0]).Points

	e.next(t, xs[0])
	for {
		var u experimentJSON
		select {
		case u = <-updates:
		case <-ctx.Done():
			t.Fatal("no update with the trial's second result")
		}
		r := trialOf(u, xs[0])
		if r == nil || len(r.Points) == 0 {
			continue
		}
		if trialOf(u, xs[1]) != nil {
			t.Errorf("an update of x=%v's result carries the trial of x=%v, which did not change", xs[0], xs[1])
		}
		if r.PointsFrom != len(was) || r.Points[0] != [2]float64{2, xs[0] / 2} {
			t.Fatalf("update of x=%v: points from %d: %v; want the point (2, %v) from %d", xs[0], r.PointsFrom, r.Points, xs[0]/2, len(was))
		}
		break
	}
}

// sseUpdates decodes the "update" events of a stream.
func sseUpdates(t *testing.T, body io.Reader) <-chan experimentJSON {
	out := make(chan experimentJSON, 16)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(nil, 1<<24)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "update":
				var u experimentJSON
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &u); err != nil {
					t.Errorf("update %s: %v", line, err)
					return
				}
				out <- u
			}
		}
	}()
	return out
}
