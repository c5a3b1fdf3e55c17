package tune

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/blobsync"
	"github.com/tunejet/tunejet/internal/ckpt/direct"
	"github.com/tunejet/tunejet/internal/moo"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// Checkpoint is a checkpoint in storage.
type Checkpoint struct {
	// Name is checkpoint_NNNNNN.
	Name string
	// Path is its folder: a directory path or a storage URL.
	Path string
	// Metrics is the result reported with it.
	Metrics map[string]any

	storagePath, key string // the storage and the folder's key prefix in it
}

// Result is one trial's outcome (Ray's Result).
type Result struct {
	TrialID   string
	TrialName string
	Status    string
	Config    map[string]any
	// Metrics is the trial's last result.
	Metrics map[string]any
	// Error is the trial's last error when it ended ERROR, else nil.
	Error error
	// Path is the trial's directory in storage.
	Path string
	// NumFailures counts the trial's failures against max_failures.
	NumFailures int
	// EndReason says why the trial ended: "finished", "stop_criteria",
	// "stopped", "time_budget", or the scheduler's or a stopper's reason
	// ("scheduler: stopped at rung 4 ..."). Empty while it runs.
	EndReason string
	// Checkpoint is the trial's latest checkpoint, or nil.
	Checkpoint *Checkpoint
	// BestCheckpoints are the kept checkpoints ranked by
	// checkpoint_score_attribute (or by time), worst to best, at most
	// num_to_keep of them (Ray's best_checkpoints).
	BestCheckpoints []Checkpoint

	analysis map[string]*state.MetricStats
}

// ResultGrid holds the results of an experiment (Ray's ResultGrid).
type ResultGrid struct {
	// ExperimentPath is the experiment directory in storage.
	ExperimentPath string
	// Snapshot is the state file LoadResults read, and Skipped the newer
	// ones it passed over as damaged, each with why ("FILE: corrupt
	// experiment state: ..."); both empty for the results of a Fit.
	Snapshot     string
	Skipped      []string
	storagePath  string
	results      []Result
	metric, mode string
	objectives   []events.Objective // with several metrics
}

// newResultGrid builds the results of a folded experiment whose storage is
// storagePath (the experiment directory is <storagePath>/<name>).
func newResultGrid(st *state.Experiment, storagePath string) *ResultGrid {
	g := &ResultGrid{storagePath: storagePath}
	var cc events.CheckpointConfig
	if st.Spec != nil {
		g.metric, g.mode = st.Spec.TuneConfig.Metric, st.Spec.TuneConfig.Mode
		if st.Spec.TuneConfig.MultiObjective() {
			g.objectives = st.Spec.TuneConfig.Objectives()
		}
		cc = st.Spec.RunConfig.CheckpointConfig
	}
	if storagePath != "" {
		g.ExperimentPath = storage.Join(storagePath, st.Name)
	}
	for _, t := range st.TrialList() {
		r := Result{
			TrialID: t.ID, TrialName: t.Name, Status: t.Status, Config: t.Config, Metrics: t.LastResult,
			NumFailures: t.NumFailures, EndReason: t.EndReason, analysis: t.Metrics,
		}
		if g.ExperimentPath != "" {
			r.Path = storage.Join(g.ExperimentPath, t.DirName)
		}
		if t.Status == events.StatusError {
			r.Error = errors.New(t.LastError)
		}
		ck := func(c events.CheckpointRef) Checkpoint {
			return Checkpoint{Name: c.Name, Path: storage.Join(r.Path, c.Name), Metrics: c.Metrics,
				storagePath: storagePath, key: st.Name + "/" + t.DirName + "/" + c.Name + "/"}
		}
		if c := t.LatestCheckpoint(); c != nil {
			latest := ck(*c)
			r.Checkpoint = &latest
		}
		for _, c := range t.BestCheckpoints(cc) {
			r.BestCheckpoints = append(r.BestCheckpoints, ck(c))
		}
		g.results = append(g.results, r)
	}
	return g
}

// LoadResults reads the results of an experiment from its newest state
// file in storage. path is the experiment directory: a local path
// ("~/tunejet_results/my_exp") or a storage URL ("s3://bkt/results/my_exp").
func LoadResults(ctx context.Context, path string) (*ResultGrid, error) {
	p, err := storage.Resolve(path, "")
	if err != nil {
		return nil, err
	}
	b, err := storage.OpenBucket(ctx, p)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	st, key, skipped, err := storage.LoadNewestState(ctx, b)
	if errors.Is(err, state.ErrCorrupt) {
		return nil, fmt.Errorf("%s: %w", storage.Join(p, key), err)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no experiment snapshot file of form 'experiment_state-*.json' was found at %s; check that the path is the combination of storage_path and name of your run: %w", p, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	g := newResultGrid(st, parentOf(p))
	g.Snapshot = key
	for _, sk := range skipped {
		g.Skipped = append(g.Skipped, sk.String())
	}
	return g, nil
}

// parentOf is the storage path that holds the experiment directory p.
func parentOf(p string) string {
	if !storage.IsURL(p) {
		return filepath.Dir(filepath.Clean(p))
	}
	u, err := url.Parse(p)
	if err != nil {
		return p
	}
	u.Path = path.Dir(strings.TrimSuffix(u.Path, "/"))
	return u.String()
}

// Download copies a checkpoint from storage into dir (created if needed),
// e.g. to serve the best model.
func (c *Checkpoint) Download(ctx context.Context, dir string) error {
	b, err := storage.OpenBucket(ctx, c.storagePath)
	if err != nil {
		return err
	}
	defer b.Close()
	// A checkpoint a runner wrote straight to storage holds its manifest,
	// which is not the trainable's.
	if err := blobsync.SyncDown(ctx, b, c.key, dir, []string{direct.ManifestFile}); err != nil {
		return fmt.Errorf("download %s: %w", c.Path, err)
	}
	return os.MkdirAll(dir, 0o755) // an empty checkpoint stores no files
}

// Len is the number of trials.
func (g *ResultGrid) Len() int { return len(g.results) }

// Get returns the i-th trial's result, in creation order.
func (g *ResultGrid) Get(i int) *Result { return &g.results[i] }

// Results returns every trial's result.
func (g *ResultGrid) Results() []Result { return append([]Result(nil), g.results...) }

// Errors returns the errors of the trials that ended ERROR.
func (g *ResultGrid) Errors() []error {
	var out []error
	for _, r := range g.results {
		if r.Error != nil {
			out = append(out, r.Error)
		}
	}
	return out
}

// NumErrors counts the trials that ended ERROR.
func (g *ResultGrid) NumErrors() int { return g.count(events.StatusError) }

// NumTerminated counts the trials that ended TERMINATED.
func (g *ResultGrid) NumTerminated() int { return g.count(events.StatusTerminated) }

func (g *ResultGrid) count(status string) int {
	n := 0
	for _, r := range g.results {
		if r.Status == status {
			n++
		}
	}
	return n
}

// Objectives are the metrics the experiment optimized together, each with
// its mode; nil when it optimized one metric (or none).
func (g *ResultGrid) Objectives() []events.Objective { return g.objectives }

// ParetoFront returns, for an experiment of several metrics, the trials no
// other trial dominates (Optuna's study.best_trials): among the trials
// that ended TERMINATED with a finite last value of every metric, those
// for which no other is at least as good in every metric and better in
// one, each metric by its mode. They come in creation order; nil for an
// experiment of one metric, whose best is GetBestResult's.
func (g *ResultGrid) ParetoFront() []Result {
	if len(g.objectives) == 0 {
		return nil
	}
	var finished []int
	var points [][]float64
	for i, r := range g.results {
		values, ok := events.ObjectiveValues(r.Metrics, g.objectives)
		if r.Status != events.StatusTerminated || !ok {
			continue
		}
		for j, o := range g.objectives {
			values[j] = o.Minimized(values[j])
		}
		finished, points = append(finished, i), append(points, values)
	}
	var out []Result
	for _, k := range moo.Front(points) {
		out = append(out, g.results[finished[k]])
	}
	return out
}

// Scopes accepted by GetBestResult.
var Scopes = []string{"all", "last", "avg", "last-5-avg", "last-10-avg"}

// GetBestResult returns the best trial by metric and mode ("min" or
// "max"); empty arguments default to the TuneConfig's. scope is Ray's:
// "last" compares each trial's last value, "all" its best value, "avg",
// "last-5-avg" and "last-10-avg" averages. NaN and infinite values are
// skipped. Errors keep Ray's wording.
func (g *ResultGrid) GetBestResult(metric, mode, scope string) (*Result, error) {
	if len(g.results) == 1 {
		return &g.results[0], nil
	}
	if metric == "" {
		metric = g.metric
	}
	if mode == "" {
		mode = g.mode
	}
	if scope == "" {
		scope = "last"
	}
	if metric == "" {
		return nil, errors.New("No metric is provided. Either pass in a `metric` arg to `GetBestResult` or specify a metric in the `TuneConfig` of your `Tuner`.") //nolint:staticcheck // Ray's message, word for word
	}
	if mode == "" {
		return nil, errors.New("No mode is provided. Either pass in a `mode` arg to `GetBestResult` or specify a mode in the `TuneConfig` of your `Tuner`.") //nolint:staticcheck // Ray's message, word for word
	}
	if mode != "min" && mode != "max" {
		return nil, fmt.Errorf("If set, `mode` has to be one of [min, max], got %q", mode) //nolint:staticcheck // Ray's message, word for word
	}
	if !validScope(scope) {
		return nil, fmt.Errorf("ExperimentAnalysis: attempting to get best trial for metric %s for scope %s not in %q. If you didn't pass a `metric` parameter to `tune.run()`, you have to pass one when fetching the best trial.", metric, scope, Scopes) //nolint:staticcheck // Ray's message, word for word
	}
	var best *Result
	bestV := 0.0
	for i := range g.results {
		v, ok := g.results[i].score(metric, mode, scope)
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		if best == nil || (mode == "max" && v > bestV) || (mode == "min" && v < bestV) {
			best, bestV = &g.results[i], v
		}
	}
	if best == nil {
		return nil, fmt.Errorf("No best trial found for the given metric: %s. This means that no trial has reported this metric, or all values reported for this metric are NaN.", metric) //nolint:staticcheck // Ray's message, word for word
	}
	return best, nil
}

func validScope(s string) bool {
	for _, x := range Scopes {
		if s == x {
			return true
		}
	}
	return false
}

// score is the trial's value of metric under scope.
func (r *Result) score(metric, mode, scope string) (float64, bool) {
	m := r.analysis[metric]
	if m == nil || m.Count == 0 {
		return 0, false
	}
	switch scope {
	case "all":
		if mode == "max" {
			return m.Max, true
		}
		return m.Min, true
	case "avg":
		return m.Avg(), true
	case "last-5-avg":
		return m.LastNAvg(5), true
	case "last-10-avg":
		return m.LastNAvg(10), true
	}
	return m.Last, true
}
