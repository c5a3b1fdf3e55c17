package state

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/tunejet/tunejet/events"
)

func names(cs []events.CheckpointRef) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// register feeds checkpoints with the given scores (nil: no score key) to
// a fresh trial.
func register(cfg events.CheckpointConfig, scores ...any) *Trial {
	t := &Trial{}
	for i, s := range scores {
		m := map[string]any{"training_iteration": float64(i + 1)}
		if s != nil {
			m["score"] = s
		}
		t.registerCheckpoint(events.CheckpointRef{Name: fmt.Sprintf("checkpoint_%06d", i), Index: i, Metrics: m}, cfg, nil)
	}
	return t
}

func TestRetentionAsRay(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name          string
		cfg           events.CheckpointConfig
		scores        []any
		kept, dropped []string
	}{
		{"keep all by default", events.CheckpointConfig{}, []any{nil, nil, nil},
			[]string{"checkpoint_000000", "checkpoint_000001", "checkpoint_000002"}, []string{}},
		{"num_to_keep 2 over 5 unscored keeps the last two", events.CheckpointConfig{NumToKeep: 2}, []any{nil, nil, nil, nil, nil},
			[]string{"checkpoint_000003", "checkpoint_000004"}, []string{"checkpoint_000000", "checkpoint_000001", "checkpoint_000002"}},
		{"scored: top 2 plus the latest until a newer one supersedes it",
			events.CheckpointConfig{NumToKeep: 2, ScoreAttribute: "score", ScoreOrder: "max"}, []any{5.0, 10.0, 8.0, 1.0, 2.0},
			[]string{"checkpoint_000001", "checkpoint_000002", "checkpoint_000004"}, []string{"checkpoint_000000", "checkpoint_000003"}},
		{"min order", events.CheckpointConfig{NumToKeep: 1, ScoreAttribute: "score", ScoreOrder: "min"}, []any{5.0, 1.0, 3.0},
			[]string{"checkpoint_000001", "checkpoint_000002"}, []string{"checkpoint_000000"}},
		{"NaN ranks worst", events.CheckpointConfig{NumToKeep: 1, ScoreAttribute: "score", ScoreOrder: "min"}, []any{nan, 7.0, 9.0},
			[]string{"checkpoint_000001", "checkpoint_000002"}, []string{"checkpoint_000000"}},
		{"missing ranks worst under max", events.CheckpointConfig{NumToKeep: 1, ScoreAttribute: "score", ScoreOrder: "max"}, []any{nil, 1.0, 0.5},
			[]string{"checkpoint_000001", "checkpoint_000002"}, []string{"checkpoint_000000"}},
		{"missing ranks worst under min too (unlike Ray)", events.CheckpointConfig{NumToKeep: 1, ScoreAttribute: "score", ScoreOrder: "min"}, []any{nil, 1.0, 0.5},
			[]string{"checkpoint_000002"}, []string{"checkpoint_000000", "checkpoint_000001"}},
		{"ties: the newer counts as better", events.CheckpointConfig{NumToKeep: 1, ScoreAttribute: "score"}, []any{1.0, 1.0, 0.0},
			[]string{"checkpoint_000001", "checkpoint_000002"}, []string{"checkpoint_000000"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := register(tc.cfg, tc.scores...)
			if got := names(tr.Checkpoints); !reflect.DeepEqual(got, tc.kept) {
				t.Errorf("kept %v, want %v", got, tc.kept)
			}
			if got := names(tr.Dropped); !reflect.DeepEqual(got, tc.dropped) {
				t.Errorf("dropped %v, want %v", got, tc.dropped)
			}
			if last := tr.LatestCheckpoint(); last.Name != fmt.Sprintf("checkpoint_%06d", len(tc.scores)-1) {
				t.Errorf("latest is %s, want the last registered", last.Name)
			}
		})
	}
}

func TestBestCheckpointsWorstToBest(t *testing.T) {
	cfg := events.CheckpointConfig{NumToKeep: 2, ScoreAttribute: "score", ScoreOrder: "max"}
	tr := register(cfg, 5.0, 10.0, 8.0, 1.0)
	if got := names(tr.BestCheckpoints(cfg)); !reflect.DeepEqual(got, []string{"checkpoint_000002", "checkpoint_000001"}) {
		t.Fatalf("best checkpoints %v, want [8, 10] as checkpoint_000002, checkpoint_000001", got)
	}
}

func TestLookupNested(t *testing.T) {
	m := map[string]any{"a": map[string]any{"b": map[string]any{"c": 3.0}}, "x/y": 1.0}
	if Lookup(m, "a/b/c") != 3.0 || Lookup(m, "x/y") != 1.0 || Lookup(m, "a/z") != nil {
		t.Fatal("nested lookup")
	}
}

// TestRetentionKeepsPinnedCheckpoints: a checkpoint a PBT exploit resumes
// another trial from is kept past num_to_keep, and goes with the next
// checkpoint once nothing pins it.
func TestRetentionKeepsPinnedCheckpoints(t *testing.T) {
	cfg := events.CheckpointConfig{NumToKeep: 1}
	tr := &Trial{}
	ref := func(i int) events.CheckpointRef {
		return events.CheckpointRef{Name: fmt.Sprintf("checkpoint_%06d", i), Index: i}
	}
	tr.registerCheckpoint(ref(0), cfg, nil)
	tr.registerCheckpoint(ref(1), cfg, map[string]bool{"checkpoint_000000": true})
	tr.registerCheckpoint(ref(2), cfg, map[string]bool{"checkpoint_000000": true})
	if got, want := names(tr.Checkpoints), []string{"checkpoint_000000", "checkpoint_000002"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("kept %v while checkpoint_000000 is pinned, want %v", got, want)
	}
	tr.registerCheckpoint(ref(3), cfg, nil)
	if got, want := names(tr.Checkpoints), []string{"checkpoint_000003"}; !reflect.DeepEqual(got, want) {
		t.Errorf("kept %v once nothing pins, want %v", got, want)
	}
	if got, want := names(tr.Dropped), []string{"checkpoint_000001", "checkpoint_000000", "checkpoint_000002"}; !reflect.DeepEqual(got, want) {
		t.Errorf("dropped %v, want %v", got, want)
	}
}
