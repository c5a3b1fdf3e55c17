package tune_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/session"
	"github.com/tunejet/tunejet/tune"
)

// TestClientStopsOneTrial: a client's trial.stop_requested (tunejet stop
// --trial, the dashboard) stops that trial alone: the controller asks its
// runner, the trial ends TERMINATED with reason "stopped", and the others
// go on to finish. A request about a trial that has ended changes nothing.
func TestClientStopsOneTrial(t *testing.T) {
	forever := func(ctx context.Context, config map[string]any) error {
		for i := 1; ; i++ {
			if x, _ := config["x"].(float64); x == 2 && i > 3 {
				return nil
			}
			if err := tune.Report(ctx, map[string]any{"i": i}); err != nil {
				if errors.Is(err, session.ErrStopped) {
					return nil
				}
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(10 * time.Millisecond): // a trainable's pace, not a wait for the test
			}
		}
	}
	d := startDeployment(t, 2, map[string]tune.Trainable{"forever": forever})
	const exp = "userstop"
	done := make(chan *tune.ResultGrid, 1)
	go func() {
		done <- d.fit(t, "forever", tune.WithName(exp), tune.WithRunConfig(storage(t)),
			tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1.0, 2.0)}))
	}()
	ids := map[float64]string{}
	var finished string
	bustest.Eventually(t, time.Minute, "trial x=1 reporting and x=2 finished", func() bool {
		reported := map[string]int{}
		for _, ev := range d.events(t, exp) {
			switch p := ev.Data.(type) {
			case *events.TrialCreated:
				x, _ := p.Config["x"].(float64)
				ids[x] = p.TrialID
			case *events.TrialReported:
				reported[p.TrialID] += len(p.Results())
			case *events.TrialCompleted:
				finished = p.TrialID
			}
		}
		return reported[ids[1]] >= 2 && finished == ids[2] && finished != ""
	})
	for _, id := range []string{ids[2], ids[1]} { // the finished one first: nothing to do
		ev := d.bus.Event(exp, events.WriterClient, &events.TrialStopRequested{TrialID: id, Reason: "stopped by the user"})
		if _, err := d.bus.Publish(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	g := <-done
	for _, r := range g.Results() {
		if r.Status != events.StatusTerminated {
			t.Errorf("trial %s is %s, want TERMINATED", r.TrialID, r.Status)
		}
		want := map[string]string{ids[1]: "stopped", ids[2]: "finished"}[r.TrialID]
		if r.EndReason != want {
			t.Errorf("trial %s ended %q, want %q", r.TrialID, r.EndReason, want)
		}
	}
	var controllerStops []string
	for _, ev := range d.events(t, exp) {
		if p, ok := ev.Data.(*events.TrialStopRequested); ok && ev.Writer == events.WriterController {
			controllerStops = append(controllerStops, p.TrialID)
		}
	}
	if len(controllerStops) != 1 || controllerStops[0] != ids[1] {
		t.Errorf("the controller asked to stop %v; want the running trial %s alone", controllerStops, ids[1])
	}
}
