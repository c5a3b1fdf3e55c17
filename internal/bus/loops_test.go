package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/bus"
)

// A loop asked for while the experiment's loop is still running (a restore
// comes while the loop of the experiment's end is finishing) runs once that
// one has ended: it is not lost.
func TestLoopsRunALoopAskedForWhileOneRuns(t *testing.T) {
	var l bus.Loops
	ctx := t.Context()
	release, secondRan := make(chan struct{}), make(chan struct{})
	l.Start(ctx, "exp", "first", zerolog.Nop(), func(context.Context) error { <-release; return nil })
	l.Start(ctx, "exp", "second", zerolog.Nop(), func(context.Context) error { close(secondRan); return nil })
	l.Start(ctx, "other", "other", zerolog.Nop(), func(context.Context) error { return nil })
	close(release)
	select {
	case <-secondRan:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop asked for while the first ran never ran")
	}
	l.Wait()
	// Once ended, the experiment's loop may start again.
	again := make(chan struct{})
	l.Start(ctx, "exp", "third", zerolog.Nop(), func(context.Context) error { close(again); return nil })
	l.Wait()
	select {
	case <-again:
	default:
		t.Fatal("a loop started after the others ended did not run")
	}
}
