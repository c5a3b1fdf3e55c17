package sched

import (
	"fmt"
	"slices"
	"testing"
)

func newHyperBand(t *testing.T) *HyperBand {
	t.Helper()
	cfg := DefaultHyperBandConfig()
	cfg.Objective = Objective{Metric: "m", Mode: Max}
	cfg.TimeAttr = "t"
	h, err := NewHyperBand(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHyperBandBrackets writes out Ray's brackets for max_t 81, eta 3:
// s_max_1 = round(log(81)/log(3)) + 1 = 5, n0(s) = ceil(5/(s+1) * 3^s),
// r0(s) = int(81 * 3^-s), and each halving n = ceil(n/3),
// r = int(min(r*3, 81 - milestone)), milestone = r.
func TestHyperBandBrackets(t *testing.T) {
	type step struct{ n, milestone int }
	tests := []struct {
		s, n0, r0 int
		halvings  []step
	}{
		// 5/1 * 1 = 5; 81/1 = 81; no halving.
		{0, 5, 81, nil},
		// 5/2 * 3 = 7.5 -> 8; 81/3 = 27; n 8/3 -> 3, r min(81, 81-27) = 54.
		{1, 8, 27, []step{{3, 54}}},
		// 5/3 * 9 = 15; 81/9 = 9; (15/3 = 5, min(27, 72) = 27), (5/3 -> 2, min(81, 54) = 54).
		{2, 15, 9, []step{{5, 27}, {2, 54}}},
		// 5/4 * 27 = 33.75 -> 34; 81/27 = 3; (34/3 -> 12, 9), (12/3 = 4, 27), (4/3 -> 2, min(81, 54) = 54).
		{3, 34, 3, []step{{12, 9}, {4, 27}, {2, 54}}},
		// 5/5 * 81 = 81; 81/81 = 1; (27, 3), (9, 9), (3, 27), (1, min(81, 54) = 54).
		{4, 81, 1, []step{{27, 3}, {9, 9}, {3, 27}, {1, 54}}},
	}
	h := newHyperBand(t)
	if h.sMax1 != 5 {
		t.Fatalf("s_max_1 = %d, want 5", h.sMax1)
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("s=", tt.s), func(t *testing.T) {
			if n, r := h.n0(tt.s), h.r0(tt.s); n != tt.n0 || r != float64(tt.r0) {
				t.Fatalf("n0, r0 = %d, %v, want %d, %d", n, r, tt.n0, tt.r0)
			}
			b := &hbBracket{N: tt.n0, R: float64(tt.r0), Milestone: float64(tt.r0), Halves: tt.s}
			for i := range tt.n0 {
				b.Live = append(b.Live, hbTrial{Trial: fmt.Sprint(i)})
			}
			h.st.Bands = [][]*hbBracket{{b}}
			var got []step
			for b.Halves > 0 {
				in, good, _ := h.halve(hbRef{})
				got = append(got, step{in.Keep, int(in.Next)})
				b.Live = b.Live[:0]
				for _, id := range good {
					b.Live = append(b.Live, hbTrial{Trial: id})
				}
			}
			if !slices.Equal(got, tt.halvings) {
				t.Errorf("halvings %v, want %v", got, tt.halvings)
			}
		})
	}
}

// TestHyperBandFill: trials fill bracket 0 (5), 1 (8), 2 (15), 3 (34), 4
// (81) of band 0 — 143 trials — and the 144th opens band 1.
func TestHyperBandFill(t *testing.T) {
	h := newHyperBand(t)
	var sizes []int
	last := [2]int{-1, -1}
	for i := range 144 {
		d := h.Add(fmt.Sprint("t", i), nil)
		if at := [2]int{d.Bracket.Band, d.Bracket.Bracket}; at != last {
			sizes = append(sizes, 0)
			last = at
		}
		sizes[len(sizes)-1]++
	}
	if want := []int{5, 8, 15, 34, 81, 1}; !slices.Equal(sizes, want) {
		t.Errorf("bracket sizes %v, want %v", sizes, want)
	}
	if last != [2]int{1, 0} {
		t.Errorf("trial 144 in %+v, want band 1 bracket 0", last)
	}
}

// fillBracket1 adds the 5 trials of bracket 0 and the 8 of bracket 1 (r0
// 27), named b0..b7.
func fillBracket1(t *testing.T) *HyperBand {
	h := newHyperBand(t)
	for i := range 5 {
		h.Add(fmt.Sprint("a", i), nil)
	}
	for i := range 8 {
		h.Add(fmt.Sprint("b", i), nil)
	}
	return h
}

type want struct {
	trial  string
	action Action
}

func decided(ds []Decision) []want {
	out := make([]want, len(ds))
	for i, d := range ds {
		out[i] = want{d.Trial, d.Action}
	}
	return out
}

// TestHyperBandHalving runs bracket 1 to its end: paused at 27 until all
// eight reach it, halved to the best 3 (resumed) up to 54, then finished.
func TestHyperBandHalving(t *testing.T) {
	h := fillBracket1(t)
	rewards := []float64{5, 3, 8, 1, 7, 2, 6, 4}
	for i := range 7 {
		ds := h.Result(result(fmt.Sprint("b", i), 27, rewards[i]), Context{})
		if len(ds) != 1 || ds[0].Action != Pause {
			t.Fatalf("b%d at 27: %+v, want a Pause", i, ds)
		}
	}
	// b7 (reward 4) completes the milestone. Ranked worst to best:
	// b3 1, b5 2, b1 3, b7 4, b0 5, b6 6, b4 7, b2 8; ceil(8/3) = 3 go on.
	ds := h.Result(result("b7", 27, 4), Context{})
	wantDs := []want{
		{"b7", Stop},
		{"b3", Stop}, {"b5", Stop}, {"b1", Stop}, {"b0", Stop},
		{"b6", Resume}, {"b4", Resume}, {"b2", Resume},
	}
	if got := decided(ds); !slices.Equal(got, wantDs) {
		t.Fatalf("halving decisions %v, want %v", got, wantDs)
	}
	in := ds[0].Halving
	if in.Milestone != 27 || in.Next != 54 || in.Keep != 3 || in.Ranked[0].Trial != "b3" || in.Ranked[7].Trial != "b2" {
		t.Errorf("halving inputs %+v", in)
	}
	wantReason := "stopped by successive halving at milestone 27 (t): reward 4 ranks 5 of 8 in band 0 bracket 1; the best 3 go on to 54"
	if ds[0].Reason != wantReason {
		t.Errorf("reason\n got %q\nwant %q", ds[0].Reason, wantReason)
	}
	// The controller completes b7 and removes the paused ones it stopped:
	// the scheduler already let them go, and b6, b4, b2 are not at 54 yet.
	if ds := h.Complete(result("b7", 27, 4)); len(ds) != 0 {
		t.Errorf("complete b7: %+v, want nothing", ds)
	}
	for _, id := range []string{"b3", "b5", "b1", "b0"} {
		if ds := h.Remove(id); len(ds) != 0 {
			t.Errorf("remove %s: %+v, want nothing", id, ds)
		}
	}
	if d := h.Result(result("b6", 40, 6), Context{})[0]; d.Action != Continue {
		t.Errorf("b6 at 40: %s, want Continue", d.Action)
	}
	for _, id := range []string{"b6", "b4"} {
		if d := h.Result(result(id, 54, 6), Context{})[0]; d.Action != Pause {
			t.Errorf("%s at 54: %s, want Pause", id, d.Action)
		}
	}
	// The last one reaches 54: no halvings left, the bracket is finished.
	ds = h.Result(result("b2", 54, 8), Context{})
	if got := decided(ds); !slices.Equal(got, []want{{"b2", Stop}, {"b4", Stop}, {"b6", Stop}}) {
		t.Errorf("finish decisions %v", got)
	}
}

// TestHyperBandRemoveHalves: the last trial the others wait for errors;
// its removal halves the bracket.
func TestHyperBandRemoveHalves(t *testing.T) {
	h := fillBracket1(t)
	for i := range 7 {
		h.Result(result(fmt.Sprint("b", i), 27, float64(i)), Context{})
	}
	// ceil(8/3) = 3 of the 7 left go on: b4, b5, b6.
	ds := h.Remove("b7")
	wantDs := []want{{"b0", Stop}, {"b1", Stop}, {"b2", Stop}, {"b3", Stop}, {"b4", Resume}, {"b5", Resume}, {"b6", Resume}}
	if got := decided(ds); !slices.Equal(got, wantDs) {
		t.Errorf("decisions %v, want %v", got, wantDs)
	}
	if ds := h.Remove("b7"); ds != nil {
		t.Errorf("second remove: %+v", ds)
	}
}

// TestHyperBandSkipsEmptyBrackets: with max_t 2 and eta 3, s_max_1 =
// round(log 2 / log 3 = 0.63) + 1 = 2; bracket 0 takes ceil(2/1 * 1) = 2
// trials at r0 = 2, and bracket 1's r0 = int(2/3) = 0 is skipped (Ray's
// None), which fills the band: the third trial opens band 1.
func TestHyperBandSkipsEmptyBrackets(t *testing.T) {
	cfg := DefaultHyperBandConfig()
	cfg.Objective, cfg.TimeAttr, cfg.MaxT = Objective{Metric: "m", Mode: Max}, "t", 2
	h, err := NewHyperBand(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]int
	for i := range 3 {
		d := h.Add(fmt.Sprint("t", i), nil)
		got = append(got, [2]int{d.Bracket.Band, d.Bracket.Bracket})
	}
	if want := [][2]int{{0, 0}, {0, 0}, {1, 0}}; !slices.Equal(got, want) {
		t.Errorf("placements %v, want %v", got, want)
	}
	state, err := h.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, _ := NewHyperBand(cfg)
	if err := back.UnmarshalJSON(state); err != nil {
		t.Fatalf("%v\n%s", err, state)
	}
	if again, _ := back.MarshalJSON(); string(again) != string(state) {
		t.Errorf("round trip changed the state:\n%s\n%s", state, again)
	}
	if back.st.Bands[0][1] != nil {
		t.Errorf("skipped bracket restored as %+v", back.st.Bands[0][1])
	}
}
