package sched

import (
	"maps"
	"slices"
)

// Config is a scheduler's settings, holding Ray's defaults until
// settings.Decode reads the experiment file's into it: Validate checks
// them, and New builds the scheduler. A config that embeds Objective has
// its metric and mode, which tune_config gives when the config does not.
type Config interface {
	Validate() error
	New() (Scheduler, error)
}

// TimeKey is the time_attr of a scheduler that has one, the result key
// that measures progress: "" for FIFO.
func TimeKey(c Config) string {
	if t, ok := c.(interface{ TimeKey() string }); ok {
		return t.TimeKey()
	}
	return ""
}

// kinds maps each name tune_config.scheduler takes to its config with
// Ray's defaults. Each scheduler's file registers itself.
var kinds = map[string]func() Config{}

// register makes the scheduler of newConfig known by names.
func register(newConfig func() Config, names ...string) {
	for _, n := range names {
		if _, dup := kinds[n]; dup {
			panic("sched: scheduler " + n + " registered twice")
		}
		kinds[n] = newConfig
	}
}

// Names lists the names tune_config.scheduler takes, sorted.
func Names() []string { return slices.Sorted(maps.Keys(kinds)) }

// NewConfig returns the config, with Ray's defaults, of the scheduler
// named name; ok is false for a name no scheduler has.
func NewConfig(name string) (cfg Config, ok bool) {
	newConfig, ok := kinds[name]
	if !ok {
		return nil, false
	}
	return newConfig(), true
}

// FIFOName is Ray's default scheduler, tune_config.scheduler's default.
const FIFOName = "fifo"

// fifoConfig is FIFO's settings: there are none.
type fifoConfig struct{}

func (fifoConfig) Validate() error         { return nil }
func (fifoConfig) New() (Scheduler, error) { return NewFIFO(), nil }

func init() { register(func() Config { return &fifoConfig{} }, FIFOName) }

// built returns s as a Scheduler, or nil with err: never a nil pointer
// in a non-nil interface.
func built[S Scheduler](s S, err error) (Scheduler, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}
