package events

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// ExperimentSpec is an experiment as submitted: the experiment file in its
// normalized form. Keys mirror Ray Tune's Tuner arguments in snake_case.
// internal/spec parses and validates the file; this struct is the wire form.
type ExperimentSpec struct {
	// Name is the experiment's name: the directory under storage_path and the
	// experiment token in every subject.
	Name string `json:"name"`
	// Trainable is what each trial runs.
	Trainable Trainable `json:"trainable"`
	// ParamSpace is the search space: nested objects, plain values, and
	// domains such as {"grid_search": [...]} or {"uniform": [low, high]}.
	ParamSpace map[string]any `json:"param_space,omitempty"`
	// TuneConfig holds Ray's TuneConfig fields.
	TuneConfig TuneConfig `json:"tune_config"`
	// RunConfig holds Ray's RunConfig fields.
	RunConfig RunConfig `json:"run_config"`
	// Driver names the decisions the experiment's driver makes, as Ray
	// runs a custom stopper and searcher in the driver; nil: none.
	Driver *DriverSpec `json:"driver,omitempty"`
}

// DriverSpec names the user objects a driver serves (docs/driver.md): the
// controller asks it whether each result stops its trial, after the
// spec's own stoppers, when Stopper is set, and for each new trial's
// config when Searcher is (which replaces search_alg). The names are for
// people: the Python SDK writes the objects' class names.
type DriverSpec struct {
	Stopper  string `json:"stopper,omitempty"`
	Searcher string `json:"searcher,omitempty"`
}

// Stops reports whether the driver judges results; nil-safe.
func (d *DriverSpec) Stops() bool { return d != nil && d.Stopper != "" }

// Searches reports whether the driver suggests configs; nil-safe.
func (d *DriverSpec) Searches() bool { return d != nil && d.Searcher != "" }

// Trainable names a registered Go function or a command to execute.
// Exactly one of Name (for Go trainables) and Command is set; a command
// trainable may also carry a Name, used in trial names.
type Trainable struct {
	// Name is the registered name of a Go trainable, or the display name of a
	// command trainable.
	Name string `json:"name,omitempty"`
	// Command is the program and its arguments.
	Command []string `json:"command,omitempty"`
	// Dir is the folder the command runs relative to: the experiment file's
	// folder. Relative command paths resolve against it.
	Dir string `json:"dir,omitempty" settings:"-"`
	// Resources is what each trial needs (Ray's tune.with_resources): cpu
	// (default 1), gpu (fractions below 1 share a device), memory in
	// bytes, and custom resources by name. An amount may read the trial's
	// config ({"config": "<dotted key>"}).
	Resources map[string]ResourceAmount `json:"resources,omitempty"`
	// ForkServer says the command can run as a warm worker: started with
	// TUNEJET_FORK_SERVER=1 it loads the trainable once and forks one
	// process per attempt (docs/trainable-protocol.md, "Warm workers").
	// Runners then start it once per experiment run and resource
	// assignment. The Python SDK sets it unless TuneConfig(reuse_actors=False).
	ForkServer bool `json:"fork_server,omitempty"`
}

// TuneConfig mirrors ray.tune.TuneConfig.
type TuneConfig struct {
	// NumSamples is how many times the grid is sampled; -1 samples until
	// stopped. Default 1.
	NumSamples int `json:"num_samples"`
	// Metric and Mode ("min" or "max") name the metric to optimize.
	Metric string `json:"metric,omitempty"`
	Mode   string `json:"mode,omitempty"`
	// Metrics and Modes name two or more metrics optimized together
	// (multi-objective search), each metric with its mode; Metric and Mode
	// are then empty. The experiment file also takes them in Ray's form,
	// metric and mode given as lists.
	Metrics []string `json:"metrics,omitempty"`
	Modes   []string `json:"modes,omitempty"`
	// MaxConcurrentTrials caps running trials; 0 means no limit.
	MaxConcurrentTrials int `json:"max_concurrent_trials,omitempty"`
	// TimeBudgetS stops the experiment after this many seconds; 0 means none.
	TimeBudgetS float64 `json:"time_budget_s,omitempty"`
	// Seed makes random search reproducible. When unset, the controller picks
	// one and records it in experiment.started.
	Seed *int64 `json:"seed,omitempty"`
	// SearchAlg is "random" (default: grid × samples, random domains sampled),
	// "grid" (only grid_search and plain values allowed), "tpe" (Optuna's
	// Tree-structured Parzen Estimator), "bayesopt" or "gp" (Gaussian-process
	// search, Optuna's GPSampler) or "external" (a NATS service suggests
	// each config; see docs/api.md).
	SearchAlg string `json:"search_alg,omitempty"`
	// SearchAlgConfig holds the search algorithm's settings as given, by
	// Optuna's names for tpe (n_startup_trials, n_ei_candidates, ...) and
	// bayesopt (n_startup_trials, deterministic_objective).
	SearchAlgConfig map[string]any `json:"search_alg_config,omitempty"`
	// PointsToEvaluate are configs run first, in order (Ray's
	// points_to_evaluate): each fixes the keys it names, and the search
	// algorithm fills in the rest.
	PointsToEvaluate []map[string]any `json:"points_to_evaluate,omitempty"`
	// Scheduler is "fifo" (default), "asha" (or "async_hyperband"),
	// "hyperband", "median_stopping_rule" or "pbt".
	Scheduler string `json:"scheduler,omitempty"`
	// SchedulerConfig holds the scheduler's settings as given, by Ray's
	// names (time_attr, max_t, grace_period, reduction_factor, ...).
	SchedulerConfig map[string]any `json:"scheduler_config,omitempty"`
	// DisableStrictMetricChecking turns off Ray's strict metric check: by
	// default the first result that lacks the metric (or the scheduler's)
	// ends the experiment with an error. The client sets it from
	// TUNE_DISABLE_STRICT_METRIC_CHECKING=1 where the user runs it, so a
	// controller anywhere honours the user's setting.
	DisableStrictMetricChecking bool `json:"disable_strict_metric_checking,omitempty" settings:"-"`
	// WaitForDecisions makes each report wait until the stoppers and the
	// scheduler have judged it, as Ray's report() does: a trial stops (or
	// pauses) at the very result that decided it. Without, a trial runs on
	// while its results are judged, faster, and may report a few results
	// past a decision. The Python SDK sets it.
	WaitForDecisions bool `json:"wait_for_decisions,omitempty"`
	// Reproducible makes a model-based searcher's (tpe, bayesopt, nsga2)
	// suggestion for trial k a function of the trials numbered up to
	// k − max_concurrent_trials alone, waiting for those to finish before
	// it creates trial k: the same seed then gives the same configs
	// whatever the timing, the runners or the crashes.
	Reproducible bool `json:"reproducible,omitempty"`
	// WarmStart is another experiment's directory in storage (a path or a
	// URL) whose finished trials seed this one's search algorithm (tpe,
	// bayesopt) before its first trial; its param space must be this one's.
	// The client reads them into WarmStartTrials before it submits.
	WarmStart string `json:"warm_start,omitempty"`
	// WarmStartTrials are those trials, in their order: each config with
	// its final value of tune_config.metric. The searcher learns from
	// them as trials completed before this experiment's first, and no
	// trial runs them.
	WarmStartTrials []WarmTrial `json:"warm_start_trials,omitempty" settings:"-"`
}

// Objective is a metric to optimize and its mode, "min" or "max".
type Objective struct {
	Metric string
	Mode   string
}

// Objectives are the metrics the experiment optimizes: Metric and Mode,
// or Metrics and Modes; none when no metric is set.
func (tc *TuneConfig) Objectives() []Objective {
	if len(tc.Metrics) > 0 {
		out := make([]Objective, len(tc.Metrics))
		for i, m := range tc.Metrics {
			out[i].Metric = m
			if i < len(tc.Modes) {
				out[i].Mode = tc.Modes[i]
			}
		}
		return out
	}
	if tc.Metric == "" && tc.Mode == "" {
		return nil
	}
	return []Objective{{Metric: tc.Metric, Mode: tc.Mode}}
}

// Primary is the first objective: the one metric, or the first of
// several; zero when no metric or mode is set.
func (tc *TuneConfig) Primary() Objective {
	if o := tc.Objectives(); len(o) > 0 {
		return o[0]
	}
	return Objective{}
}

// ModeOf is the mode of metric among the objectives; "" when the
// experiment does not optimize it.
func (tc *TuneConfig) ModeOf(metric string) string {
	for _, o := range tc.Objectives() {
		if metric != "" && o.Metric == metric {
			return o.Mode
		}
	}
	return ""
}

// Minimized is v as a minimized objective compares it: negated for a
// maximized one.
func (o Objective) Minimized(v float64) float64 {
	if o.Mode == "max" {
		return -v
	}
	return v
}

// ObjectiveValues reads a result's value of each objective (ResultValue):
// ok is false when one is missing or not a finite number.
func ObjectiveValues(result map[string]any, objectives []Objective) ([]float64, bool) {
	out := make([]float64, len(objectives))
	for i, o := range objectives {
		v, _ := ResultValue(result, o.Metric)
		f, ok := v.(float64)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, false
		}
		out[i] = f
	}
	return out, true
}

// MultiObjective reports whether the experiment optimizes several metrics.
func (tc *TuneConfig) MultiObjective() bool { return len(tc.Metrics) > 0 }

// WarmTrial is a finished trial of another experiment that seeds a
// search (TuneConfig.WarmStart).
type WarmTrial struct {
	Config map[string]any `json:"config"`
	Value  float64        `json:"value"`
	// Values are the trial's values of TuneConfig.Metrics, in their order,
	// when the experiment optimizes several metrics (Value is then 0).
	Values []float64 `json:"values,omitempty"`
}

// RunConfig mirrors ray.tune.RunConfig.
type RunConfig struct {
	// StoragePath is a directory or a storage URL; default ~/tunejet_results.
	StoragePath string `json:"storage_path,omitempty"`
	// Stop maps a result key to a threshold: a trial stops once
	// result[key] >= threshold (Ray's rule). Nested keys use "/".
	Stop map[string]float64 `json:"stop,omitempty"`
	// Stoppers are Ray's stoppers besides Stop (tune.stopper), as given: a
	// list (each a mapping with a "type": maximum_iteration,
	// trial_plateau, experiment_plateau, timeout, combined) or one mapping.
	Stoppers         any              `json:"stoppers,omitempty"`
	FailureConfig    FailureConfig    `json:"failure_config"`
	CheckpointConfig CheckpointConfig `json:"checkpoint_config"`
	SyncConfig       SyncConfig       `json:"sync_config"`
	// DisableTensorBoard: the syncer writes no TensorBoard event file in
	// the trial folders. The client sets it from Ray's
	// TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1 where the user runs it.
	DisableTensorBoard bool `json:"disable_tensorboard,omitempty" settings:"-"`
}

// FailureConfig mirrors ray.train.FailureConfig, plus the heartbeat that
// decides how fast a lost runner is noticed.
type FailureConfig struct {
	// MaxFailures is how many times a failed trial is retried; -1 retries
	// forever. Default 0.
	MaxFailures int `json:"max_failures"`
	// FailFast ends the experiment at the first final trial failure: false
	// (default), true, or "raise" (the error is also returned to the caller).
	FailFast FailFast `json:"fail_fast"`
	// HeartbeatTimeoutS is the JetStream AckWait of trial work: a runner that
	// sends no heartbeat for this long is presumed lost and the trial is
	// redelivered. Runners heartbeat at a third of it. Default 3.
	HeartbeatTimeoutS float64 `json:"heartbeat_timeout_s,omitempty"`
}

// DefaultHeartbeatTimeoutS is the heartbeat timeout when the spec sets none.
const DefaultHeartbeatTimeoutS = 3.0

// Attempts is how many attempts max_failures allows a trial's work:
// max_failures + 1, or -1 (no limit) for max_failures -1. It is the work
// consumer's MaxDeliver.
func (c FailureConfig) Attempts() int {
	if c.MaxFailures < 0 {
		return -1
	}
	return c.MaxFailures + 1
}

// Exhausted reports whether a trial that failed failures times may not be
// tried again, as Ray's FailureConfig(max_failures) rules.
func (c FailureConfig) Exhausted(failures int) bool {
	return c.MaxFailures >= 0 && failures > c.MaxFailures
}

// HeartbeatTimeout is HeartbeatTimeoutS, or the default when unset.
func (c FailureConfig) HeartbeatTimeout() time.Duration {
	if c.HeartbeatTimeoutS > 0 {
		return Seconds(c.HeartbeatTimeoutS)
	}
	return Seconds(DefaultHeartbeatTimeoutS)
}

// Seconds is a spec's seconds as a duration.
func Seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// FailFast is false, true or "raise".
type FailFast string

// FailFast values.
const (
	FailFastOff   FailFast = ""
	FailFastOn    FailFast = "true"
	FailFastRaise FailFast = "raise"
)

// MarshalJSON writes false, true or "raise".
func (f FailFast) MarshalJSON() ([]byte, error) {
	switch f {
	case FailFastOff:
		return []byte("false"), nil
	case FailFastOn:
		return []byte("true"), nil
	default:
		return json.Marshal(string(f))
	}
}

// UnmarshalJSON accepts a bool or the string "raise" (any case).
func (f *FailFast) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	ff, err := ParseFailFast(v)
	if err != nil {
		return err
	}
	*f = ff
	return nil
}

// ParseFailFast converts a decoded bool or string to FailFast, with Ray's
// error for anything else.
func ParseFailFast(v any) (FailFast, error) {
	switch x := v.(type) {
	case nil:
		return FailFastOff, nil
	case bool:
		if x {
			return FailFastOn, nil
		}
		return FailFastOff, nil
	case string:
		if strings.EqualFold(x, "raise") {
			return FailFastRaise, nil
		}
	}
	return FailFastOff, fmt.Errorf("fail_fast must be one of {bool, 'raise'}. Got %v.", v) //nolint:staticcheck // Ray's message, word for word
}

// CheckpointConfig mirrors ray.train.CheckpointConfig.
type CheckpointConfig struct {
	// NumToKeep is how many checkpoints to keep; 0 keeps all.
	NumToKeep int `json:"num_to_keep,omitempty"`
	// ScoreAttribute ranks checkpoints by this result key ("/" nests);
	// empty keeps the latest.
	ScoreAttribute string `json:"checkpoint_score_attribute,omitempty"`
	// ScoreOrder is "max" (default) or "min".
	ScoreOrder string `json:"checkpoint_score_order,omitempty"`
	// Route is how checkpoints reach storage: "auto" (default, empty):
	// straight into storage when the runner reaches it, else through the
	// Object Store; "storage": straight into storage, or an error at the
	// first checkpoint of a runner that cannot reach it; "object_store":
	// through the Object Store, the syncer copying them into storage.
	Route string `json:"route,omitempty"`
}

// Checkpoint routes (CheckpointConfig.Route).
const (
	RouteAuto        = "auto"
	RouteStorage     = "storage"
	RouteObjectStore = "object_store"
)

// SyncConfig mirrors ray.train.SyncConfig.
type SyncConfig struct {
	// SyncPeriodS batches uploads; default 300.
	SyncPeriodS float64 `json:"sync_period,omitempty"`
	// SyncTimeoutS bounds one sync operation; default 1800.
	SyncTimeoutS float64 `json:"sync_timeout,omitempty"`
	// SyncArtifacts uploads files the trainable writes in its trial dir.
	SyncArtifacts bool `json:"sync_artifacts,omitempty"`
	// SyncArtifactsOnCheckpoint forces an artifact sync on each checkpoint;
	// default true (nil).
	SyncArtifactsOnCheckpoint *bool `json:"sync_artifacts_on_checkpoint,omitempty"`
	// UploadDir is where the syncer mirrors <storage_path>/<name>, every
	// sync_period and at the end (Ray ≤ 2.6's upload_dir): a remote that
	// Syncer's commands understand, or, without Syncer, a bucket URL or
	// folder gocloud opens. storage_path must then be a folder.
	UploadDir string `json:"upload_dir,omitempty"`
	// Syncer runs shell commands to mirror to UploadDir (Ray's
	// CommandBasedClient); nil uses gocloud.
	Syncer *CommandSyncer `json:"syncer,omitempty"`
	// Exclude are fnmatch patterns of paths, relative to the experiment's
	// folder, the mirror leaves out, such as "*/checkpoint_*".
	Exclude []string `json:"exclude,omitempty"`
}

// CommandSyncer holds a command syncer's shell templates (Python format
// strings, run with sh -c). {source} and {target} are replaced by the
// paths, shell-quoted; {exclude} by every Exclude pattern rendered with
// ExcludeTemplate; "{{" and "}}" are literal braces.
type CommandSyncer struct {
	// SyncUp copies {source} (the local experiment folder) to {target}
	// (<upload_dir>/<name>). Required.
	SyncUp string `json:"sync_up"`
	// SyncDown copies {source} (<upload_dir>/<name>) into {target} (a
	// local folder); a restore uses it. Optional.
	SyncDown string `json:"sync_down,omitempty"`
	// Delete removes {target} (a dropped checkpoint's folder under
	// <upload_dir>/<name>). Optional: without it nothing is deleted.
	Delete string `json:"delete,omitempty"`
	// ExcludeTemplate renders one pattern, {pattern}, for {exclude};
	// default "--exclude {pattern}".
	ExcludeTemplate string `json:"exclude_template,omitempty"`
}

// checkObjectives checks Metrics and Modes: two or more distinct metrics,
// a mode for each, and Metric and Mode unset beside them.
func (tc *TuneConfig) checkObjectives() error {
	if len(tc.Metrics) == 0 {
		if len(tc.Modes) > 0 {
			return fieldErr("spec.tune_config.modes", "given without metrics")
		}
		return nil
	}
	switch {
	case tc.Metric != "" || tc.Mode != "":
		return fieldErr("spec.tune_config.metrics", "given with metric or mode: give one objective in metric and mode, or several in metrics and modes")
	case len(tc.Metrics) < 2:
		return fieldErr("spec.tune_config.metrics", "must name two or more metrics, got %d", len(tc.Metrics))
	case len(tc.Modes) != len(tc.Metrics):
		return fieldErr("spec.tune_config.modes", "must give a mode for each of the %d metrics, got %d", len(tc.Metrics), len(tc.Modes))
	}
	seen := map[string]bool{}
	for i, m := range tc.Metrics {
		if m == "" || seen[m] {
			return fieldErr(fmt.Sprintf("spec.tune_config.metrics[%d]", i), "must be a distinct, non-empty metric name, got %q", m)
		}
		seen[m] = true
		if err := checkOneOf(fmt.Sprintf("spec.tune_config.modes[%d]", i), tc.Modes[i], "min", "max"); err != nil {
			return err
		}
	}
	return nil
}
