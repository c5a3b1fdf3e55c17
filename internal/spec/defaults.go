package spec

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/tuner"
)

// Defaults that ApplyDefaults fills in, as in Ray Tune.
const (
	DefaultNumSamples           = 1
	DefaultSearchAlg            = tuner.SearchRandom
	DefaultScheduler            = tuner.SchedulerFIFO
	DefaultHeartbeatTimeoutS    = events.DefaultHeartbeatTimeoutS
	DefaultCheckpointScoreOrder = "max"
	DefaultSyncPeriodS          = 300.0
	DefaultSyncTimeoutS         = 1800.0
)

// now is the clock of default experiment names; tests replace it.
var now = time.Now

// ApplyDefaults fills the unset (zero) fields of s with their defaults: the
// trainable name of a command trainable (see the package doc), the
// experiment name "<trainable name>_<YYYY-MM-DD_HH-MM-SS>" in local time,
// num_samples 1, search_alg "random", scheduler "fifo", heartbeat_timeout_s
// 3, checkpoint_score_order "max", sync_period 300, sync_timeout 1800 and
// sync_artifacts_on_checkpoint true. It is idempotent.
func ApplyDefaults(s *events.ExperimentSpec) {
	setDefault(&s.Trainable.Name, commandName(s.Trainable.Command))
	if s.Name == "" {
		s.Name = defaultName(s.Trainable.Name, now())
	}
	tc := &s.TuneConfig
	setDefault(&tc.NumSamples, DefaultNumSamples)
	setDefault(&tc.SearchAlg, DefaultSearchAlg)
	setDefault(&tc.Scheduler, DefaultScheduler)
	rc := &s.RunConfig
	setDefault(&rc.FailureConfig.HeartbeatTimeoutS, DefaultHeartbeatTimeoutS)
	setDefault(&rc.CheckpointConfig.ScoreOrder, DefaultCheckpointScoreOrder)
	setDefault(&rc.SyncConfig.SyncPeriodS, DefaultSyncPeriodS)
	setDefault(&rc.SyncConfig.SyncTimeoutS, DefaultSyncTimeoutS)
	if rc.SyncConfig.SyncArtifactsOnCheckpoint == nil {
		on := true
		rc.SyncConfig.SyncArtifactsOnCheckpoint = &on
	}
}

func setDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// commandName is the default name of a command trainable: the base name,
// without extension, of the last argument that does not start with "-"
// (["python3", "train.py"] gives "train").
func commandName(command []string) string {
	for i := len(command) - 1; i >= 0; i-- {
		a := command[i]
		if a == "" || strings.HasPrefix(a, "-") {
			continue
		}
		base := filepath.Base(a)
		if name := strings.TrimSuffix(base, filepath.Ext(base)); name != "" {
			return name
		}
	}
	return ""
}

// defaultName is Ray's default experiment name, made a valid experiment id:
// characters other than letters, digits, '_' and '-' become '_', and the
// trainable part is cut so that the whole stays within 128 characters.
func defaultName(trainable string, t time.Time) string {
	const stamp = "2006-01-02_15-04-05"
	base := strings.Trim(idSafe(trainable), "_-")
	if base == "" {
		base = "experiment"
	}
	if limit := 128 - len(stamp) - 1; len(base) > limit {
		base = base[:limit]
	}
	return base + "_" + t.Format(stamp)
}

func idSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '-':
			return r
		}
		return '_'
	}, s)
}
