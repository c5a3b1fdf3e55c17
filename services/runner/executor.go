package runner

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/session"
)

// Executor runs a trainable for one attempt of a trial. There are two
// drivers: funcExecutor runs a registered Go function in this process,
// commandExecutor runs any executable that speaks the trainable protocol
// (internal/trainproto), started for the attempt or forked from a warm
// worker (warm.go). Both pass the conformance suite in executor_test.go;
// the attempt knows them only through this interface.
type Executor interface {
	// Execute runs the trainable with config until it ends. The trainable
	// reports through s, which answers each report with whether to stop
	// (the trainable then ends), and resumes from s.Checkpoint() when it
	// is not "". Execute returns nil when the trainable finished, and why
	// it failed otherwise: a Go function's error or panic, a command's
	// exit status with the last lines of its stderr.
	//
	// When ctx is done the trainable is asked to end (a Go function's
	// context is cancelled, a command gets SIGTERM) and given the grace
	// period to, then ended: a command is killed, a Go function abandoned.
	// A ctx whose cause is ErrSuperseded kills a command at once: another
	// runner owns the trial. The error returned then says how the
	// trainable ended; the attempt's outcome no longer depends on it.
	Execute(ctx context.Context, s session.Session, config map[string]any) error
}

// executor returns the driver for trainable t.
// A command whose spec says it is a fork server runs as a fork of a warm
// worker of the run that ctx's attempts belong to, when there is one.
func (s *Service) executor(ctx context.Context, t events.Trainable, log zerolog.Logger) (Executor, error) {
	if len(t.Command) > 0 {
		e := &commandExecutor{
			Command: t.Command, Dir: t.Dir, Sockets: filepath.Join(s.cfg.WorkDir, ".sockets"),
			Grace: s.cfg.StopGrace, Log: log, SDK: s.python,
		}
		if t.ForkServer {
			e.Warm = warmSetFrom(ctx)
		}
		return e, nil
	}
	fn, ok := s.cfg.Trainables[t.Name]
	if !ok {
		return nil, fmt.Errorf("invalid trainable: %q is not registered on runner %s", t.Name, s.cfg.Name)
	}
	return &funcExecutor{Func: fn, Grace: s.cfg.StopGrace, Log: log}, nil
}
