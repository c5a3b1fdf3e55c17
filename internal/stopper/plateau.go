package stopper

import (
	"fmt"
	"slices"
	"sort"

	"github.com/tunejet/tunejet/internal/settings"
)

// Modes of the plateau stoppers.
const (
	ModeMin = "min"
	ModeMax = "max"
)

// TrialPlateauStopper is Ray's TrialPlateauStopper: it stops a trial whose
// last NumResults values of Metric have a standard deviation below Std,
// once it has reported GracePeriod results and, with a MetricThreshold,
// once its latest value is at or beyond the threshold.
type TrialPlateauStopper struct {
	// Metric is the result key to watch. Required.
	Metric string `json:"metric" settings:"required"`
	// Std is the standard deviation below which the trial has plateaued.
	// Default 0.01; must be > 0.
	Std float64 `json:"std"`
	// NumResults is how many of the latest results the standard deviation
	// is taken over. Default 4; must be >= 1.
	NumResults int `json:"num_results"`
	// GracePeriod is the number of results before which a trial is never
	// stopped. Default 4; must be >= 0.
	GracePeriod int `json:"grace_period"`
	// MetricThreshold, when set, must be reached first: with mode min the
	// latest value must be <= it, with mode max >= it. Default none.
	MetricThreshold *float64 `json:"metric_threshold,omitempty"`
	// Mode is "min" or "max"; required with MetricThreshold and otherwise
	// unused. Default none.
	Mode string `json:"mode,omitempty"`

	// Trials is each trial's recent history.
	Trials map[string]TrialHistory `json:"trials,omitempty" settings:"-"`
}

// TrialHistory is what a TrialPlateauStopper keeps of one trial.
type TrialHistory struct {
	// Results counts the trial's results.
	Results int `json:"results"`
	// Last holds the metric of the latest NumResults results, oldest
	// first; nil where a result had no finite value of it.
	Last []*float64 `json:"last"`
}

func init() {
	register(typeTrialPlateau, func() Stopper { return TrialPlateau("") })
	register(typeExperimentPlateau, func() Stopper { return ExperimentPlateau("") })
}

// TrialPlateau returns a TrialPlateauStopper on metric with Ray's
// defaults: std 0.01, num_results 4, grace_period 4, no metric_threshold.
func TrialPlateau(metric string) *TrialPlateauStopper {
	return &TrialPlateauStopper{Metric: metric, Std: 0.01, NumResults: 4, GracePeriod: 4}
}

// StopTrial records the result's metric and stops the trial when it has
// plateaued. A missing, NaN or infinite value keeps the trial going for
// as long as it is among the last NumResults (in Ray, np.std fails or is
// NaN then).
func (s *TrialPlateauStopper) StopTrial(trialID string, result map[string]any) Decision {
	v, ok := metricValue(result, s.Metric)
	h := s.record(trialID, v, ok)
	if h.Results < s.GracePeriod || len(h.Last) < s.NumResults || !ok || !s.reached(v) {
		return Decision{}
	}
	values := make([]float64, 0, len(h.Last))
	for _, p := range h.Last {
		if p == nil {
			return Decision{}
		}
		values = append(values, *p)
	}
	sd := std(values)
	if sd >= s.Std {
		return Decision{}
	}
	d := stop("plateau: std %.3g of the last %d results of %s < %g", sd, len(values), s.Metric, s.Std)
	if s.MetricThreshold != nil {
		op := ">="
		if s.Mode == ModeMin {
			op = "<="
		}
		d.Reason += fmt.Sprintf(", and %s %g %s metric_threshold %g", s.Metric, v, op, *s.MetricThreshold)
	}
	return d
}

// record appends a result's value to the trial's history.
func (s *TrialPlateauStopper) record(trialID string, v float64, ok bool) TrialHistory {
	if s.Trials == nil {
		s.Trials = map[string]TrialHistory{}
	}
	h := s.Trials[trialID]
	h.Results++
	var p *float64
	if ok {
		p = &v
	}
	h.Last = append(h.Last, p)
	if n := len(h.Last) - s.NumResults; n > 0 {
		h.Last = slices.Delete(h.Last, 0, n)
	}
	s.Trials[trialID] = h
	return h
}

// reached reports whether v has reached MetricThreshold, if there is one.
func (s *TrialPlateauStopper) reached(v float64) bool {
	switch {
	case s.MetricThreshold == nil:
		return true
	case s.Mode == ModeMin:
		return v <= *s.MetricThreshold
	default:
		return v >= *s.MetricThreshold
	}
}

// StopAll never stops the experiment.
func (*TrialPlateauStopper) StopAll(float64) Decision { return Decision{} }

func (*TrialPlateauStopper) kind() string { return typeTrialPlateau }

func (s *TrialPlateauStopper) validate(p *settings.Problems) {
	p.Required("metric", s.Metric)
	p.Positive("std", s.Std)
	p.AtLeast("num_results", s.NumResults, 1)
	p.AtLeast("grace_period", s.GracePeriod, 0)
	if s.MetricThreshold != nil {
		p.Finite("metric_threshold", *s.MetricThreshold)
		if s.Mode == "" {
			p.Add("mode", "must be min or max when metric_threshold is given")
		}
	}
	if s.Mode != "" {
		p.OneOf("mode", s.Mode, ModeMin, ModeMax)
	}
}

// ExperimentPlateauStopper is Ray's ExperimentPlateauStopper: it stops the
// experiment when the Top best values of Metric over all results have a
// standard deviation of at most Std, for more than Patience results in a
// row.
type ExperimentPlateauStopper struct {
	// Metric is the result key to watch. Required.
	Metric string `json:"metric" settings:"required"`
	// Std is the standard deviation at or below which the top values have
	// plateaued. Default 0.001; must be > 0.
	Std float64 `json:"std"`
	// Top is how many of the best values are considered. Default 10; must
	// be > 1.
	Top int `json:"top"`
	// Mode is "min" or "max": which values are best. Default "min".
	Mode string `json:"mode"`
	// Patience is how many results in a row must find the top plateaued
	// before the experiment stops. Default 0; must be >= 0. As in Ray, 0
	// and 1 both stop at the first plateaued result.
	Patience int `json:"patience"`

	// TopValues holds the best values so far, ascending.
	TopValues []float64 `json:"top_values,omitempty" settings:"-"`
	// Iterations counts the results in a row that found the top
	// plateaued.
	Iterations int `json:"iterations,omitempty" settings:"-"`
}

// ExperimentPlateau returns an ExperimentPlateauStopper on metric with
// Ray's defaults: std 0.001, top 10, mode min, patience 0.
func ExperimentPlateau(metric string) *ExperimentPlateauStopper {
	return &ExperimentPlateauStopper{Metric: metric, Std: 0.001, Top: 10, Mode: ModeMin}
}

// StopTrial records the result's metric among the top values and, as in
// Ray, answers for the trial what StopAll answers for the experiment. A
// result without a finite value of the metric changes no top value but
// counts for the patience like any other (Ray fails on a missing metric;
// it would keep an infinite one).
func (s *ExperimentPlateauStopper) StopTrial(_ string, result map[string]any) Decision {
	if v, ok := metricValue(result, s.Metric); ok {
		s.insert(v)
	}
	if _, ok := s.plateaued(); ok {
		s.Iterations++
	} else {
		s.Iterations = 0
	}
	return s.StopAll(0)
}

// insert adds v to the top values, keeping the best Top.
func (s *ExperimentPlateauStopper) insert(v float64) {
	s.TopValues = slices.Insert(s.TopValues, sort.SearchFloat64s(s.TopValues, v), v)
	if n := len(s.TopValues) - s.Top; n > 0 {
		if s.Mode == ModeMin {
			s.TopValues = s.TopValues[:s.Top]
		} else {
			s.TopValues = slices.Delete(s.TopValues, 0, n)
		}
	}
}

// plateaued returns the standard deviation of the top values and whether
// they have plateaued: there are Top of them, and it is <= Std.
func (s *ExperimentPlateauStopper) plateaued() (float64, bool) {
	if len(s.TopValues) < s.Top {
		return 0, false
	}
	sd := std(s.TopValues)
	return sd, sd <= s.Std
}

// StopAll stops the experiment when the top values have plateaued for at
// least Patience results.
func (s *ExperimentPlateauStopper) StopAll(float64) Decision {
	sd, ok := s.plateaued()
	if !ok || s.Iterations < s.Patience {
		return Decision{}
	}
	return stop("experiment plateau: std %.3g of the top %d values of %s <= %g for %d results (patience %d)",
		sd, s.Top, s.Metric, s.Std, s.Iterations, s.Patience)
}

func (*ExperimentPlateauStopper) kind() string { return typeExperimentPlateau }

func (s *ExperimentPlateauStopper) validate(p *settings.Problems) {
	p.Required("metric", s.Metric)
	p.Positive("std", s.Std)
	p.AtLeast("top", s.Top, 2)
	p.OneOf("mode", s.Mode, ModeMin, ModeMax)
	p.AtLeast("patience", s.Patience, 0)
}
