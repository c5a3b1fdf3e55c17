package spec

import (
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

// trainable decodes a registered name or {command: [...], name: ...}.
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
			"command": d.strings(&t.Command),
			"name":    d.str(&t.Name),
		})
		if _, ok := d.lines[join(key, "command")]; !ok {
			d.fail(join(key, "command"), "required in the mapping form, e.g. command: [\"python3\", \"train.py\"]")
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
			"search_alg":            d.str(&tc.SearchAlg),
			"scheduler":             d.str(&tc.Scheduler),
		})
	}
}

func (d *decoder) runConfig(rc *events.RunConfig, name *string) setter {
	return func(key string, n *yaml.Node) {
		d.mapping(key, n, fields{
			"storage_path":      d.str(&rc.StoragePath),
			"name":              d.str(name),
			"stop":              d.stop(&rc.Stop),
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
			d.number(&f)(path, v)
			if !d.bad[path] {
				m[k.Value] = f
			}
		})
		*p = m
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
		})
	}
}
