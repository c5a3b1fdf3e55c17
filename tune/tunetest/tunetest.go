// Package tunetest runs tunejet in the test's process, for tests of code
// that uses package tune: a nats-server with JetStream listening on a free
// loopback port, with the controller, a runner, the syncer and the
// restorer, stopped and removed when the test ends.
//
// A test starts it with the trainables its tuners run and submits to it
// with tune.WithNATS, as it would to a deployment:
//
//	nats := tunetest.Start(t, tunetest.Config{Trainables: map[string]tune.Trainable{"train": train}})
//	tuner, err := tune.NewTuner(train, tune.WithNATS(nats), tune.WithRunConfig(tune.RunConfig{StoragePath: t.TempDir()}))
//
// The stack outlives a Fit: a test can interrupt an experiment, restore
// it, or watch it (tune.Watch) on the same stack.
package tunetest

import (
	"testing"

	"github.com/tunejet/tunejet/tune"
)

// Config configures the stack.
type Config struct {
	// Trainables are the Go trainables the runner runs, by the name the
	// tuners give them: the function's name, or WithTrainableName's.
	Trainables map[string]tune.Trainable
	// Slots is the runner's slots. Default: CPUs.
	Slots int
}

// Start starts a stack for t and returns the options that reach it. The
// stack stops when t ends, and a service's failure fails t then.
func Start(t testing.TB, cfg Config) tune.NATSOptions {
	t.Helper()
	s, err := tune.StartStack(t.Context(), tune.StackConfig{StoreDir: t.TempDir(), Slots: cfg.Slots, Trainables: cfg.Trainables, Listen: true})
	if err != nil {
		t.Fatalf("tunetest: start the stack: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("tunetest: %v", err)
		}
	})
	return s.NATSOptions()
}
