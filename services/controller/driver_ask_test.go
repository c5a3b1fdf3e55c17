package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/state"
)

// A searcher that had no config (a wait) when asked is asked again once
// the log has moved past what it was asked with, even when the log moved
// while the question was on its way: the event that changes its answer
// may be the one folded meanwhile.
func TestDriverAskerAsksAgainAfterAWait(t *testing.T) {
	srv := bustest.Start(t)
	var asked atomic.Int32
	stop, err := srv.Bus("client").ServeDriver(t.Context(), "exp", func(context.Context, events.DriverQuestion) bus.DriverReply {
		asked.Add(1)
		return bus.DriverReply{Answer: bus.DriverAnswer{Wait: true}}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	st := state.New("exp")
	st.Status = state.ExperimentRunning
	st.Spec = &events.ExperimentSpec{Name: "exp", Trainable: events.Trainable{Name: "fn"}, Driver: &events.DriverSpec{Searcher: "S"},
		TuneConfig: events.TuneConfig{NumSamples: 3}}
	st.NumTrials, st.LastSeq = 3, 10
	d := newDriverAsker(srv.Bus("controller"), "exp", nil, zerolog.Nop())
	ctx := t.Context()
	d.ask(ctx, st, true)
	var res driverResult
	select {
	case res = <-d.replies():
	case <-time.After(askWait):
		t.Fatal("no reply")
	}
	st.LastSeq = 11 // an event folded while the question was on its way
	d.answered(ctx, st, res)
	d.ask(ctx, st, true)
	select {
	case res = <-d.replies():
	case <-time.After(askWait):
		t.Fatalf("asked %d times; want the searcher asked again, the log having moved past the question", asked.Load())
	}
	// Not again before the log moves on.
	d.answered(ctx, st, res)
	d.ask(ctx, st, true)
	if d.asking {
		t.Fatal("asked again with the log where it was")
	}
}

// askWait bounds a wait for the driver's reply.
const askWait = 15 * time.Second

// An explore answer (no index: it is about a trial, not a new one) waits
// to be published while the fold holds its question, then is dropped.
func TestDriverAskerHoldsAnExploreAnswerUntilTheLogHasIt(t *testing.T) {
	st := state.New("exp")
	st.Judge = &state.Judge{Asks: []state.Ask{{Key: "explore/t0/3", TrialID: "t0", Explore: true}}}
	d := newDriverAsker(nil, "exp", nil, zerolog.Nop())
	d.ready = &events.DriverAnswered{DriverQuestion: events.DriverQuestion{Key: "explore/t0/3", Method: events.DriverExplore, TrialID: "t0"}}
	if d.answer(st) == nil {
		t.Fatal("the answer was dropped while its question is open")
	}
	st.Judge.Asks = nil
	if d.answer(st) != nil {
		t.Fatal("the answer is kept once the log holds it")
	}
}
