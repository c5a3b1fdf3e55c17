package sched

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDescribeLongRung: a rung judged against 12 rewards lists them in
// the reason and in the description (tunejet explain's line, read back
// from the decision's detail) the same way: the first and last four
// around "…".
func TestDescribeLongRung(t *testing.T) {
	a := newASHA(t, nil)
	for i := range 12 {
		id := string(rune('a' + i))
		a.Add(id, nil)
		a.Result(result(id, 1, float64(i+1)/10), Context{})
	}
	a.Add("x", nil)
	d := a.Result(result("x", 1, 0.05), Context{})[0]
	const values = "[0.1 0.2 0.3 0.4 … 0.9 1 1.1 1.2]"
	if !strings.HasSuffix(d.Reason, " rewards "+values) {
		t.Errorf("reason %q does not end with the values %s", d.Reason, values)
	}

	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var detail map[string]any
	if err := json.Unmarshal(b, &detail); err != nil {
		t.Fatal(err)
	}
	back, err := DecisionOf(detail)
	if err != nil {
		t.Fatal(err)
	}
	want := "at t 1: rung 1 of bracket 0; reward 0.05 < cutoff 0.925, the 75th percentile of 12 other trials' rewards between 0.9 and 1 " + values
	if got := back.Describe("t", nil); got != want {
		t.Errorf("description\n got %q\nwant %q", got, want)
	}
}
