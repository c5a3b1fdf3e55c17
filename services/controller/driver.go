package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"
)

// A question to the driver times out after driverTimeout (the user's
// code may take its time; the driver answers a question asked again from
// its cache); asking again after a failure waits as for an external
// searcher.
const driverTimeout = 60 * time.Second

// driverAsker asks the experiment's driver (spec driver section;
// docs/driver.md) the questions the fold holds open: whether each result
// waiting for the driver's stopper stops its trial, oldest first, then the
// config of the next trial when Decide would create it. One question at a
// time, beside the reconcile loop, like an external searcher. An answer
// is published as driver.answered before anything acts on it: the fold
// takes it from the log, and a restore replays it instead of asking again.
// While no driver answers, the experiment waits.
type driverAsker struct {
	bus     *bus.Bus
	exp     string
	space   *search.Space
	log     zerolog.Logger
	answers chan driverResult // one question at a time, so one slot

	asking bool
	ready  *events.DriverAnswered // an answer to publish
	// waitIndex and waitSeq: the searcher had no config for trial
	// waitIndex when it had seen the log up to waitSeq; it is asked again
	// once the log moves on.
	waitIndex      int
	waitSeq        uint64
	nextTry        time.Time
	wait           time.Duration
	failures       int
	lastLog        time.Time
	lastErr        string
	noDriverWarned bool
}

type driverResult struct {
	q     events.DriverQuestion
	reply bus.DriverReply
	err   error
}

func newDriverAsker(b *bus.Bus, exp string, space *search.Space, log zerolog.Logger) *driverAsker {
	return &driverAsker{bus: b, exp: exp, space: space, answers: make(chan driverResult, 1), waitIndex: -1, log: log.With().Str("component", "driver").Logger()}
}

// replies is where the answers arrive; nil (never ready) without a
// driver.
func (d *driverAsker) replies() <-chan driverResult {
	if d == nil {
		return nil
	}
	return d.answers
}

// answer returns the answer to publish, if one came, and forgets it once
// the log holds it.
func (d *driverAsker) answer(st *state.Experiment) *events.DriverAnswered {
	if d.ready != nil && answeredAlready(st, d.ready) {
		d.ready = nil
	}
	return d.ready
}

// answeredAlready reports whether the fold holds no question for a's key
// any more.
func answeredAlready(st *state.Experiment, a *events.DriverAnswered) bool {
	if a.Method == events.DriverSuggest || a.Method == events.DriverSample {
		return st.Suggested != nil || *a.Index != st.NextIndex || (st.NumTrials >= 0 && st.NumTrials <= *a.Index)
	}
	for _, ask := range st.DriverAsks() {
		if ask.Key == a.Key {
			return false
		}
	}
	return true
}

// ask asks the next open question, unless one is under way, an answer
// waits to be published or the wait after a failure is not over. want
// says whether Decide would create trial st.NextIndex now.
func (d *driverAsker) ask(ctx context.Context, st *state.Experiment, want bool) {
	if d.asking || d.ready != nil || time.Now().Before(d.nextTry) {
		return
	}
	q, ok := nextQuestion(st, d.space, want)
	if !ok || (q.Method == events.DriverSuggest && *q.Index == d.waitIndex && st.LastSeq <= d.waitSeq) {
		return
	}
	d.asking = true
	go func() {
		actx, cancel := context.WithTimeout(ctx, driverTimeout)
		defer cancel()
		reply, err := d.bus.AskDriver(actx, d.exp, q)
		d.answers <- driverResult{q: q, reply: reply, err: err}
	}()
}

// nextQuestion is the oldest result waiting for the driver's stopper, or
// else, when want, the config of trial st.NextIndex for the driver's
// searcher, or its sample_from values for the driver's functions.
func nextQuestion(st *state.Experiment, space *search.Space, want bool) (events.DriverQuestion, bool) {
	if asks := st.DriverAsks(); len(asks) > 0 {
		a := asks[0]
		if a.Explore {
			return events.DriverQuestion{Method: events.DriverExplore, Key: a.Key, Through: st.LastSeq, TrialID: a.TrialID, Config: a.Config, Resample: a.Resample}, true
		}
		return events.DriverQuestion{Method: events.DriverStop, Key: a.Key, Through: st.LastSeq, TrialID: a.TrialID, Result: a.Result}, true
	}
	if !want || st.Suggested != nil {
		return events.DriverQuestion{}, false
	}
	i := st.NextIndex
	q := events.DriverQuestion{Through: st.LastSeq, TrialID: search.TrialID(st.TrialIDPrefix, i), Index: &i}
	switch {
	case st.Spec.Driver.Searches():
		q.Method, q.Key = events.DriverSuggest, state.SuggestKey(i)
	case space != nil && len(space.SampledByDriver()) > 0:
		q.Method, q.Key, q.Config = events.DriverSample, state.SampleKey(i), driverSample(st, space, i)
	default:
		return events.DriverQuestion{}, false
	}
	return q, true
}

// answered takes a reply: an answer to publish, a "wait" to ask again
// after, or a failure to log and ask again after.
func (d *driverAsker) answered(ctx context.Context, st *state.Experiment, res driverResult) {
	d.asking = false
	if res.err == nil {
		if d.failures > 0 || d.noDriverWarned {
			d.log.Info().Int("failures", d.failures).Msg("the driver answers again")
		}
		d.failures, d.wait, d.lastErr, d.noDriverWarned = 0, 0, "", false
		if res.reply.Answer.Wait && res.q.Method == events.DriverSuggest {
			// Asked again once the log moves past what the searcher saw:
			// an event folded while the question was on its way counts.
			d.waitIndex, d.waitSeq = *res.q.Index, res.q.Through
			return
		}
		if err := d.usable(res); err != nil {
			res.err = err
			d.failed(ctx, res)
			return
		}
		q := res.q
		d.ready = &events.DriverAnswered{DriverQuestion: q, Answer: res.reply.Answer.DriverAnswer, By: res.reply.By}
		if q.Method == events.DriverStop {
			for _, a := range st.DriverAsks() {
				if a.Key == q.Key {
					d.ready.ResultSeq = a.ResultSeq
				}
			}
		}
		return
	}
	d.failed(ctx, res)
}

// usable checks that a reply answers its question: a sample gives every
// sample_from domain a value, a suggestion is a config or FINISHED.
func (d *driverAsker) usable(res driverResult) error {
	a := res.reply.Answer
	switch res.q.Method {
	case events.DriverSample:
		if a.Config == nil {
			return fmt.Errorf("the driver's answer to %s has no config", res.q.Key)
		}
		if err := d.space.TakeSampled(search.CopyValue(res.q.Config).(map[string]any), a.Config); err != nil {
			return fmt.Errorf("the driver's answer to %s: %w", res.q.Key, err)
		}
	case events.DriverExplore:
		if a.Config == nil {
			return fmt.Errorf("the driver's answer to %s has no config", res.q.Key)
		}
	case events.DriverSuggest:
		if a.Config == nil && !a.Finished {
			return fmt.Errorf("the driver's answer to %s is neither a config nor FINISHED", res.q.Key)
		}
	}
	return nil
}

// failed logs a question that got no usable answer and sets when to ask
// again.
func (d *driverAsker) failed(ctx context.Context, res driverResult) {
	if ctx.Err() != nil {
		return // stopping
	}
	d.failures++
	d.wait = min(max(2*d.wait, externalFirstWait), externalMaxWait)
	d.nextTry = time.Now().Add(d.wait)
	if errors.Is(res.err, bus.ErrNoDriver) {
		if !d.noDriverWarned {
			d.log.Warn().Str("question", res.q.Key).Msg("no driver serves the experiment; it waits for one (Tuner.restore(...).fit() attaches one)")
			d.noDriverWarned = true
		}
		return
	}
	if res.err.Error() == d.lastErr && time.Since(d.lastLog) < externalLogEvery {
		return
	}
	d.log.Warn().Err(res.err).Str("question", res.q.Key).Int("failures", d.failures).Msg("the driver did not answer; the experiment waits and asks again")
	d.lastLog, d.lastErr = time.Now(), res.err.Error()
}
