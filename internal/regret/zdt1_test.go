package regret

import (
	"math"
	"testing"
)

func TestZDT1(t *testing.T) {
	// On the front (x2 … x6 = 0): g = 1, f2 = 1 − √f1.
	if got := ZDT1Values([]float64{0.25, 0, 0, 0, 0, 0}); got[0] != 0.25 || got[1] != 0.5 {
		t.Errorf("ZDT1(0.25, 0, …) = %v, want [0.25 0.5]", got)
	}
	// Off it: g = 1 + 9·(1+1+0+0+0)/5 = 4.6, f2 = 4.6·(1 − √(1/4.6)).
	got := ZDT1Values([]float64{1, 1, 1, 0, 0, 0})
	if want := 4.6 * (1 - math.Sqrt(1/4.6)); got[0] != 1 || math.Abs(got[1]-want) > 1e-12 {
		t.Errorf("ZDT1(1, 1, 1, 0, 0, 0) = %v, want [1 %v]", got, want)
	}
	// The front's hypervolume: many points on it come close from below.
	var front [][]float64
	for i := range 2001 {
		x := make([]float64, 6)
		x[0] = float64(i) / 2000
		front = append(front, ZDT1Values(x))
	}
	hv := Hypervolumes(front, ZDT1.Ref, []int{len(front)})[0]
	if hv > ZDT1.Best || ZDT1.Best-hv > 1e-3 {
		t.Errorf("hypervolume of 2001 front points = %v, want just below %v", hv, ZDT1.Best)
	}
	if math.Abs(ZDT1.Best-0.8767) > 5e-5 {
		t.Errorf("ZDT1.Best = %v, want 0.8767", ZDT1.Best)
	}
}

func TestHypervolumeSummary(t *testing.T) {
	hvs := [][]float64{{0, 0.4}, {0.1, 0.5}, {0.2, 0.6}, {0.3, 0.7}, {0.4, 0.8}}
	want := "N=100 0.2 [0.1, 0.3]  N=200 0.6 [0.5, 0.7]"
	if got := HypervolumeSummary(hvs, []int{100, 200}); got != want {
		t.Errorf("HypervolumeSummary = %q, want %q", got, want)
	}
}
