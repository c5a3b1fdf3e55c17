package runner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tunejet/tunejet/internal/bus/bustest"
)

// A runner that found no work waits for an event of the experiment's work
// or its idle poll; work a controller handed on (the nak of a gone
// runner's work) is announced, and the announcement wakes the gate at
// once, whatever the poll.
func TestGateWakesWhenWorkIsHandedOn(t *testing.T) {
	srv := bustest.Start(t)
	s := New(srv.Bus("runner"), Config{Name: "r1", WorkDir: t.TempDir()})
	g := newGate("exp")
	ctx, cancel := context.WithCancel(t.Context())
	watched := make(chan struct{})
	go func() { defer close(watched); s.watchGate(ctx, g) }()
	defer func() { cancel(); <-watched }()
	ctl := srv.Bus("controller")
	bustest.CheckFor(t, 10*time.Second, func() error {
		_, wake := g.largest()
		if err := ctl.AnnounceWorkAgain("exp"); err != nil {
			return err
		}
		select {
		case <-wake:
			return nil
		case <-time.After(100 * time.Millisecond):
			return errNotWoken
		}
	})
}

var errNotWoken = errors.New("the gate was not woken")
