package main_test

import (
	"strings"
	"testing"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// TestStopTrial: `tunejet stop NAME --trial ID` publishes a client's
// request to stop that trial (the controller carries it out; tune's
// TestClientStopsOneTrial runs it end to end) and refuses an experiment or
// a trial the log does not hold, naming it.
func TestStopTrial(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	url := srv.URL()
	b := srv.Bus("test")
	created := &events.TrialCreated{TrialID: "abcde_00000", TrialName: "f_abcde_00000", DirName: "f_abcde_00000", Config: map[string]any{"x": 1}}
	if _, err := b.Publish(t.Context(), b.Event("exp", events.WriterController, created)); err != nil {
		t.Fatal(err)
	}
	if r := tunejet(t, "", baseEnv(), "stop", "--nats", url, "nope", "--trial", "abcde_00000"); r.code != 1 || !strings.Contains(r.stderr, `no experiment named "nope"`) {
		t.Errorf("stop of an unknown experiment:\n%s", r)
	}
	if r := tunejet(t, "", baseEnv(), "stop", "--nats", url, "exp", "--trial", "abcde_00009"); r.code != 1 || !strings.Contains(r.stderr, `experiment exp has no trial "abcde_00009"`) {
		t.Errorf("stop of an unknown trial:\n%s", r)
	}
	r := tunejet(t, "", baseEnv(), "stop", "--nats", url, "exp", "--trial", "abcde_00000")
	if r.code != 0 || !strings.Contains(r.stdout, "Asked to stop trial abcde_00000 of exp.") {
		t.Fatalf("stop --trial:\n%s", r)
	}
	var got []*events.TrialStopRequested
	for _, ev := range replay(t, srv, "exp") {
		if p, ok := ev.Data.(*events.TrialStopRequested); ok && ev.Writer == events.WriterClient {
			got = append(got, p)
		}
	}
	if len(got) != 1 || got[0].TrialID != "abcde_00000" {
		t.Errorf("client stop requests in the log: %+v; want one for abcde_00000", got)
	}
}
