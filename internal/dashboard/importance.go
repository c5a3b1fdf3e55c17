package dashboard

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/importance"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"
)

// importanceSeed seeds the forest of every importance the dashboard
// computes, so that the same trials always give the same answer.
const importanceSeed = 0

// ImportanceReply is the answer of GET /api/experiments/{name}/importance:
// each parameter's fANOVA importance for Metric (see internal/importance),
// over the Trials trials that count.
type ImportanceReply struct {
	Metric      string                  `json:"metric"`
	Mode        string                  `json:"mode"` // the metric's mode in the experiment; "" for another metric
	Method      string                  `json:"method"`
	Trials      int                     `json:"trials"`
	Importances []importance.Importance `json:"importances"`
}

// getImportance answers GET /api/experiments/{name}/importance?metric=M:
// the importance of each domain of the param_space (grid_search and
// sample_from ones aside) for the metric M, by default the experiment's
// (the first of several), over the TERMINATED trials whose last result
// holds a finite value of it and whose config holds a value of every
// domain. With fewer than 2 such trials the list is empty. Nothing is
// cached: the columns are copied under the experiment's lock and the
// forest is fitted after it is released, so that a long computation does
// not hold up the log.
func (s *Server) getImportance(w http.ResponseWriter, r *http.Request) {
	l := s.lookup(w, r)
	if l == nil {
		return
	}
	in, err := l.importanceInput(r.URL.Query().Get("metric"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if in.metric == "" {
		httpError(w, http.StatusBadRequest, "the experiment names no metric: name one with ?metric=")
		return
	}
	out := ImportanceReply{Metric: in.metric, Mode: in.mode, Method: "fanova", Trials: len(in.target), Importances: []importance.Importance{}}
	if len(in.target) >= 2 {
		imp, err := importance.Fanova(in.params, in.target, importanceSeed)
		if err != nil {
			s.fail(w, r, fmt.Errorf("importance of %s for %s: %w", l.name, in.metric, err))
			return
		}
		out.Importances = imp
	}
	writeJSON(w, out)
}

// importanceInput is what an importance is computed from: the metric and
// its mode, and the columns of the trials that count.
type importanceInput struct {
	metric, mode string
	params       []importance.Param
	target       []float64
}

// importanceInput copies, under the lock, the columns of the trials that
// count for metric (the experiment's when "").
func (l *live) importanceInput(metric string) (importanceInput, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	in := importanceInput{metric: metric}
	spec := l.st.Spec
	if spec == nil {
		in.metric = cmp.Or(in.metric, l.metric)
		return in, nil
	}
	in.metric, in.mode = metricAndMode(spec.TuneConfig, in.metric, l.metric)
	space, err := search.ParseSpace(spec.ParamSpace)
	if err != nil {
		return in, fmt.Errorf("the param_space of %s: %w", l.name, err)
	}
	var domains []search.Domain
	for _, d := range space.Domains() {
		switch d.Kind {
		case "grid_search", "sample_from":
			continue // a grid's values are the experiment's design, a driver's its own
		}
		domains = append(domains, d)
		in.params = append(in.params, importance.Param{Name: strings.Join(d.Path, "."), Categorical: d.Choices != nil,
			Low: d.Low, High: d.High})
	}
	for _, t := range l.st.TrialList() {
		y, ok := trialTarget(t, in.metric)
		if !ok {
			continue
		}
		xs := make([]float64, len(domains))
		for i, d := range domains {
			if xs[i], ok = d.Number(t.Config); !ok {
				break
			}
		}
		if !ok {
			continue // Optuna, too, leaves out a trial without every parameter
		}
		for i := range domains {
			in.params[i].Values = append(in.params[i].Values, xs[i])
		}
		in.target = append(in.target, y)
	}
	for i, d := range domains {
		p := &in.params[i]
		switch {
		case p.Categorical:
			p.Low, p.High = 0, float64(len(d.Choices)-1)
		case d.Kind == "randn" || d.Kind == "qrandn":
			// No bounds: the space is the range the trials drew.
			if len(p.Values) > 0 {
				p.Low, p.High = slices.Min(p.Values), slices.Max(p.Values)
			}
		}
	}
	return in, nil
}

// metricAndMode returns the metric an importance is for, the given one or
// the experiment's (the first of several, else fallback, the first
// reported), and its mode in the experiment ("" when it optimizes another).
func metricAndMode(tc events.TuneConfig, metric, fallback string) (string, string) {
	metric = cmp.Or(metric, tc.Primary().Metric, fallback)
	return metric, tc.ModeOf(metric)
}

// trialTarget is the value of metric in the trial's last result, when the
// trial is TERMINATED and the value is finite.
func trialTarget(t *state.Trial, metric string) (float64, bool) {
	if t.Status != events.StatusTerminated {
		return 0, false
	}
	return number(state.Lookup(t.LastResult, metric))
}
