package controller

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/internal/bus"
)

// A searcher that does not answer is asked again after longer and longer
// waits, one that answers badly soon again; a failure is logged when it
// changes, not each time it repeats.
func TestExternalSearcherWaitsAndLogs(t *testing.T) {
	var logs bytes.Buffer
	x := &externalSearcher{log: zerolog.New(&logs)}
	down := askResult{err: fmt.Errorf("request s: %w", bus.ErrNoResponders)}
	var waits []time.Duration
	for range 7 {
		x.answered(context.Background(), down)
		waits = append(waits, x.wait)
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	x.answered(context.Background(), askResult{err: fmt.Errorf("%w for trial 0: config.lr: bad", errRefused)})
	if x.wait != externalFirstWait {
		t.Errorf("wait after a refused config %v, want %v", x.wait, externalFirstWait)
	}
	x.answered(context.Background(), askResult{err: fmt.Errorf("answered: %w", &api.Error{Code: api.CodeInternal, Message: "busy"})})
	if x.wait != externalFirstWait {
		t.Errorf("wait after an error reply %v, want %v", x.wait, externalFirstWait)
	}
	x.answered(context.Background(), askResult{sg: &Suggestion{Index: 0}})
	if x.ready == nil || x.failures != 0 || x.wait != 0 {
		t.Errorf("after an answer: ready %v, failures %d, wait %v", x.ready, x.failures, x.wait)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var msgs []string
	for _, l := range lines {
		msgs = append(msgs, l[strings.Index(l, `"message":`):])
	}
	wantMsgs := []string{
		`"message":"the external searcher did not answer; the experiment waits and asks again"}`,
		`"message":"refused the external searcher's config; the experiment waits and asks again"}`,
		`"message":"the external searcher answered no config; the experiment waits and asks again"}`,
		`"message":"the external searcher answered again"}`,
	}
	if fmt.Sprint(msgs) != fmt.Sprint(wantMsgs) {
		t.Errorf("log:\n%s\nwant the messages %q", logs.String(), wantMsgs)
	}
	if !strings.Contains(lines[0], `"failures":1`) || !strings.Contains(lines[1], `"failures":7`) {
		t.Errorf("the second line should count the 6 unlogged repeats and itself:\n%s", logs.String())
	}
}
