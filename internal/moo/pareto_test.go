package moo

import (
	"slices"
	"testing"
)

func TestDominates(t *testing.T) {
	cases := []struct {
		a, b []float64
		want bool
	}{
		{[]float64{1, 1}, []float64{2, 2}, true},
		{[]float64{1, 2}, []float64{1, 3}, true},
		{[]float64{1, 2}, []float64{1, 2}, false}, // equal: neither dominates
		{[]float64{1, 3}, []float64{2, 2}, false}, // a trade-off
		{[]float64{2, 2}, []float64{1, 1}, false},
	}
	for _, c := range cases {
		if got := Dominates(c.a, c.b); got != c.want {
			t.Errorf("Dominates(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestFront(t *testing.T) {
	points := [][]float64{
		{1, 5}, // front
		{2, 2}, // front
		{3, 3}, // dominated by {2, 2}
		{5, 1}, // front
		{2, 2}, // equal to a front point: on the front too
		{6, 6}, // dominated
	}
	if got, want := Front(points), []int{0, 1, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("Front = %v, want %v", got, want)
	}
	if got := Front(nil); got != nil {
		t.Errorf("Front(nil) = %v, want nil", got)
	}
}
