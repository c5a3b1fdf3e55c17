package restorestate

import (
	"context"
	"strings"
	"testing"

	"github.com/tunejet/tunejet/internal/state"
)

// logHolding is an event log holding one event of experiment "exp".
type logHolding struct {
	seq uint64
	id  string
}

func (l logHolding) EventIs(_ context.Context, exp string, seq uint64, id string) (bool, error) {
	return exp == "exp" && seq == l.seq && id == l.id, nil
}

func TestOfThisLog(t *testing.T) {
	log := logHolding{seq: 7, id: "exp.e7"}
	tests := []struct {
		name string
		st   state.Experiment
		last uint64
		want string // a part of the reason; "" when the snapshot is of this log
	}{
		{"its last event is in the log", state.Experiment{Name: "exp", LastSeq: 7, LastEventID: "exp.e7"}, 9, ""},
		{"another experiment", state.Experiment{Name: "other", LastSeq: 7, LastEventID: "exp.e7"}, 9, `of experiment "other"`},
		{"beyond the log's end", state.Experiment{Name: "exp", LastSeq: 12, LastEventID: "exp.e12"}, 9, "beyond the log's last event 9"},
		{"another event at its sequence", state.Experiment{Name: "exp", LastSeq: 7, LastEventID: "exp.x7"}, 9, `does not hold its last event "exp.x7" at sequence 7`},
		{"a snapshot of nothing", state.Experiment{Name: "exp"}, 9, "another log"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			why, err := OfThisLog(t.Context(), log, &tc.st, "exp", tc.last)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && why != "" || tc.want != "" && !strings.Contains(why, tc.want) {
				t.Fatalf("why %q, want %q", why, tc.want)
			}
		})
	}
}
