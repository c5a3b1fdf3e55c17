package spec

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/tuning"

	"github.com/tunejet/tunejet/internal/sched"
)

// Defaults that ApplyDefaults fills in, as in Ray Tune.
const (
	DefaultNumSamples           = 1
	DefaultSearchAlg            = tuning.SearchRandom
	DefaultScheduler            = sched.FIFOName
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

// commandName is the default name of a command trainable, as Ray names a
// trainable after its function: the script it runs (["python3",
// "train.py", "--epochs", "3"] gives "train"), else the module of
// "python3 -m pkg.train" ("train"), else the program ("./bin/trainer"
// gives "trainer", "sh -c '...'" gives "sh"); never an argument that is
// code or a value. Characters a trial name cannot hold become '_'.
func commandName(command []string) string {
	if len(command) == 0 {
		return ""
	}
	for i, a := range command[1:] {
		if a == "-m" && i+2 < len(command) {
			mod := command[i+2]
			return idSafe(mod[strings.LastIndex(mod, ".")+1:])
		}
		if scriptExt[filepath.Ext(a)] && !strings.ContainsAny(a, " \t\n") {
			return idSafe(strings.TrimSuffix(filepath.Base(a), filepath.Ext(a)))
		}
	}
	if strings.HasPrefix(command[0], "-") {
		return ""
	}
	base := filepath.Base(command[0])
	if scriptExt[filepath.Ext(base)] {
		base = strings.TrimSuffix(base, filepath.Ext(base))
	}
	return idSafe(base)
}

// scriptExt are the extensions of the scripts interpreters run.
var scriptExt = map[string]bool{
	".py": true, ".sh": true, ".bash": true, ".js": true, ".mjs": true, ".ts": true, ".rb": true,
	".pl": true, ".R": true, ".r": true, ".jl": true, ".lua": true, ".php": true,
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
