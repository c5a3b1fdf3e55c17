package tune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/spec"
	"github.com/tunejet/tunejet/internal/storage"
)

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("invalid tuner configuration")

// NATSOptions says how to reach a NATS deployment.
type NATSOptions = bus.ConnectOptions

// Command is a trainable that runs an executable, for NewTuner.
type Command []string

// Tuner runs one experiment.
type Tuner struct {
	spec     Spec
	fn       Trainable
	nats     *NATSOptions
	storeDir string
	slots    int
	log      zerolog.Logger
	progress io.Writer
	restore  *restoreOptions // set by Restore and the resume options
	results  *ResultGrid     // of the last Fit
}

// Option configures a Tuner.
type Option func(*Tuner) error

// NewTuner returns a Tuner for trainable: a Trainable (a Go function), a
// Command, or the registered name (string) of a Go trainable that runs on
// a deployment's runners.
func NewTuner(trainable any, opts ...Option) (*Tuner, error) {
	t := &Tuner{log: zerolog.Nop()}
	switch tr := trainable.(type) {
	case Trainable:
		t.fn, t.spec.Trainable.Name = tr, funcName(tr)
	case func(context.Context, map[string]any) error:
		t.fn, t.spec.Trainable.Name = tr, funcName(tr)
	case Command:
		t.spec.Trainable.Command = append([]string(nil), tr...)
	case string:
		t.spec.Trainable.Name = tr
	case nil:
	default:
		return nil, fmt.Errorf("%w: trainable must be a tune.Trainable, a tune.Command or a registered name, got %T", ErrInvalidConfig, trainable)
	}
	for _, opt := range opts {
		if err := opt(t); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// funcName is a function's name without its package: Ray's trainable name.
func funcName(f any) string {
	name := runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
	name = name[strings.LastIndex(name, ".")+1:]
	if name == "" || strings.HasPrefix(name, "func") {
		return "trainable"
	}
	return name
}

// WithSpec sets the whole experiment, as an experiment file gives it. The
// trainable given to NewTuner is kept unless the spec names one.
func WithSpec(s Spec) Option {
	return func(t *Tuner) error {
		tr := t.spec.Trainable
		t.spec = s
		if s.Trainable.Name == "" && len(s.Trainable.Command) == 0 {
			t.spec.Trainable = tr
		}
		return nil
	}
}

// WithParamSpace sets the search space.
func WithParamSpace(p ParamSpace) Option {
	return func(t *Tuner) error { t.spec.ParamSpace = p; return nil }
}

// WithTuneConfig sets the TuneConfig.
func WithTuneConfig(c TuneConfig) Option {
	return func(t *Tuner) error { t.spec.TuneConfig = c; return nil }
}

// WithRunConfig sets the RunConfig.
func WithRunConfig(c RunConfig) Option {
	return func(t *Tuner) error { t.spec.RunConfig = c; return nil }
}

// WithName names the experiment (Ray's RunConfig.name).
func WithName(name string) Option {
	return func(t *Tuner) error { t.spec.Name = name; return nil }
}

// WithTrainableName registers a Go trainable under name instead of its
// function name.
func WithTrainableName(name string) Option {
	return func(t *Tuner) error { t.spec.Trainable.Name = name; return nil }
}

// WithNATS submits to an existing deployment instead of starting an
// embedded one.
func WithNATS(o NATSOptions) Option {
	return func(t *Tuner) error { t.nats = &o; return nil }
}

// WithStoreDir sets where the embedded nats-server keeps its data.
// Default ~/.tunejet/jetstream.
func WithStoreDir(dir string) Option {
	return func(t *Tuner) error { t.storeDir = dir; return nil }
}

// WithRunnerSlots sets the embedded runner's slots. Default: CPUs.
func WithRunnerSlots(n int) Option {
	return func(t *Tuner) error {
		if n < 0 {
			return fmt.Errorf("%w: runner slots must be >= 0, got %d", ErrInvalidConfig, n)
		}
		t.slots = n
		return nil
	}
}

// WithLogger sets the services' logger. Default: no logs.
func WithLogger(l zerolog.Logger) Option {
	return func(t *Tuner) error { t.log = l; return nil }
}

// WithProgress draws a live status table of the trials on w while Fit runs.
func WithProgress(w io.Writer) Option {
	return func(t *Tuner) error { t.progress = w; return nil }
}

// Spec returns the experiment as Fit will submit it: defaults applied,
// storage path resolved, validated.
func (t *Tuner) Spec() (Spec, error) {
	s := t.spec
	spec.ApplyDefaults(&s)
	p, err := storage.Resolve(s.RunConfig.StoragePath, s.Trainable.Dir)
	if err != nil {
		return s, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	s.RunConfig.StoragePath = p
	if s.Trainable.Dir == "" && len(s.Trainable.Command) > 0 {
		if wd, err := filepath.Abs("."); err == nil {
			s.Trainable.Dir = wd
		}
	}
	if err := spec.Validate(&s); err != nil {
		return s, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := (&events.ExperimentSubmitted{Spec: s}).Validate(); err != nil {
		return s, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return s, nil
}
