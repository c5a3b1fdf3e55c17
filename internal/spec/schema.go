package spec

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/tunejet/tunejet/events"
)

// Ray's message for a nested stop criterion.
const nestedStopMsg = "Stopping criteria is now flattened by default. Use forward slashes to nest values `key1/key2/key3`."

// experiment decodes the top-level mapping.
func (d *decoder) experiment(root *yaml.Node) *events.ExperimentSpec {
	s := &events.ExperimentSpec{}
	var runName string
	d.lines[""] = root.Line
	d.mapping("", root, fields{
		"name":        d.str(&s.Name),
		"trainable":   d.trainable(&s.Trainable),
		"param_space": d.paramSpace(&s.ParamSpace),
		"tune_config": d.tuneConfig(&s.TuneConfig),
		"run_config":  d.runConfig(&s.RunConfig, &runName),
	})
	d.mergeName(s, runName)
	return s
}

// mergeName reconciles the top-level name with run_config.name.
// A name given empty is given all the same: it is checked, not replaced.
func (d *decoder) mergeName(s *events.ExperimentSpec, runName string) {
	runLine, runGiven := d.lines["run_config.name"]
	_, nameGiven := d.lines["name"]
	switch {
	case !runGiven || d.bad["run_config.name"] || d.bad["name"]:
	case !nameGiven:
		s.Name = runName
		d.lines["name"] = runLine
	case s.Name != runName:
		d.fail("run_config.name", "must equal name (%q) when both are given, got %q", s.Name, runName)
	}
}

// trainable decodes a registered name or {command: [...], name: ...,
// resources: {...}}; the mapping form of a Go trainable is {name: ...,
// resources: {...}}.
func (d *decoder) trainable(t *events.Trainable) setter {
	return func(key string, n *yaml.Node) {
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
			t.Name = n.Value
			return
		}
		if !d.expect(key, n, yaml.MappingNode, "a registered trainable name or a mapping {command: [...]}") {
			return
		}
		d.mapping(key, n, fields{
			"command":   d.strings(&t.Command),
			"name":      d.str(&t.Name),
			"resources": d.resources(&t.Resources),
		})
		_, named := d.lines[join(key, "name")]
		if _, ok := d.lines[join(key, "command")]; !ok && !named {
			d.fail(join(key, "command"), "required in the mapping form, e.g. command: [\"python3\", \"train.py\"], unless name names a registered Go trainable")
		}
	}
}

// paramSpace decodes the space as plain values; search.ParseSpace checks it
// later. A space with undecodable parts is dropped, so that it is not
// checked again.
func (d *decoder) paramSpace(p *map[string]any) setter {
	return func(key string, n *yaml.Node) {
		if !d.expect(key, n, yaml.MappingNode, "a mapping") {
			return
		}
		errs := len(d.errs)
		m := d.value(key, n).(map[string]any)
		if len(d.errs) == errs {
			*p = m
		}
	}
}

func (d *decoder) tuneConfig(tc *events.TuneConfig) setter {
	return func(key string, n *yaml.Node) {
		d.mapping(key, n, fields{
			"num_samples":           d.integer(&tc.NumSamples),
			"metric":                d.str(&tc.Metric),
			"mode":                  d.str(&tc.Mode),
			"max_concurrent_trials": d.integer(&tc.MaxConcurrentTrials),
			"time_budget_s":         d.number(&tc.TimeBudgetS),
			"seed":                  d.int64Ptr(&tc.Seed),
			"search_alg":            d.searchAlg(tc),
			"search_alg_config":     d.settings(&tc.SearchAlgConfig),
			"points_to_evaluate":    d.points(&tc.PointsToEvaluate),
			"scheduler":             d.scheduler(tc),
			"scheduler_config":      d.settings(&tc.SchedulerConfig),
		})
		d.oneForm(key, "search_alg", "search_alg_config")
		d.oneForm(key, "search_alg", "points_to_evaluate")
		d.oneForm(key, "scheduler", "scheduler_config")
		d.searchSeed(key, tc)
	}
}

// scheduler decodes a name (asha) or the mapping form {type: asha, max_t:
// 100, ...}: the type is the name, the other keys the settings.
func (d *decoder) scheduler(tc *events.TuneConfig) setter {
	return func(key string, n *yaml.Node) {
		if n.Kind != yaml.MappingNode {
			d.str(&tc.Scheduler)(key, n)
			return
		}
		tc.Scheduler, tc.SchedulerConfig = d.typed(key, n, "{type: asha, max_t: 100}")
	}
}

// searchAlg decodes a name (tpe) or the mapping form {type: tpe,
// n_startup_trials: 10, points_to_evaluate: [...]}: the type is the name,
// points_to_evaluate the points, the other keys the settings.
func (d *decoder) searchAlg(tc *events.TuneConfig) setter {
	return func(key string, n *yaml.Node) {
		if n.Kind != yaml.MappingNode {
			d.str(&tc.SearchAlg)(key, n)
			return
		}
		var cfg map[string]any
		tc.SearchAlg, cfg = d.typed(key, n, "{type: tpe, n_startup_trials: 10}")
		const points = "points_to_evaluate"
		if v, ok := cfg[points]; ok {
			delete(cfg, points)
			if v != nil {
				tc.PointsToEvaluate = d.pointList(join(key, points), v)
			}
		}
		if len(cfg) > 0 {
			tc.SearchAlgConfig = cfg
		}
	}
}

// typed decodes the mapping form of a name and its settings: the name
// under type, the settings as plain values (nil when there are none).
func (d *decoder) typed(key string, n *yaml.Node, example string) (string, map[string]any) {
	m, _ := d.plain(key, n).(map[string]any)
	typ, ok := m["type"].(string)
	switch {
	case m["type"] == nil:
		d.fail(key, "the mapping form needs a type, e.g. %s", example)
	case !ok:
		d.fail(join(key, "type"), "expected a string, got %s", describeValue(m["type"]))
		d.bad[key] = true
	}
	delete(m, "type")
	if len(m) == 0 {
		m = nil
	}
	return typ, m
}

// settings decodes a mapping of settings as plain values: the wire form,
// {scheduler: asha, scheduler_config: {max_t: 100}}.
func (d *decoder) settings(p *map[string]any) setter {
	return func(key string, n *yaml.Node) {
		if !d.expect(key, n, yaml.MappingNode, "a mapping of settings") {
			return
		}
		if m, _ := d.plain(key, n).(map[string]any); len(m) > 0 {
			*p = m
		}
	}
}

// points decodes points_to_evaluate: a list of mappings.
func (d *decoder) points(p *[]map[string]any) setter {
	return func(key string, n *yaml.Node) {
		*p = d.pointList(key, d.plain(key, n))
	}
}

// pointList checks that v, a decoded value at key, is a list of mappings.
func (d *decoder) pointList(key string, v any) []map[string]any {
	l, ok := v.([]any)
	if !ok {
		d.fail(key, "expected a list of mappings (configs), got %s", describeValue(v))
		return nil
	}
	out := make([]map[string]any, 0, len(l))
	for i, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			d.fail(join(key, strconv.Itoa(i)), "expected a mapping (a config), got %s", describeValue(e))
			continue
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// oneForm refuses settings given both in the mapping form of name and
// under other, the wire form.
func (d *decoder) oneForm(key, name, other string) {
	if _, ok := d.lines[join(key, other)]; !ok {
		return
	}
	if _, ok := d.lines[join(join(key, name), "type")]; ok {
		d.fail(join(key, other), "give %s's settings in one place: in the mapping %s: {type: ...} or here", name, name)
	}
}

// searchSeed copies the search algorithm's seed (Optuna's seed) to
// tune_config.seed when that is unset: tpe draws from the experiment's
// seed.
func (d *decoder) searchSeed(key string, tc *events.TuneConfig) {
	seed, ok := tc.SearchAlgConfig["seed"].(int)
	if !ok || tc.Seed != nil {
		return
	}
	s := int64(seed)
	tc.Seed = &s
	d.lines[join(key, "seed")] = d.lineOf(join(join(key, "search_alg"), "seed"))
}

func (d *decoder) runConfig(rc *events.RunConfig, name *string) setter {
	return func(key string, n *yaml.Node) {
		d.mapping(key, n, fields{
			"storage_path":      d.str(&rc.StoragePath),
			"name":              d.str(name),
			"stop":              d.stop(&rc.Stop),
			"stoppers":          d.stoppers(&rc.Stoppers),
			"failure_config":    d.failureConfig(&rc.FailureConfig),
			"checkpoint_config": d.checkpointConfig(&rc.CheckpointConfig),
			"sync_config":       d.syncConfig(&rc.SyncConfig),
		})
	}
}

// stop decodes a mapping of result keys to thresholds.
func (d *decoder) stop(p *map[string]float64) setter {
	return func(key string, n *yaml.Node) {
		if !d.expect(key, n, yaml.MappingNode, "a mapping of result keys to numbers") {
			return
		}
		m := map[string]float64{}
		d.pairs(key, n, func(path string, k, v *yaml.Node) {
			if v.Kind == yaml.MappingNode {
				d.fail(path, nestedStopMsg)
				return
			}
			var f float64
			if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool" {
				// Ray's stop={"done": True}: compared as result >= True, 1.
				var b bool
				if d.decode(path, v, &b) && b {
					f = 1
				}
			} else {
				d.number(&f)(path, v)
			}
			if !d.bad[path] {
				m[k.Value] = f
			}
		})
		*p = m
	}
}

// stoppers decodes a list of stoppers or one mapping as plain values;
// internal/stopper checks them later.
func (d *decoder) stoppers(p *any) setter {
	return func(key string, n *yaml.Node) {
		if n.Kind != yaml.SequenceNode && n.Kind != yaml.MappingNode {
			d.fail(key, "expected a list of stoppers or a mapping {type: ...}, got %s", describe(n))
			return
		}
		*p = d.plain(key, n)
	}
}

// plain decodes n at key with value and refuses NaN and infinities, which
// the spec's JSON cannot hold.
func (d *decoder) plain(key string, n *yaml.Node) any {
	v := d.value(key, n)
	d.finite(key, v)
	return v
}

// finite reports each NaN or infinite number in v, at its key.
func (d *decoder) finite(key string, v any) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			d.fail(key, "expected a finite number, got %v; JSON cannot hold it", x)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			d.finite(join(key, k), x[k])
		}
	case []any:
		for i, e := range x {
			d.finite(join(key, strconv.Itoa(i)), e)
		}
	}
}

func (d *decoder) failureConfig(fc *events.FailureConfig) setter {
	return func(key string, n *yaml.Node) {
		d.mapping(key, n, fields{
			"max_failures":        d.integer(&fc.MaxFailures),
			"fail_fast":           d.failFast(&fc.FailFast),
			"heartbeat_timeout_s": d.number(&fc.HeartbeatTimeoutS),
		})
	}
}

// failFast decodes a bool or "raise" (any case) with events.ParseFailFast.
func (d *decoder) failFast(p *events.FailFast) setter {
	return func(key string, n *yaml.Node) {
		ff, err := events.ParseFailFast(failFastValue(n))
		if err != nil {
			d.fail(key, "%s", err.Error())
			return
		}
		*p = ff
	}
}

// failFastValue is n as ParseFailFast takes it: a bool for a YAML boolean,
// the text of any other scalar, a description of anything else.
func failFastValue(n *yaml.Node) any {
	var b bool
	switch {
	case n.Kind != yaml.ScalarNode:
		return describe(n)
	case n.ShortTag() == "!!bool" && n.Decode(&b) == nil:
		return b
	}
	return n.Value
}

func (d *decoder) checkpointConfig(cc *events.CheckpointConfig) setter {
	return func(key string, n *yaml.Node) {
		d.mapping(key, n, fields{
			"num_to_keep":                d.integer(&cc.NumToKeep),
			"checkpoint_score_attribute": d.str(&cc.ScoreAttribute),
			"checkpoint_score_order":     d.str(&cc.ScoreOrder),
			"route":                      d.str(&cc.Route),
		})
	}
}

func (d *decoder) syncConfig(sc *events.SyncConfig) setter {
	return func(key string, n *yaml.Node) {
		d.mapping(key, n, fields{
			"sync_period":                  d.number(&sc.SyncPeriodS),
			"sync_timeout":                 d.number(&sc.SyncTimeoutS),
			"sync_artifacts":               d.boolean(&sc.SyncArtifacts),
			"sync_artifacts_on_checkpoint": d.boolPtr(&sc.SyncArtifactsOnCheckpoint),
			"upload_dir":                   d.str(&sc.UploadDir),
			"syncer":                       d.commandSyncer(&sc.Syncer),
			"exclude":                      d.strings(&sc.Exclude),
		})
	}
}

// commandSyncer decodes sync_config.syncer, a mapping of shell templates.
func (d *decoder) commandSyncer(p **events.CommandSyncer) setter {
	return func(key string, n *yaml.Node) {
		cs := &events.CommandSyncer{}
		d.mapping(key, n, fields{
			"sync_up":          d.str(&cs.SyncUp),
			"sync_down":        d.str(&cs.SyncDown),
			"delete":           d.str(&cs.Delete),
			"exclude_template": d.str(&cs.ExcludeTemplate),
		})
		*p = cs
	}
}

// describeValue names a decoded value's type and value for messages.
func describeValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("string %q", x)
	case bool:
		return fmt.Sprintf("boolean %v", x)
	}
	return fmt.Sprintf("number %v", v)
}
