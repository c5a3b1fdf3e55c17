package state

import (
	"math"
	"slices"

	"github.com/tunejet/tunejet/events"
)

// registerCheckpoint adds a checkpoint with Ray's retention: with
// num_to_keep K, the kept checkpoints are the top K by score (or the latest
// K without a score attribute) plus the latest, which is never dropped.
// Dropped ones wait in Dropped until the syncer deletes them, after a
// snapshot that no longer refers to them is durable.
//
// A checkpoint in pinned is kept whatever its rank: a PBT exploit resumes
// another trial from it.
func (t *Trial) registerCheckpoint(c events.CheckpointRef, cfg events.CheckpointConfig, pinned map[string]bool) {
	all := append(slices.Clone(t.Checkpoints), c)
	if cfg.NumToKeep <= 0 {
		t.Checkpoints = all
		return
	}
	ranked := rank(all, cfg)
	keep := map[string]bool{c.Name: true}
	for name := range pinned {
		keep[name] = true
	}
	for _, r := range ranked[max(0, len(ranked)-cfg.NumToKeep):] {
		keep[r.Name] = true
	}
	t.Checkpoints = t.Checkpoints[:0:0]
	for _, x := range all {
		if keep[x.Name] {
			t.Checkpoints = append(t.Checkpoints, x)
		} else {
			t.Dropped = append(t.Dropped, x)
		}
	}
}

// rank orders checkpoints worst to best (Ray's ascending list): by score,
// newer to the right of equal scores; without a score attribute, by time.
func rank(cs []events.CheckpointRef, cfg events.CheckpointConfig) []events.CheckpointRef {
	out := slices.Clone(cs)
	if cfg.ScoreAttribute == "" {
		return out
	}
	slices.SortStableFunc(out, func(a, b events.CheckpointRef) int {
		sa, oka := Score(a, cfg)
		sb, okb := Score(b, cfg)
		switch {
		case oka != okb:
			if oka {
				return 1
			}
			return -1
		case sa < sb:
			return -1
		case sa > sb:
			return 1
		}
		return 0
	})
	return out
}

// Score is a checkpoint's rank value: its score attribute, negated for
// "min". ok is false when the value is missing or NaN: such a checkpoint
// ranks worst in both orders (tunejet's deviation from Ray, where a missing
// value ranks best under "min").
func Score(c events.CheckpointRef, cfg events.CheckpointConfig) (v float64, ok bool) {
	f, isNum := Lookup(c.Metrics, cfg.ScoreAttribute).(float64)
	if !isNum || math.IsNaN(f) {
		return 0, false
	}
	if cfg.ScoreOrder == "min" {
		f = -f
	}
	return f, true
}

// Lookup reads a result key; "/" separates nested keys
// (events.ResultValue). It is nil when the result has none.
func Lookup(m map[string]any, key string) any {
	v, _ := events.ResultValue(m, key)
	return v
}

// BestCheckpoints is Ray's best_checkpoints: the top num_to_keep kept
// checkpoints (all when unset), worst to best.
func (t *Trial) BestCheckpoints(cfg events.CheckpointConfig) []events.CheckpointRef {
	ranked := rank(t.Checkpoints, cfg)
	if cfg.NumToKeep > 0 && len(ranked) > cfg.NumToKeep {
		ranked = ranked[len(ranked)-cfg.NumToKeep:]
	}
	return ranked
}
