package tune

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/spec"
	"github.com/tunejet/tunejet/internal/storage"
)

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("invalid tuner configuration")

// NATSOptions says how to reach a NATS deployment.
type NATSOptions struct {
	// URL is one or more comma-separated server URLs. Default: the
	// NATS_URL environment variable.
	URL string
	// Name is the client connection name shown by the server.
	Name string
	// User and Password authenticate with a user name.
	User, Password string
	// Token authenticates with a token.
	Token string
	// CredsFile is a JWT credentials file (.creds).
	CredsFile string
	// NKeyFile is a file holding an nkey seed.
	NKeyFile string
	// TLSCA is a CA bundle to verify the server; TLSCert and TLSKey are a
	// client certificate.
	TLSCA, TLSCert, TLSKey string
	// ConnectTimeout is how long to keep trying while no server answers:
	// 0 makes a single attempt; a negative value tries until ctx ends.
	// Errors no retry can mend (a bad URL, bad credentials) end it at once.
	ConnectTimeout time.Duration
	// Log gets the failed attempts. The zero Logger logs nothing.
	Log zerolog.Logger
}

func (o NATSOptions) connectOptions() bus.ConnectOptions {
	return bus.ConnectOptions{
		URL: o.URL, Name: o.Name, User: o.User, Password: o.Password, Token: o.Token,
		CredsFile: o.CredsFile, NKeyFile: o.NKeyFile, TLSCA: o.TLSCA, TLSCert: o.TLSCert, TLSKey: o.TLSKey,
		ConnectTimeout: o.ConnectTimeout, Log: o.Log,
	}
}

// Command is a trainable that runs an executable, for NewTuner.
type Command []string

// Tuner runs one experiment.
type Tuner struct {
	spec     Spec
	fn       Trainable
	nats     *NATSOptions
	storeDir string
	slots    int
	capacity RunnerCapacity
	log      zerolog.Logger
	progress io.Writer
	verbose  int
	reporter Reporter
	syncWait time.Duration
	restore  *restoreOptions // set by Restore and the resume options
	results  *ResultGrid     // of the last Fit
	objects  []string        // stored by Fit besides the param space's references (WithObjects)
	syncer   Syncer          // WithSyncer
	newRun   bool            // WithNewRun
	driver   *driverConn     // WithDriver
}

// Option configures a Tuner.
type Option func(*Tuner) error

// NewTuner returns a Tuner for trainable: a Trainable (a Go function), a
// Command, or the registered name (string) of a Go trainable that runs on
// a deployment's runners.
func NewTuner(trainable any, opts ...Option) (*Tuner, error) {
	t, err := newTuner(trainable, opts)
	if err != nil {
		return nil, err
	}
	if t.restore != nil {
		return nil, fmt.Errorf("%w: the resume options (WithResumeUnfinished, WithResumeErrored, WithRestartErrored, "+
			"WithResumeConfig, WithNumSamples, WithTrustStoredTrainable) are tune.Restore's: NewTuner starts a new "+
			"experiment, which they would not change; restore it with tune.Restore(ctx, path, trainable, ...)", ErrInvalidConfig)
	}
	return t, nil
}

// newTuner builds a Tuner of trainable with opts, resume options included
// (Restore sets its path after).
func newTuner(trainable any, opts []Option) (*Tuner, error) {
	t := &Tuner{log: zerolog.Nop(), syncWait: defaultSyncWait, verbose: VerboseTable}
	switch tr := trainable.(type) {
	case Trainable:
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

// WithRunnerSlots sets the embedded runner's CPUs (its former slots), as
// WithRunnerCapacity(RunnerCapacity{CPUs: n}) does. Default: the number
// of CPUs.
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

// WithReporter sets the status table's columns and pace (Ray's
// CLIReporter).
func WithReporter(r Reporter) Option {
	return func(t *Tuner) error {
		if r.Every < 0 {
			return fmt.Errorf("the reporter's pace must be > 0, got %v", r.Every)
		}
		t.reporter = r
		return nil
	}
}

// WithVerbose sets how much the status table of WithProgress shows, as
// Ray's verbose: 0 nothing, 1 the experiment's status line, 2 (the
// default) the trial table with the varying hyperparameters and the
// metric, 3 every trial and every metric.
func WithVerbose(level int) Option {
	return func(t *Tuner) error {
		if level < VerboseSilent || level > VerboseAll {
			return fmt.Errorf("verbose must be 0, 1, 2 or 3, got %d", level)
		}
		t.verbose = level
		return nil
	}
}

// WithNewRun makes Fit start a new run of an experiment whose name
// already has state, as Ray's Tuner.fit() does in an existing experiment
// folder: the old run leaves the event log (as tunejet forget does), its
// files stay in storage, and the new run's trials and state file join
// them, so that the folder's results are the new run's. A run of that
// name that is live (a controller holds its lease) is still refused with
// ErrExists.
func WithNewRun() Option {
	return func(t *Tuner) error { t.newRun = true; return nil }
}

// WithProgress draws a live status table of the trials on w while Fit
// (or Watch) runs.
func WithProgress(w io.Writer) Option {
	return func(t *Tuner) error { t.progress = w; return nil }
}

// defaultSyncWait is WithSyncWait's default.
const defaultSyncWait = 30 * time.Second

// WithSyncWait bounds how long Fit (or Watch), once the experiment has
// ended, waits for the syncer to announce that storage holds the final
// state; past it, Fit returns and storage may lag behind. Default 30 s.
func WithSyncWait(d time.Duration) Option {
	return func(t *Tuner) error {
		if d < 0 {
			return fmt.Errorf("%w: sync wait must be >= 0, got %v", ErrInvalidConfig, d)
		}
		t.syncWait = d
		return nil
	}
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
	if err := strictMetricChecking(&s.TuneConfig); err != nil {
		return s, err
	}
	autoCallbackLoggers(&s.RunConfig)
	if s.Trainable.Dir == "" && len(s.Trainable.Command) > 0 {
		if wd, err := filepath.Abs("."); err == nil {
			s.Trainable.Dir = wd
		}
	}
	v := s
	if t.syncer != nil && v.RunConfig.SyncConfig.Syncer == nil {
		// The Go Syncer (WithSyncer) stands in for a command syncer: the
		// upload_dir need not be storage gocloud opens.
		sc := v.RunConfig.SyncConfig
		sc.Syncer = &events.CommandSyncer{SyncUp: "{source} {target}"}
		v.RunConfig.SyncConfig = sc
	}
	if err := spec.Validate(&v); err != nil {
		return s, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := (&events.ExperimentSubmitted{Spec: s}).Validate(); err != nil {
		return s, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return s, nil
}

// EnvDisableStrictMetricChecking is Ray's switch for its strict metric
// check: 1 lets trials report results without the experiment's metric.
// The client reads it where the user runs, and the submitted spec carries
// it to the controller.
const EnvDisableStrictMetricChecking = "TUNE_DISABLE_STRICT_METRIC_CHECKING"

// EnvDisableAutoCallbackLoggers is Ray's switch for its default loggers
// (CSV, JSON and TensorBoard): "1", and only that, turns them off. Of
// these tunejet leaves out only the TensorBoard event files: result.json
// and progress.csv are the experiment's record, which restores and
// results read. The client reads it where the user runs, and the
// submitted spec carries it to the syncer.
const EnvDisableAutoCallbackLoggers = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"

// autoCallbackLoggers applies EnvDisableAutoCallbackLoggers to rc, as Ray
// reads it.
func autoCallbackLoggers(rc *events.RunConfig) {
	if os.Getenv(EnvDisableAutoCallbackLoggers) == "1" {
		rc.DisableTensorBoard = true
	}
}

// strictMetricChecking applies EnvDisableStrictMetricChecking to tc, as
// Ray reads it: an integer, 1 turning the check off.
func strictMetricChecking(tc *events.TuneConfig) error {
	v := strings.TrimSpace(os.Getenv(EnvDisableStrictMetricChecking))
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%w: %s=%q: want an integer (1 turns the strict metric check off)", ErrInvalidConfig, EnvDisableStrictMetricChecking, v)
	}
	if n == 1 {
		tc.DisableStrictMetricChecking = true
	}
	return nil
}
