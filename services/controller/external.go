package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/tpe"
	"github.com/tunejet/tunejet/internal/tuning"
)

// Asking an external searcher again after a failure waits this long at
// first, twice as long after each further failure, at most externalMaxWait.
const (
	externalFirstWait = 250 * time.Millisecond
	externalMaxWait   = 5 * time.Second
	// externalLogEvery is how often a searcher that keeps failing is logged.
	externalLogEvery = 30 * time.Second
)

// externalSearcher asks an external searcher (search_alg external) for
// the config of the next trial. The request runs beside the reconcile
// loop, which keeps folding and holding the lease while it waits; its
// answer comes back on answers. While the searcher is down or answers
// nothing usable, the experiment waits and the searcher is asked again.
type externalSearcher struct {
	cfg   tuning.ExternalConfig
	bus   *bus.Bus
	log   zerolog.Logger
	space *search.Space
	// paramSpace is the space as the spec gives it, sent in each request.
	paramSpace map[string]any
	answers    chan askResult // one request at a time, so one slot

	asking  bool
	ready   *Suggestion // the last config received, until its trial is created
	nextTry time.Time
	wait    time.Duration
	// failures counts the failed requests since the last answer;
	// unlogged those since the last log line.
	failures, unlogged int
	lastLog            time.Time
	lastErr            string // the failure logged last
}

type askResult struct {
	sg  *Suggestion
	err error
}

// errRefused marks a reply whose config is not valid for the space.
var errRefused = errors.New("refused the searcher's config")

func newExternalSearcher(b *bus.Bus, cfg tuning.ExternalConfig, st *state.Experiment, space *search.Space, log zerolog.Logger) *externalSearcher {
	return &externalSearcher{
		cfg: cfg, bus: b, space: space, paramSpace: st.Spec.ParamSpace, answers: make(chan askResult, 1),
		log: log.With().Str("searcher", cfg.Subject).Logger(),
	}
}

// replies is where the answers arrive; nil (never ready) without an
// external searcher.
func (x *externalSearcher) replies() <-chan askResult {
	if x == nil {
		return nil
	}
	return x.answers
}

// suggestion returns the config received for trial st.NextIndex, if any.
// Otherwise, when want says Decide would create that trial, it asks for
// it, unless a request is under way or the wait after a failure is not
// over.
func (x *externalSearcher) suggestion(ctx context.Context, st *state.Experiment, want bool) *Suggestion {
	if x.ready != nil && x.ready.Index == st.NextIndex {
		return x.ready
	}
	x.ready = nil
	if !want || x.asking || time.Now().Before(x.nextTry) {
		return nil
	}
	x.asking = true
	req := suggestRequest(st)
	go func() { x.answers <- x.ask(ctx, req) }()
	return nil
}

// suggestRequest is the request for trial st.NextIndex: the history is
// TPE's (tpeHistory), as of the last event folded.
func suggestRequest(st *state.Experiment) api.SuggestRequest {
	tc := st.Spec.TuneConfig
	req := api.SuggestRequest{
		Experiment: st.Name, Index: st.NextIndex, TrialID: search.TrialID(st.TrialIDPrefix, st.NextIndex), Seed: st.Seed,
		ParamSpace: st.Spec.ParamSpace, Metric: tc.Metric, Mode: tc.Mode, History: []api.SearchTrial{}, Seq: st.LastSeq,
	}
	for _, t := range tpeHistory(st) {
		h := api.SearchTrial{Index: t.Number, State: string(t.State), Config: t.Config, Step: t.Step}
		if t.State != tpe.Running {
			h.Value = &t.Value
		}
		req.History = append(req.History, h)
	}
	return req
}

// ask sends one request and checks the config of the reply.
func (x *externalSearcher) ask(ctx context.Context, req api.SuggestRequest) askResult {
	ctx, cancel := context.WithTimeout(ctx, x.cfg.Timeout)
	defer cancel()
	var reply api.SuggestReply
	if err := x.bus.Request(ctx, x.cfg.Subject, req, &reply); err != nil {
		return askResult{err: err}
	}
	if err := reply.Err(); err != nil {
		return askResult{err: fmt.Errorf("the searcher answered an error (%s): %w", api.CodeOf(err), err)}
	}
	config, err := tuning.SuggestedConfig(x.paramSpace, x.space, reply.Config)
	if err != nil {
		return askResult{err: fmt.Errorf("%w for trial %d: not a config of the param space: %w", errRefused, req.Index, err)}
	}
	return askResult{sg: &Suggestion{Index: req.Index, Config: config, Seq: req.Seq}}
}

// answered takes a request's result: a config to use, or a failure to log
// and to ask again after. A searcher that did not answer is asked again
// after a wait that doubles up to externalMaxWait; one that answered
// something unusable, after externalFirstWait. A failure is logged when it
// differs from the last one logged, else once every externalLogEvery.
func (x *externalSearcher) answered(ctx context.Context, res askResult) {
	x.asking = false
	if res.err == nil {
		if x.failures > 0 {
			x.log.Info().Int("failures", x.failures).Msg("the external searcher answered again")
		}
		x.ready, x.failures, x.unlogged, x.wait, x.lastErr = res.sg, 0, 0, 0, ""
		return
	}
	if ctx.Err() != nil {
		return // stopping
	}
	x.failures++
	x.unlogged++
	var answered *api.Error
	refused := errors.Is(res.err, errRefused)
	if refused || errors.As(res.err, &answered) {
		x.wait = externalFirstWait
	} else {
		x.wait = min(max(2*x.wait, externalFirstWait), externalMaxWait)
	}
	x.nextTry = time.Now().Add(x.wait)
	if res.err.Error() == x.lastErr && time.Since(x.lastLog) < externalLogEvery {
		return
	}
	msg := "the external searcher did not answer; the experiment waits and asks again"
	switch {
	case refused:
		msg = "refused the external searcher's config; the experiment waits and asks again"
	case answered != nil:
		msg = "the external searcher answered no config; the experiment waits and asks again"
	}
	x.log.Warn().Err(res.err).Int("failures", x.unlogged).Dur("timeout", x.cfg.Timeout).Msg(msg)
	x.lastLog, x.lastErr, x.unlogged = time.Now(), res.err.Error(), 0
}
