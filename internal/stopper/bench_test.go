package stopper

import (
	"strconv"
	"testing"
)

// BenchmarkStopTrial folds one result through a combination of every
// stopper, among 10,000 trials.
func BenchmarkStopTrial(b *testing.B) {
	s := Combined(MaximumIteration(1<<30), Timeout(1e9), TrialPlateau("loss"), ExperimentPlateau("loss"))
	ids := make([]string, 10000)
	for i := range ids {
		ids[i] = "t" + strconv.Itoa(i)
	}
	result := map[string]any{"loss": 0.5}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.StopTrial(ids[i%len(ids)], result)
		s.StopAll(float64(i))
	}
}

// BenchmarkMarshal encodes the state of 10,000 trials, as a snapshot
// would.
func BenchmarkMarshal(b *testing.B) {
	s := Combined(MaximumIteration(1<<30), TrialPlateau("loss"), ExperimentPlateau("loss"))
	for i := range 10000 {
		for j := range 4 {
			s.StopTrial("t"+strconv.Itoa(i), map[string]any{"loss": 1 / float64(j+1)})
		}
	}
	var n int
	for b.Loop() {
		data, err := Marshal(s)
		if err != nil {
			b.Fatal(err)
		}
		n = len(data)
	}
	b.ReportMetric(float64(n), "bytes")
}
