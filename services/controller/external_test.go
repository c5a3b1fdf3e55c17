package controller_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/services/controller"
)

// syncBuffer is a log sink the test reads while the controller writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// searcherProcess builds testdata/searcher and runs it against the server
// until the test ends; it returns once the searcher answers. Its stdout,
// one JSON line per reply, is in out.
func searcherProcess(t *testing.T, url, subject, bad string) (out *syncBuffer) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "searcher")
	if b, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./testdata/searcher").CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/searcher: %v\n%s", err, b)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	cmd := exec.CommandContext(ctx, bin, "-url", url, "-subject", subject, "-bad", bad)
	out = &syncBuffer{}
	cmd.Stdout = out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log(sc.Text())
			if sc.Text() == "searcher: ready" {
				ready <- true
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("the searcher exited before it was ready")
		}
	case <-time.After(wait):
		t.Fatal("the searcher was not ready in time")
	}
	return out
}

// reply is one line of the searcher's output.
type reply struct {
	Index  int            `json:"index"`
	Seq    uint64         `json:"seq"`
	Kind   string         `json:"kind"`
	Config map[string]any `json:"config"`
}

func replies(t *testing.T, out string) []reply {
	t.Helper()
	var rs []reply
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var r reply
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("searcher output: %v", err)
		}
		rs = append(rs, r)
	}
	return rs
}

// An external searcher in another process drives an experiment: while it
// is down the experiment waits (asking again, failing nothing); once it is
// up, its configs become the trials' and its bad replies are refused. A
// controller that takes over midway never asks for a trial already
// created.
func TestExternalSearcherInAnotherProcess(t *testing.T) {
	srv := bustest.Start(t)
	client := srv.Bus("client")
	logs := &syncBuffer{}
	b, err := bus.New(srv.Conn(), "controller", zerolog.New(io.MultiWriter(logs, zerolog.NewTestWriter(t))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- controller.New(b, controller.Config{Tick: 20 * time.Millisecond}).Run(ctx) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	t.Cleanup(stop)

	const subject, n = "test.searcher.suggest", 6
	sp := events.ExperimentSpec{
		Name: "ext", Trainable: events.Trainable{Name: "fn"},
		ParamSpace: map[string]any{"x": map[string]any{"uniform": []any{0.0, 10.0}}, "y": map[string]any{"uniform": []any{-1.0, 1.0}}, "k": "const"},
		TuneConfig: events.TuneConfig{NumSamples: n, MaxConcurrentTrials: 2, Metric: "loss", Mode: "min", SearchAlg: "external",
			SearchAlgConfig: map[string]any{"subject": subject, "timeout_s": 0.2}},
		RunConfig: events.RunConfig{StoragePath: t.TempDir()},
	}

	// The searcher is down: a subscriber that never answers sees the
	// controller ask for trial 0 and, after the timeout, ask again.
	nc := srv.Conn()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	submit(t, client, sp)
	var first api.SuggestRequest
	for i := range 2 {
		m, err := sub.NextMsg(wait)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if err := json.Unmarshal(m.Data, &first); err != nil {
			t.Fatal(err)
		}
	}
	if first.Experiment != "ext" || first.Index != 0 || first.TrialID == "" || len(first.History) != 0 || first.Seq == 0 ||
		first.Metric != "loss" || first.Mode != "min" || !cmp.Equal(first.ParamSpace, sp.ParamSpace) {
		t.Fatalf("request %+v", first)
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	evs := bustest.Log(t, client, "ext")
	if count(evs, events.TypeExperimentStarted) != 1 || count(evs, events.TypeTrialCreated) != 0 || count(evs, events.TypeExperimentCompleted) != 0 {
		t.Fatalf("while the searcher is down: %d started, %d created, %d completed; want 1, 0, 0",
			count(evs, events.TypeExperimentStarted), count(evs, events.TypeTrialCreated), count(evs, events.TypeExperimentCompleted))
	}

	// The searcher comes up, spoiling its first three replies.
	out := searcherProcess(t, srv.URL(), subject, "unknown_key,out_of_domain,error")
	w := newWorker(t, srv, "ext")
	for range n / 2 {
		w.runOne()
	}
	stop() // another controller takes over
	startController(t, srv, "controller-b")
	for range n - n/2 {
		w.runOne()
	}
	if c := completion(t, client, "ext"); c.Reason != "finished" {
		t.Fatalf("experiment completed with reason %q, want finished", c.Reason)
	}
	evs = bustest.Log(t, client, "ext")
	checkTrials(t, evs, n)

	created := map[int]uint64{} // index → the sequence of its trial.created
	for _, ev := range evs {
		if c, ok := ev.Data.(*events.TrialCreated); ok {
			created[c.Index] = ev.Seq
		}
	}
	good := map[int][]map[string]any{}
	var kinds []string
	for _, r := range replies(t, out.String()) {
		if r.Seq >= created[r.Index] {
			t.Errorf("asked for trial %d with the log at %d, after its trial.created at %d", r.Index, r.Seq, created[r.Index])
		}
		if r.Kind == "good" {
			r.Config["k"] = "const" // the space's constant
			good[r.Index] = append(good[r.Index], r.Config)
		} else {
			kinds = append(kinds, r.Kind)
		}
	}
	if diff := cmp.Diff([]string{"unknown_key", "out_of_domain", "error"}, kinds); diff != "" {
		t.Errorf("bad replies (-want +got):\n%s", diff)
	}
	for _, ev := range evs {
		c, ok := ev.Data.(*events.TrialCreated)
		if !ok {
			continue
		}
		if !containsConfig(good[c.Index], c.Config) {
			t.Errorf("trial %d config %v is none of the searcher's good replies for it %v", c.Index, c.Config, good[c.Index])
		}
		if c.SearcherSeq == 0 || c.SearcherSeq >= ev.Seq {
			t.Errorf("trial %d searcher_seq %d, want the sequence of an event before it (%d)", c.Index, c.SearcherSeq, ev.Seq)
		}
	}
	for _, want := range []string{
		"refused the external searcher's config",
		"config.momentum: not a key of param_space",
		"config.x: must be within the uniform domain's [0, 10], got 1e+06",
		"the searcher answered an error (internal): the study is not ready",
		"the external searcher answered again",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the controller's log does not say %q", want)
		}
	}
}

func containsConfig(configs []map[string]any, c map[string]any) bool {
	for _, g := range configs {
		if cmp.Equal(g, c) {
			return true
		}
	}
	return false
}
