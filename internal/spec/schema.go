package spec

import (
	"maps"
	"math"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/tunejet/tunejet/events"

	"github.com/tunejet/tunejet/internal/settings"
)

// Ray's message for a nested stop criterion.
const nestedStopMsg = "Stopping criteria is now flattened by default. Use forward slashes to nest values `key1/key2/key3`."

// experiment reads the file into a spec: each section into its events
// struct by the struct's json names, and the keys of other shapes with
// the readers below.
func (d *decoder) experiment(root *yaml.Node) *events.ExperimentSpec {
	s := &events.ExperimentSpec{}
	tc, rc := &s.TuneConfig, &s.RunConfig
	var runName string
	d.lines[""] = root.Line
	var p settings.Problems
	section(s, settings.Fields{
		"trainable":   d.trainable(&s.Trainable),
		"param_space": d.paramSpace(&s.ParamSpace),
		"tune_config": section(tc, settings.Fields{
			"metric":             oneOrMany(&tc.Metric, &tc.Metrics, "a metric name"),
			"mode":               oneOrMany(&tc.Mode, &tc.Modes, `"min" or "max"`),
			"search_alg":         d.searchAlg(tc),
			"search_alg_config":  settingsMap(&tc.SearchAlgConfig),
			"points_to_evaluate": points(&tc.PointsToEvaluate),
			"scheduler":          d.scheduler(tc),
			"scheduler_config":   settingsMap(&tc.SchedulerConfig),
		}),
		"run_config": section(rc, settings.Fields{
			"name":           settings.For(&runName),
			"stop":           stop(&rc.Stop),
			"stoppers":       stoppers(&rc.Stoppers),
			"failure_config": section(&rc.FailureConfig, settings.Fields{"fail_fast": failFast(&rc.FailureConfig.FailFast)}),
		}),
	})(&p, d.value("", root))
	d.record(&p)
	d.oneForm("search_alg", "search_alg_config")
	d.oneForm("search_alg", "points_to_evaluate")
	d.oneForm("scheduler", "scheduler_config")
	oneObjective(tc)
	for _, k := range []string{"metric", "mode"} {
		if d.has("tune_config."+k) && d.has("tune_config."+k+"s") {
			d.fail("tune_config."+k+"s", "give the %ss in one place: %s: [...] (Ray's form) or here", k, k)
		}
	}
	d.searchSeed(tc)
	d.mergeName(s, runName)
	return s
}

// section reads a mapping into the struct dst points to, extra reading
// the keys of other shapes.
func section(dst any, extra settings.Fields) settings.Reader {
	return func(p *settings.Problems, v any) {
		if m, ok := settings.Map(p, v); ok {
			settings.Decode(p, p.Key(""), m, dst, extra)
		}
	}
}

// oneOrMany reads Ray's metric or mode: one string into *one, or a list
// of them (several objectives) into *many; oneObjective makes a list of
// one that one.
func oneOrMany(one *string, many *[]string, what string) settings.Reader {
	return func(p *settings.Problems, v any) {
		switch x := v.(type) {
		case string:
			*one = x
			return
		case []any:
			names := make([]string, len(x))
			for i, e := range x {
				s, ok := e.(string)
				if !ok {
					p.Add("", "expected %s or a list of them, got %s in the list", what, settings.Describe(e))
					return
				}
				names[i] = s
			}
			*many = names
			return
		}
		p.Add("", "expected %s or a list of them (several objectives), got %s", what, settings.Describe(v))
	}
}

// oneObjective makes a metric list of one, and a mode list of one beside
// it, that metric and mode, as Ray takes metric=["loss"].
func oneObjective(tc *events.TuneConfig) {
	if len(tc.Metrics) > 1 || len(tc.Modes) > 1 || tc.Metric != "" && len(tc.Metrics) > 0 || tc.Mode != "" && len(tc.Modes) > 0 {
		return
	}
	if len(tc.Metrics) == 1 {
		tc.Metric, tc.Metrics = tc.Metrics[0], nil
	}
	if len(tc.Modes) == 1 {
		tc.Mode, tc.Modes = tc.Modes[0], nil
	}
}

// mergeName reconciles the top-level name with run_config.name.
// A name given empty is given all the same: it is checked, not replaced.
func (d *decoder) mergeName(s *events.ExperimentSpec, runName string) {
	switch {
	case !d.given("run_config.name") || d.bad["name"]:
	case !d.has("name"):
		s.Name = runName
		d.lines["name"] = d.lines["run_config.name"]
		delete(d.null, "name")
	case s.Name != runName:
		d.fail("run_config.name", "must equal name (%q) when both are given, got %q", s.Name, runName)
	}
}

// trainable reads a registered name or {command: [...], name: ...,
// resources: {...}}; the mapping form of a Go trainable is {name: ...,
// resources: {...}}.
func (d *decoder) trainable(t *events.Trainable) settings.Reader {
	form := section(t, settings.Fields{"command": command(&t.Command), "resources": resources(&t.Resources)})
	return func(p *settings.Problems, v any) {
		switch x := v.(type) {
		case string:
			t.Name = x
		case map[string]any:
			form(p, v)
			if key := p.Key(""); !d.has(join(key, "command")) && !d.has(join(key, "name")) {
				p.Add("command", "required in the mapping form, e.g. command: [\"python3\", \"train.py\"], unless name names a registered Go trainable")
			}
		default:
			p.Add("", "expected a registered trainable name or a mapping {command: [...]}, got %s", settings.Describe(v))
		}
	}
}

// command reads a list of strings, with a hint for a command given as
// one string.
func command(dst *[]string) settings.Reader {
	list := settings.For(dst)
	return func(p *settings.Problems, v any) {
		if _, ok := v.(string); ok {
			p.Add("", "expected a list of strings, got %s; write it as a list, e.g. [\"python3\", \"train.py\"]", settings.Describe(v))
			return
		}
		list(p, v)
	}
}

// paramSpace keeps the space as plain values; search.ParseSpace checks it
// later. A space with parts that could not be read is dropped, so that it
// is not checked again.
func (d *decoder) paramSpace(dst *map[string]any) settings.Reader {
	return func(p *settings.Problems, v any) {
		if m, ok := settings.Map(p, v); ok && reads(p, finite, m) && !d.spoiled(p.Key("")) {
			*dst = m
		}
	}
}

// scheduler reads a name (asha) or the mapping form {type: asha, max_t:
// 100, ...}: the type is the name, the other keys the settings.
func (d *decoder) scheduler(tc *events.TuneConfig) settings.Reader {
	name := settings.For(&tc.Scheduler)
	return func(p *settings.Problems, v any) {
		if m, ok := v.(map[string]any); ok {
			tc.Scheduler, tc.SchedulerConfig = d.typed(p, m, "{type: asha, max_t: 100}")
			return
		}
		name(p, v)
	}
}

// searchAlg reads a name (tpe) or the mapping form {type: tpe,
// n_startup_trials: 10, points_to_evaluate: [...]}: the type is the name,
// points_to_evaluate the points, the other keys the settings.
func (d *decoder) searchAlg(tc *events.TuneConfig) settings.Reader {
	name := settings.For(&tc.SearchAlg)
	return func(p *settings.Problems, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			name(p, v)
			return
		}
		var cfg map[string]any
		tc.SearchAlg, cfg = d.typed(p, m, "{type: tpe, n_startup_trials: 10}")
		const points = "points_to_evaluate"
		if v := cfg[points]; v != nil {
			tc.PointsToEvaluate = pointList(p.Under(points), v)
		}
		delete(cfg, points)
		if len(cfg) > 0 {
			tc.SearchAlgConfig = cfg
		}
	}
}

// typed reads the mapping form of a name and its settings: the name
// under type, the settings as plain values (nil when there are none).
func (d *decoder) typed(p *settings.Problems, m map[string]any, example string) (string, map[string]any) {
	finite(p, m)
	var typ string
	if m["type"] == nil {
		p.Add("", "the mapping form needs a type, e.g. %s", example)
	} else if !reads(p.Under("type"), settings.For(&typ), m["type"]) {
		d.bad[p.Key("")] = true
	}
	cfg := maps.Clone(m)
	delete(cfg, "type")
	if len(cfg) == 0 {
		cfg = nil
	}
	return typ, cfg
}

// settingsMap keeps a mapping of settings as plain values: the wire form,
// {scheduler: asha, scheduler_config: {max_t: 100}}.
func settingsMap(dst *map[string]any) settings.Reader {
	return func(p *settings.Problems, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			p.Add("", "expected a mapping of settings, got %s", settings.Describe(v))
			return
		}
		finite(p, m)
		if len(m) > 0 {
			*dst = m
		}
	}
}

// points reads points_to_evaluate: a list of mappings.
func points(dst *[]map[string]any) settings.Reader {
	return func(p *settings.Problems, v any) {
		finite(p, v)
		*dst = pointList(p, v)
	}
}

// pointList checks that v is a list of mappings.
func pointList(p *settings.Problems, v any) []map[string]any {
	l, ok := v.([]any)
	if !ok {
		p.Add("", "expected a list of mappings (configs), got %s", settings.Describe(v))
		return nil
	}
	out := make([]map[string]any, 0, len(l))
	for i, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			p.Add(strconv.Itoa(i), "expected a mapping (a config), got %s", settings.Describe(e))
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
func (d *decoder) oneForm(name, other string) {
	const key = "tune_config."
	if _, ok := d.lines[key+name+".type"]; ok && d.has(key+other) {
		d.fail(key+other, "give %s's settings in one place: in the mapping %s: {type: ...} or here", name, name)
	}
}

// searchSeed copies the search algorithm's seed (Optuna's seed) to
// tune_config.seed when that is unset: tpe, bayesopt and nsga2 draw from the
// experiment's seed.
func (d *decoder) searchSeed(tc *events.TuneConfig) {
	seed, ok := tc.SearchAlgConfig["seed"].(int)
	if !ok || tc.Seed != nil {
		return
	}
	s := int64(seed)
	tc.Seed = &s
	d.lines["tune_config.seed"] = d.lineOf("tune_config.search_alg.seed")
	delete(d.null, "tune_config.seed")
}

// stop reads a mapping of result keys to thresholds.
func stop(dst *map[string]float64) settings.Reader {
	return func(p *settings.Problems, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			p.Add("", "expected a mapping of result keys to numbers, got %s", settings.Describe(v))
			return
		}
		out := map[string]float64{}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			var x float64
			switch b, isBool := m[k].(bool); {
			case isBool:
				// Ray's stop={"done": True}: compared as result >= True, 1.
				if b {
					x = 1
				}
				out[k] = x
			case isMapping(m[k]):
				p.Add(k, nestedStopMsg)
			case reads(p.Under(k), settings.For(&x), m[k]):
				out[k] = x
			}
		}
		*dst = out
	}
}

// stoppers keeps a list of stoppers or one mapping as plain values;
// internal/stopper checks them later.
func stoppers(dst *any) settings.Reader {
	return func(p *settings.Problems, v any) {
		switch v.(type) {
		case []any, map[string]any:
			finite(p, v)
			*dst = v
		default:
			p.Add("", "expected a list of stoppers or a mapping {type: ...}, got %s", settings.Describe(v))
		}
	}
}

// isMapping reports whether v is a mapping.
func isMapping(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

// reads reports whether read took v without a problem.
func reads(p *settings.Problems, read settings.Reader, v any) bool {
	n := p.Len()
	read(p, v)
	return p.Len() == n
}

// finite refuses each NaN or infinite number in v, which the spec's JSON
// cannot hold, at its key.
func finite(p *settings.Problems, v any) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			p.Add("", "expected a finite number, got %v; JSON cannot hold it", x)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			finite(p.Under(k), x[k])
		}
	case []any:
		for i, e := range x {
			finite(p.Under(strconv.Itoa(i)), e)
		}
	}
}

// failFast reads a bool or "raise" (any case) with events.ParseFailFast.
func failFast(dst *events.FailFast) settings.Reader {
	return func(p *settings.Problems, v any) {
		switch v.(type) {
		case map[string]any, []any:
			v = settings.Describe(v)
		}
		ff, err := events.ParseFailFast(v)
		if err != nil {
			p.Add("", "%s", err)
			return
		}
		*dst = ff
	}
}
