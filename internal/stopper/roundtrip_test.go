package stopper

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// event is one folded input: a trial's result at a time.
type event struct {
	trial  string
	result map[string]any
	now    float64
}

// answer is what a stopper said about one event.
type answer struct {
	Trial, All Decision
}

// history is a fixed experiment: three trials whose loss settles at
// different speeds, with missing and NaN values among them, interleaved.
func history() []event {
	var evs []event
	now := 0.0
	for i := range 40 {
		for j, trial := range []string{"t1", "t2", "t3"} {
			now += 1.25
			var v any = 1 + float64(j) + math.Pow(0.5, float64(i*(j+1)))
			switch {
			case (i+j)%11 == 5:
				v = nil
			case (i+j)%13 == 7:
				v = math.NaN()
			}
			evs = append(evs, event{trial: trial, result: loss(v), now: now})
		}
	}
	return evs
}

// fresh is a combination of every stopper, as a config would give it.
func fresh() Stopper {
	th := 2.5
	tp := TrialPlateau("loss")
	tp.MetricThreshold, tp.Mode, tp.NumResults = &th, ModeMin, 3
	ep := ExperimentPlateau("loss")
	ep.Std, ep.Top, ep.Patience = 1e-6, 4, 3
	return Combined(MaximumIteration(35), Timeout(140), ep, tp, TrialPlateau("loss"))
}

// feed folds evs into s and returns its answers.
func feed(s Stopper, evs []event) []answer {
	out := make([]answer, len(evs))
	for i, e := range evs {
		out[i] = answer{Trial: s.StopTrial(e.trial, e.result), All: s.StopAll(e.now)}
	}
	return out
}

// roundTrip marshals s and unmarshals it again.
func roundTrip(t *testing.T, s Stopper) (Stopper, []byte) {
	t.Helper()
	b, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, back); diff != "" {
		t.Fatalf("state changed in a round trip (-before +after):\n%s", diff)
	}
	again, err := Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, again) {
		t.Fatalf("encoding changed in a round trip:\n%s\n%s", b, again)
	}
	return back, b
}

// TestRestoreAnywhere cuts the history at every event, restores the
// stopper from its JSON and goes on: the answers and the final state are
// those of the uninterrupted run.
func TestRestoreAnywhere(t *testing.T) {
	evs := history()
	whole := fresh()
	want := feed(whole, evs)
	_, wantState := roundTrip(t, whole)
	assertVaried(t, want)
	if again := feed(fresh(), evs); !cmp.Equal(want, again) {
		t.Fatal("the same results gave other answers")
	}
	for cut := range len(evs) + 1 {
		s := fresh()
		got := feed(s, evs[:cut])
		restored, _ := roundTrip(t, s)
		got = append(got, feed(restored, evs[cut:])...)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("restored after event %d (-uninterrupted +restored):\n%s", cut, diff)
		}
		if _, state := roundTrip(t, restored); !bytes.Equal(state, wantState) {
			t.Fatalf("restored after event %d: final state\n%s\nwant\n%s", cut, state, wantState)
		}
	}
}

// assertVaried checks that the history exercises every stopper, so that
// the restore test means something.
func assertVaried(t *testing.T, as []answer) {
	t.Helper()
	seen := map[string]bool{}
	for _, a := range as {
		for _, d := range []Decision{a.Trial, a.All} {
			if d.Stop {
				seen[kindOfReason(d.Reason)] = true
			}
		}
	}
	for _, k := range []string{"maximum iteration", "plateau", "experiment plateau", "timeout"} {
		if !seen[k] {
			t.Errorf("no %s decision in the history; seen %v", k, seen)
		}
	}
}

// kindOfReason is a reason's text before its colon.
func kindOfReason(r string) string {
	k, _, _ := strings.Cut(r, ":")
	return k
}

func TestUnmarshalErrors(t *testing.T) {
	for _, src := range []string{`{`, `{"type":"median"}`, `{"type":"timeout","stopper":{"timeout":"x"}}`,
		`{"type":"combined","stopper":{"stoppers":[{"type":"nope"}]}}`} {
		if s, err := Unmarshal([]byte(src)); err == nil {
			t.Errorf("Unmarshal(%s) = %v, want an error", src, s)
		}
	}
}
