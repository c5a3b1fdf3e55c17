package sched

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The wording of decisions: the helpers every rule's Reason is written
// with, and Describe, which says what a decision came from. tunejet
// explain prints Describe; a decision's Reason is what the log, tunejet
// results and the dashboard show.

// DecisionOf reads a decision back from the detail of its trial.decided
// event (the decision as its maker marshalled it).
func DecisionOf(detail map[string]any) (Decision, error) {
	var d Decision
	b, err := json.Marshal(detail)
	if err == nil {
		err = json.Unmarshal(b, &d)
	}
	return d, err
}

// Describe says what the decision came from: its inputs when it holds
// them, else its Reason. timeAttr names the scheduler's time_attr in the
// text: "at training_iteration 4: rung 4 of bracket 0; reward -0.41 <
// cutoff -0.35, the 75th percentile of 12 other trials' rewards between
// -0.36 and -0.34 [...]". value formats a config for a person (show.JSON,
// which imports this package through state).
func (d Decision) Describe(timeAttr string, value func(any) string) string {
	switch {
	case d.Rung != nil:
		return d.Rung.describe(timeAttr, d.Action)
	case d.Median != nil:
		return d.Median.describe(timeAttr, d.Action)
	case d.Exploit != nil:
		return d.Exploit.describe(d.Reason, value)
	case d.Halving != nil:
		return d.Reason + "; ranked worst first " + ranked(d.Halving.Ranked)
	case d.Bracket != nil:
		return d.Bracket.describe()
	}
	return d.Reason
}

// describe says an ASHA judgement at a rung.
func (in *RungInputs) describe(timeAttr string, act Action) string {
	s := fmt.Sprintf("at %s %s: rung %s of bracket %d; reward %s", timeAttr, num(in.Time), num(in.Milestone), in.Bracket, num(float64(in.Reward)))
	if in.Cutoff == nil {
		return s + " recorded, the first at the rung"
	}
	switch act {
	case Stop:
		s += " < "
	case Record:
		s += " recorded on completion; "
	default:
		s += " >= "
	}
	s += fmt.Sprintf("cutoff %s, the %s percentile of %s rewards", num(float64(*in.Cutoff)), ordinal(in.Percentile), othersOf(in.Count))
	if len(in.Between) == 2 {
		s += fmt.Sprintf(" between %s and %s", num(float64(in.Between[0])), num(float64(in.Between[1])))
	}
	if in.Values != nil {
		s += " " + list(in.Values)
	}
	return s
}

// describe says a median stopping rule judgement.
func (in *MedianInputs) describe(timeAttr string, act Action) string {
	s := fmt.Sprintf("at %s %s: best %s", timeAttr, num(in.Time), num(float64(in.Best)))
	if in.Median == nil {
		return s + fmt.Sprintf("; %s reached it, %d needed to judge", othersOf(in.Samples), in.Required)
	}
	verdict := "is not worse than"
	if act == Stop || act == Pause {
		verdict = "is worse than"
	}
	return s + fmt.Sprintf(" %s the median %s of %s running means %s", verdict, num(float64(*in.Median)), othersOf(in.Samples), list(in.Means))
}

// describe says a PBT perturbation: the reason, the quantiles, and the
// donor's new config.
func (in *ExploitInputs) describe(reason string, value func(any) string) string {
	s := reason + "; lower quantile " + ranked(in.Lower) + ", upper " + ranked(in.Upper)
	if in.Source != "" {
		s += "; new config " + value(in.NewConfig)
		if len(in.Operations) > 0 {
			s += " " + value(in.Operations)
		}
	}
	return s
}

// describe says the bracket a trial was added to.
func (in *BracketInputs) describe() string {
	s := fmt.Sprintf("added to bracket %d", in.Bracket)
	if in.Band > 0 {
		s += fmt.Sprintf(" of band %d", in.Band)
	}
	if len(in.Probabilities) > 0 {
		s += ", drawn with probabilities " + list(in.Probabilities)
	}
	return s
}

// The openings of the reasons of a stop that ends a trial trained to its
// end, which Optuna counts complete rather than pruned.
const (
	reachedMaxT     = "reached max_t: "
	bracketFinished = "bracket finished: "
)

// TrainedOut reports whether a scheduler's stop reason says the trial
// trained to its end (ASHA at max_t, a HyperBand bracket at its last
// milestone) rather than was cut short.
func TrainedOut(reason string) bool {
	return strings.HasPrefix(reason, reachedMaxT) || strings.HasPrefix(reason, bracketFinished)
}

// ranked lists trials with their scores, worst first: "[a:0.1 b:0.3]".
func ranked(rs []Ranked) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.Trial + ":" + num(float64(r.Reward))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// num formats a number for a reason: shortest form, at most 6 significant
// digits.
func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// listed is how many values a reason or a description lists at most; the
// decision's detail (tunejet explain --json) has them all.
const listed = 8

// list formats values for a reason, eliding the middle of a list longer
// than listed with "…".
func list[F ~float64](xs []F) string {
	parts := make([]string, 0, listed+1)
	for i, x := range xs {
		switch {
		case len(xs) <= listed || i < listed/2 || i >= len(xs)-listed/2:
			parts = append(parts, num(float64(x)))
		case i == listed/2:
			parts = append(parts, "…")
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// ordinal is 75 -> "75th", 66.6667 -> "66.6667th".
func ordinal(p float64) string {
	s := num(p)
	suffix := "th"
	if !strings.Contains(s, ".") && !strings.HasSuffix(s, "11") && !strings.HasSuffix(s, "12") && !strings.HasSuffix(s, "13") {
		switch s[len(s)-1] {
		case '1':
			suffix = "st"
		case '2':
			suffix = "nd"
		case '3':
			suffix = "rd"
		}
	}
	return s + suffix
}

// plural is "1 trial", "3 trials".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// othersOf is "1 other trial's", "3 other trials'".
func othersOf(n int) string {
	if n == 1 {
		return "1 other trial's"
	}
	return strconv.Itoa(n) + " other trials'"
}
