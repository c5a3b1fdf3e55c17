package spec

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/tuning"

	"github.com/tunejet/tunejet/internal/settings"
)

// Validate checks a spec built in Go code with the same rules Parse
// applies, before or after ApplyDefaults: a zero value counts as unset. It
// returns every problem joined with errors.Join, each an *settings.Error naming the
// dotted key, or nil.
func Validate(s *events.ExperimentSpec) error {
	return check(s, func(string) bool { return false }).Err()
}

// validate runs the checks on a decoded spec and records their problems at
// the lines of their keys, leaving out problems that follow from a decoding
// error already reported.
func (d *decoder) validate(s *events.ExperimentSpec) {
	for _, e := range check(s, d.given).List() {
		if key := d.fileKey(e.Key); !d.spoiled(key) {
			d.fail(key, "%s", e.Msg)
		}
	}
}

// fileKey turns a key of the tuner's settings, which internal/tuning names
// by the mapping form (tune_config.scheduler.max_t), into the key the file
// used when it gave them in the wire form (tune_config.scheduler_config.max_t).
func (d *decoder) fileKey(key string) string {
	for _, f := range wireForms {
		if !d.has(f.wire) {
			continue
		}
		if rest, ok := strings.CutPrefix(key, f.mapping); ok && (rest == "" && f.whole || strings.HasPrefix(rest, ".")) {
			return f.wire + rest
		}
	}
	return key
}

// wireForms are the tuner's settings that the file may give in the form
// of the spec's JSON, and where the mapping form holds them. whole is set
// when the key itself moves, not only the keys below it.
var wireForms = []struct {
	mapping, wire string
	whole         bool
}{
	{"tune_config.search_alg.points_to_evaluate", "tune_config.points_to_evaluate", true},
	{"tune_config.search_alg", "tune_config.search_alg_config", false},
	{"tune_config.scheduler", "tune_config.scheduler_config", false},
}

// spoiled reports whether key, a key above it or a key below it could not
// be decoded.
func (d *decoder) spoiled(key string) bool {
	for k := range d.bad {
		if k == "" || k == key || strings.HasPrefix(k, key+".") || strings.HasPrefix(key, k+".") {
			return true
		}
	}
	return false
}

// checker collects problems, one per key. given reports whether a key was
// set explicitly, so that an explicit zero is checked even where zero means
// unset.
type checker struct {
	given func(key string) bool
	p     settings.Problems
}

func (c *checker) add(key, format string, args ...any) { c.p.Add(key, format, args...) }

// set reports whether a field is set: non-zero, or explicitly given.
func (c *checker) set(key string, nonzero bool) bool { return nonzero || c.given(key) }

// positive checks that a set duration is > 0.
func (c *checker) positive(key string, v float64) {
	if c.set(key, v != 0) && !(v > 0 && !math.IsInf(v, 0)) {
		c.add(key, "must be > 0 seconds, got %v", v)
	}
}

// oneOf checks that a set string is one of allowed.
func (c *checker) oneOf(key, v string, allowed ...string) {
	if c.set(key, v != "") {
		c.p.OneOf(key, v, allowed...)
	}
}

// check returns every problem of s.
func check(s *events.ExperimentSpec, given func(string) bool) *settings.Problems {
	c := &checker{given: given}
	c.name(s.Name)
	c.trainable(&s.Trainable)
	c.resources(s)
	c.paramSpace(s)
	c.tuneConfig(&s.TuneConfig)
	c.runConfig(&s.RunConfig)
	c.tuner(s)
	c.driver(s)
	return &c.p
}

// driver checks the driver section: names given are not empty, and a
// driver's searcher replaces search_alg, which must then be unset.
func (c *checker) driver(s *events.ExperimentSpec) {
	d := s.Driver
	if d == nil {
		return
	}
	if d.Stopper == "" && c.given("driver.stopper") {
		c.add("driver.stopper", "must name the driver's stopper, got \"\"")
	}
	if d.Searcher == "" && c.given("driver.searcher") {
		c.add("driver.searcher", "must name the driver's searcher, got \"\"")
	}
	if sa := s.TuneConfig.SearchAlg; d.Searches() && sa != "" && sa != tuning.SearchRandom {
		c.add("driver.searcher", "the driver's searcher replaces tune_config.search_alg, which is %q: give one of them", sa)
	}
}

// tuner adds the problems of the scheduler, the search algorithm, the
// points to evaluate and the stoppers (internal/tuning's Check), but for
// those at keys already found wrong.
func (c *checker) tuner(s *events.ExperimentSpec) {
	for _, e := range tuning.Check(s) {
		c.add(e.Key, "%s", e.Msg)
	}
}

func (c *checker) name(name string) {
	if !c.set("name", name != "") {
		return
	}
	if err := events.ValidateID("experiment name", name); err != nil {
		c.add("name", "%s", strings.TrimPrefix(err.Error(), events.ErrInvalid.Error()+": "))
	}
}

func (c *checker) trainable(t *events.Trainable) {
	switch {
	case t.Name == "" && len(t.Command) == 0:
		c.add("trainable", "required: the name of a registered Go trainable, or {command: [program, args...]}")
	case len(t.Command) > 0 && t.Command[0] == "":
		c.add("trainable.command.0", "the program must not be empty")
	case t.ForkServer && len(t.Command) == 0:
		c.add("trainable.fork_server", "only a command trainable can be a fork server; a Go trainable runs in the runner")
	}
}

// paramSpace checks the space with search.ParseSpace, and with OnlyGrid for
// search_alg "grid".
func (c *checker) paramSpace(s *events.ExperimentSpec) {
	space, err := search.ParseSpace(s.ParamSpace)
	if err == nil && s.TuneConfig.SearchAlg == tuning.SearchGrid {
		err = space.OnlyGrid()
	}
	c.p.AddErr("param_space", err)
}

func (c *checker) tuneConfig(tc *events.TuneConfig) {
	const k = "tune_config."
	if n := tc.NumSamples; c.set(k+"num_samples", n != 0) && n < 1 && n != -1 {
		c.add(k+"num_samples", "must be a count >= 1, or -1 to sample until stopped; got %d", n)
	}
	if len(tc.Modes) == 0 {
		c.oneOf(k+"mode", tc.Mode, "min", "max")
	}
	c.objectives(tc)
	if tc.MaxConcurrentTrials < 0 {
		c.add(k+"max_concurrent_trials", "must be >= 0 (0 means no limit), got %d", tc.MaxConcurrentTrials)
	}
	c.positive(k+"time_budget_s", tc.TimeBudgetS)
}

// objectives checks several objectives, as Ray's metric and mode lists
// (or the wire form's metrics and modes): distinct names, a mode each.
func (c *checker) objectives(tc *events.TuneConfig) {
	const k = "tune_config."
	switch {
	case len(tc.Modes) > 0 && len(tc.Metrics) == 0:
		c.add(k+"mode", "a list of %d modes needs a list of as many metrics in tune_config.metric", len(tc.Modes))
		return
	case len(tc.Metrics) == 0:
		return
	case tc.Metric != "":
		c.add(k+"metric", "give one metric, or a list of them, not both")
		return
	case tc.Mode != "":
		c.add(k+"mode", "metric lists %d metrics: give mode as a list of as many modes, e.g. %s", len(tc.Metrics), modesExample(len(tc.Metrics)))
		return
	case len(tc.Modes) > 0 && len(tc.Modes) != len(tc.Metrics):
		c.add(k+"mode", "must give one mode for each of the %d metrics, got %d", len(tc.Metrics), len(tc.Modes))
		return
	}
	seen := map[string]bool{}
	for _, m := range tc.Metrics {
		switch {
		case m == "":
			c.add(k+"metric", "metric names must not be empty")
		case seen[m]:
			c.add(k+"metric", "names %q twice", m)
		}
		seen[m] = true
	}
	for i, m := range tc.Modes {
		if m != "min" && m != "max" {
			c.add(k+"mode", "mode %d (of %q) must be \"min\" or \"max\", got %q", i+1, tc.Metrics[i], m)
		}
	}
}

// modesExample is a mode list of n modes for a message.
func modesExample(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat("min, ", n), ", ") + "]"
}

func (c *checker) runConfig(rc *events.RunConfig) {
	const k = "run_config."
	if c.set(k+"storage_path", rc.StoragePath != "") && rc.StoragePath == "" {
		c.add(k+"storage_path", "must not be empty")
	}
	c.stop(rc.Stop)
	c.failureConfig(&rc.FailureConfig)
	c.checkpointConfig(&rc.CheckpointConfig)
	c.syncConfig(&rc.SyncConfig, rc.StoragePath)
}

func (c *checker) stop(stop map[string]float64) {
	for key, v := range stop {
		switch {
		case key == "":
			c.add("run_config.stop", "criterion names must not be empty")
		case math.IsNaN(v) || math.IsInf(v, 0):
			c.add("run_config.stop."+key, "must be a finite number, got %v", v)
		}
	}
}

func (c *checker) failureConfig(fc *events.FailureConfig) {
	const k = "run_config.failure_config."
	if fc.MaxFailures < -1 {
		c.add(k+"max_failures", "must be >= -1 (-1 retries forever), got %d", fc.MaxFailures)
	}
	switch fc.FailFast {
	case events.FailFastOff:
	case events.FailFastOn, events.FailFastRaise:
		if fc.MaxFailures != 0 {
			c.add(k+"max_failures", "max_failures must be 0 if fail_fast=%s.", pyRepr(fc.FailFast))
		}
	default:
		c.add(k+"fail_fast", "fail_fast must be one of {bool, 'raise'}. Got %s.", string(fc.FailFast))
	}
	c.positive(k+"heartbeat_timeout_s", fc.HeartbeatTimeoutS)
}

// pyRepr is Python's repr of a fail_fast value, as in Ray's messages.
func pyRepr(f events.FailFast) string {
	if f == events.FailFastOn {
		return "True"
	}
	return "'" + string(f) + "'"
}

func (c *checker) checkpointConfig(cc *events.CheckpointConfig) {
	const k = "run_config.checkpoint_config."
	if n := cc.NumToKeep; c.set(k+"num_to_keep", n != 0) && n < 1 {
		c.add(k+"num_to_keep", "Received invalid num_to_keep: %d. Must be None or an integer >= 1.", n)
	}
	if o := cc.ScoreOrder; c.set(k+"checkpoint_score_order", o != "") && o != "max" && o != "min" {
		c.add(k+"checkpoint_score_order", `checkpoint_score_order must be either "max" or "min".`)
	}
	switch r := cc.Route; r {
	case "", events.RouteAuto, events.RouteStorage, events.RouteObjectStore:
	default:
		c.add(k+"route", `route must be "auto" (checkpoints go straight to storage when the runner reaches it, else through the Object Store), "storage" or "object_store", got %q.`, r)
	}
}

func (c *checker) syncConfig(sc *events.SyncConfig, storagePath string) {
	const k = "run_config.sync_config."
	switch p := sc.SyncPeriodS; {
	case p < 0:
		c.add(k+"sync_period", "must be >= 0 seconds, got %v", p)
	case p == 0 && c.given(k+"sync_period"):
		c.add(k+"sync_period", "0 cannot be stored: it means the default (%v seconds); use a small period such as 1 to sync often", DefaultSyncPeriodS)
	}
	c.positive(k+"sync_timeout", sc.SyncTimeoutS)
	c.commandSyncer(sc, storagePath)
	for i, p := range sc.Exclude {
		if p == "" {
			c.add(fmt.Sprintf("%sexclude.%d", k, i), "must not be empty")
		}
	}
}

// commandSyncer checks upload_dir and the syncer's templates: a syncer
// needs an upload_dir; an upload_dir without a syncer must be storage
// gocloud opens; either mirrors a folder, so storage_path must be one.
func (c *checker) commandSyncer(sc *events.SyncConfig, storagePath string) {
	const k = "run_config.sync_config."
	if cs := sc.Syncer; cs != nil {
		if sc.UploadDir == "" {
			c.add(k+"syncer", "a syncer needs run_config.sync_config.upload_dir, the remote its commands copy <storage_path>/<name> to")
		}
		if strings.TrimSpace(cs.SyncUp) == "" {
			c.add(k+"syncer.sync_up", "must not be empty: a shell command copying {source} to {target}, such as \"rclone copy {exclude} {source} {target}\"")
		} else {
			c.template(k+"syncer.sync_up", cs.SyncUp, blobsync.SyncPlaceholders, "source", "target")
		}
		if cs.SyncDown != "" {
			c.template(k+"syncer.sync_down", cs.SyncDown, blobsync.SyncPlaceholders, "source", "target")
		}
		if cs.Delete != "" {
			c.template(k+"syncer.delete", cs.Delete, blobsync.DeletePlaceholders, "target")
		}
		if cs.ExcludeTemplate != "" {
			c.template(k+"syncer.exclude_template", cs.ExcludeTemplate, blobsync.ExcludePlaceholders, "pattern")
		}
	} else if u := sc.UploadDir; u != "" {
		if err := openable(u); err != nil {
			c.add(k+"upload_dir", "%v; for other storage (hdfs://, an rclone remote, ...) give run_config.sync_config.syncer with the commands that copy to it", err)
		}
	}
	if sc.UploadDir != "" && storagePath != "" && storage.IsURL(storagePath) && !strings.HasPrefix(storagePath, "file://") {
		c.add(k+"upload_dir", "mirrors a folder: run_config.storage_path must be a local or NFS folder, got %s", storagePath)
	}
}

// template reports a syncer template that blobsync would refuse.
func (c *checker) template(key, tmpl string, allowed []string, required ...string) {
	if err := blobsync.CheckTemplate(tmpl, allowed, required); err != nil {
		c.add(key, "%s", strings.TrimPrefix(err.Error(), blobsync.ErrTemplate.Error()+": "))
	}
}

// openable reports why gocloud cannot open an upload_dir: a URL of another
// scheme, or a relative path.
func openable(dir string) error {
	if !storage.IsURL(dir) {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("%q is not an absolute folder or a URL", dir)
		}
		return nil
	}
	scheme, _, _ := strings.Cut(dir, "://")
	if !slices.Contains(storage.Schemes, scheme) {
		return fmt.Errorf("tunejet cannot open %s:// storage itself (it opens %s:// and folders)", scheme, strings.Join(storage.Schemes, "://, "))
	}
	return nil
}
