package controller_test

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// The equivalence test with an external searcher (search_alg external):
// the script of TestTunerDecidesTheSameAfterACrash, with ASHA, whose
// configs come from a searcher answering on NATS. At each cut the searcher
// is replaced by a fresh one that lost its memory and answers differently
// for the same trial (its answers are salted with a seed of its own), as
// a searcher restarted after a crash would.
//
// What "the same" means here. The configs of the trials created after a
// cut are the new searcher's, so they may differ from the uninterrupted
// run's, and so may the results and decisions that follow from them. What
// must hold, and is asserted:
//
//   - Up to the first cut the run is the uninterrupted one: the decisions
//     and trial.created events the test had folded when it cut are those
//     of the uninterrupted run, byte for byte (as in the other cases).
//   - A trial created before a cut keeps its recorded config: the new
//     searcher is never asked for it (nor for any index the log already
//     holds), and no trial is created twice. Every trial's config is one
//     a searcher answered for its index.
//   - The whole run — every decision and every config, before and after
//     the cuts — is byte for byte what an uninterrupted run decides whose
//     searcher answers, for each trial, the config the cut run's log
//     records ("continue with the same later results": the results are a
//     function of the configs). So the controller's own state, rebuilt
//     from the log, lost nothing the searcher forgot.
//   - The replaced searchers did answer differently: some trial created
//     after a cut has a config other than the uninterrupted run's.
func TestExternalSearcherDecidesTheSameAfterACrash(t *testing.T) {
	c := externalCase
	srv := bustest.Start(t)
	want := newExternalPlay(t, srv, c, c.name+"-uninterrupted", uninterrupted, nil, 0).run()
	requireStops(t, want)
	h := fnv.New64a()
	_, _ = h.Write([]byte(c.name))
	rng := rand.New(rand.NewPCG(equivalenceSeed, h.Sum64()))
	differed, replay := 0, 0
	for _, v := range []variant{kill, restoreFromCheckpoint, restoreFrom1} {
		for i := range externalReplays[v] {
			replay++
			cuts := cutPoints(rng, want.events, equivalenceCutsPerReplay)
			t.Run(fmt.Sprintf("%s-%d", v, i), func(t *testing.T) {
				exp := fmt.Sprintf("%s-%s-%d", c.name, v, i)
				p := newExternalPlay(t, srv, c, exp, v, cuts, 1000*replay)
				got := p.run()
				where := fmt.Sprintf("seed %d, cuts after events %v", equivalenceSeed, cuts)
				first := p.marks[0]
				if diff := cmp.Diff(prefix(want.decisions, first.decided), prefix(got.decisions, first.decided)); diff != "" {
					t.Errorf("%s: the decisions before the first cut differ (-uninterrupted +%s):\n%s", where, v, diff)
				}
				if diff := cmp.Diff(prefix(want.created, first.created), prefix(got.created, first.created)); diff != "" {
					t.Errorf("%s: the trials created before the first cut differ (-uninterrupted +%s):\n%s", where, v, diff)
				}
				configs := p.configs()
				p.ext.check(t, where, configs, p.marks)

				// The same run uninterrupted, its searcher answering the
				// configs the cut run recorded.
				again := newExternalPlay(t, srv, c, exp+"-playback", uninterrupted, nil, 0)
				again.ext.playback = configs
				replayed := again.run()
				if diff := cmp.Diff(replayed.decisions, got.decisions); diff != "" {
					t.Errorf("%s: the decisions differ from an uninterrupted run given the same configs (-uninterrupted +%s):\n%s", where, v, diff)
				}
				if diff := cmp.Diff(replayed.created, got.created); diff != "" {
					t.Errorf("%s: the trials created differ from an uninterrupted run given the same configs (-uninterrupted +%s):\n%s", where, v, diff)
				}
				for k, created := range got.created {
					if k >= first.created && (k >= len(want.created) || created != want.created[k]) {
						differed++
					}
				}
			})
		}
	}
	t.Logf("%d of the trials created after a first cut have a config other than the uninterrupted run's", differed)
	if differed == 0 {
		t.Error("no trial created after a cut has a config other than the uninterrupted run's: the fresh searchers were not tested")
	}
}

// externalCase is ASHA over an external searcher's configs.
var externalCase = equivalenceCase{name: "external", trials: 8, iters: 8, searcher: "external", tune: func(sp *events.ExperimentSpec) {
	sp.TuneConfig.Scheduler = "asha"
	sp.TuneConfig.SchedulerConfig = map[string]any{"grace_period": 1.0, "reduction_factor": 2.0, "max_t": 8.0}
}}

// externalReplays is how many times each variant replays the external
// case; each replay is run again uninterrupted with the configs it
// recorded.
var externalReplays = map[variant]int{kill: 3, restoreFromCheckpoint: 2, restoreFrom1: 2}

// externalTimeout is the controller's wait for the searcher's answer.
const externalTimeout = 5 * time.Second

func newExternalPlay(t *testing.T, srv *bustest.Server, c equivalenceCase, exp string, v variant, cuts []int, seedBase int) *play {
	p := newPlay(t, srv, c, exp, v, cuts)
	p.ext = newSuggester(t, srv.Conn(), "test.equivalence."+exp, seedBase)
	return p
}

// prefix is the first n of s, or all of s when it is shorter.
func prefix(s []string, n int) []string { return s[:min(n, len(s))] }

// A cutMark is what the test's fold held when it cut.
type cutMark struct {
	decided, created int // trial.decided and trial.created events
	nextIndex        int // the next trial's index
}

func (p *play) mark() cutMark {
	m := cutMark{nextIndex: p.st.NextIndex}
	for _, ev := range p.log {
		switch ev.Data.(type) {
		case *events.TrialDecided:
			m.decided++
		case *events.TrialCreated:
			m.created++
		}
	}
	return m
}

// configs are the trials' configs by index, as the log records them.
func (p *play) configs() map[int]map[string]any {
	out := map[int]map[string]any{}
	for _, ev := range p.log {
		if c, ok := ev.Data.(*events.TrialCreated); ok {
			if _, twice := out[c.Index]; twice {
				p.t.Errorf("%s: trial %d created twice", p.exp, c.Index)
			}
			out[c.Index] = c.Config
		}
	}
	return out
}

// A suggester is the external searcher of a play: a NATS service in the
// test process answering suggest requests on subject. It keeps no memory
// between requests; replace stands a fresh one in its place, whose seed
// differs, so that it answers differently for the same request. With
// playback set it answers those configs instead, by index.
type suggester struct {
	nc       *nats.Conn
	subject  string
	seedBase int
	playback map[int]map[string]any

	mu   sync.Mutex
	sub  *nats.Subscription
	gen  int // 0 for the first searcher, then one more at each replace
	asks []ask
	fail []string // what a request got wrong
}

// ask is one request answered: by which searcher, for which trial, what.
type ask struct {
	gen    int
	index  int
	config map[string]any
}

func newSuggester(t *testing.T, nc *nats.Conn, subject string, seedBase int) *suggester {
	s := &suggester{nc: nc, subject: subject, seedBase: seedBase}
	s.subscribe(t)
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		_ = s.sub.Unsubscribe()
	})
	return s
}

func (s *suggester) subscribe(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gen := s.gen
	sub, err := s.nc.Subscribe(s.subject, func(m *nats.Msg) { s.answer(gen, m) })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	s.sub = sub
}

// replace stops the searcher and starts a fresh one.
func (s *suggester) replace(t *testing.T) {
	s.mu.Lock()
	_ = s.sub.Unsubscribe()
	s.gen++
	s.mu.Unlock()
	s.subscribe(t)
}

// seed is the seed of searcher gen: the first one's is 0 in every play,
// so that each replay is the uninterrupted run until its first cut.
func (s *suggester) seed(gen int) int {
	if gen == 0 {
		return 0
	}
	return s.seedBase + gen
}

func (s *suggester) answer(gen int, m *nats.Msg) {
	var req api.SuggestRequest
	reply := api.SuggestReply{}
	if err := json.Unmarshal(m.Data, &req); err != nil {
		reply = api.SuggestReply{Error: err.Error(), Code: api.CodeBadRequest}
	} else if s.playback != nil {
		reply.Config = s.playback[req.Index]
	} else {
		reply.Config = suggestFor(req, s.seed(gen))
	}
	s.mu.Lock()
	if reply.Config == nil && reply.Error == "" {
		s.fail = append(s.fail, fmt.Sprintf("asked for trial %d, which the run being played back never created", req.Index))
		reply = api.SuggestReply{Error: "no such trial", Code: api.CodeBadRequest}
	}
	s.asks = append(s.asks, ask{gen: gen, index: req.Index, config: reply.Config})
	s.mu.Unlock()
	data, _ := json.Marshal(reply)
	_ = m.Respond(data)
}

// suggestFor is a searcher's config for a request: x in [-4, 4] spread by
// the golden ratio over the trial's index, shifted by the seed; for an odd
// index once some trial has a value, next to the best value so far.
func suggestFor(req api.SuggestRequest, seed int) map[string]any {
	u := math.Mod(0.6180339887498949*float64(req.Index+1)+0.2719*float64(seed), 1)
	x := -4 + 8*u
	var best *api.SearchTrial
	for i, h := range req.History {
		if h.Value != nil && (best == nil || *h.Value < *best.Value) {
			best = &req.History[i]
		}
	}
	if best != nil && req.Index%2 == 1 {
		bx, _ := best.Config["x"].(float64)
		x = math.Min(4, math.Max(-4, bx+u-0.5))
	}
	return map[string]any{"x": x}
}

// check asserts that every trial's config is one a searcher answered for
// its index, and that no searcher started at a cut was asked for a trial
// the log held before the cut.
func (s *suggester) check(t *testing.T, where string, configs map[int]map[string]any, marks []cutMark) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.fail {
		t.Errorf("%s: %s", where, f)
	}
	answered := map[int][]map[string]any{}
	for _, a := range s.asks {
		answered[a.index] = append(answered[a.index], a.config)
		if a.gen > 0 && a.index < marks[a.gen-1].nextIndex {
			t.Errorf("%s: the searcher started at cut %d was asked for trial %d, created before the cut (%d trials then)", where, a.gen, a.index, marks[a.gen-1].nextIndex)
		}
	}
	for index, config := range configs {
		if !containsConfig(answered[index], config) {
			t.Errorf("%s: trial %d config %v is none of the searchers' answers for it %v", where, index, config, answered[index])
		}
	}
}
