package sched

// BracketInputs is the bracket a trial was added to.
type BracketInputs struct {
	// Band is HyperBand's band (iteration); 0 for ASHA.
	Band int `json:"band,omitempty"`
	// Bracket is the bracket's index: ASHA's s, or HyperBand's position in
	// its band (which is also its s).
	Bracket int `json:"bracket"`
	// Probabilities are ASHA's softmax over the brackets' rung counts.
	Probabilities []float64 `json:"probabilities,omitempty"`
}

// RungInputs is an ASHA judgement at one rung.
type RungInputs struct {
	// Bracket is the trial's bracket.
	Bracket int `json:"bracket"`
	// Rung counts the bracket's rungs from the lowest, 0.
	Rung int `json:"rung"`
	// Milestone is the rung's time_attr value.
	Milestone float64 `json:"milestone"`
	// Time is the result's time_attr value.
	Time float64 `json:"time"`
	// Reward is the trial's sign * metric.
	Reward Float `json:"reward"`
	// Percentile is (1 - 1/reduction_factor) * 100.
	Percentile float64 `json:"percentile"`
	// Cutoff is the Percentile-th percentile of the other trials' rewards
	// at the rung, NaNs left out; nil when no other trial was recorded
	// there (the trial passes), NaN when all of theirs are NaN.
	Cutoff *Float `json:"cutoff,omitempty"`
	// Count is how many rewards Cutoff came from.
	Count int `json:"count,omitempty"`
	// Between are the two sorted neighbours Cutoff interpolates between.
	Between []Float `json:"between,omitempty"`
	// Values are those rewards, sorted, when there are at most 64 of them;
	// a decision stays small however many trials a rung holds.
	Values []Float `json:"values,omitempty"`
}

// HalvingInputs is a HyperBand bracket reaching its milestone.
type HalvingInputs struct {
	// Band and Bracket locate the bracket.
	Band    int `json:"band"`
	Bracket int `json:"bracket"`
	// Milestone is the time_attr value every live trial reached.
	Milestone float64 `json:"milestone"`
	// Next is the new milestone after halving; 0 when the bracket finished.
	Next float64 `json:"next,omitempty"`
	// Keep is how many trials go on.
	Keep int `json:"keep"`
	// Ranked are the live trials from worst to best reward.
	Ranked []Ranked `json:"ranked"`
}

// Ranked is one trial's reward in a ranking.
type Ranked struct {
	Trial  string `json:"trial"`
	Reward Float  `json:"reward"`
}

// MedianInputs is a median stopping rule judgement.
type MedianInputs struct {
	// Time is the result's time_attr value.
	Time float64 `json:"time"`
	// Samples is how many other trials reached Time; Required is
	// min_samples_required.
	Samples  int `json:"samples"`
	Required int `json:"required"`
	// Best is the trial's best metric so far (not sign-adjusted).
	Best Float `json:"best"`
	// Median is the median of Means; unset when Samples < Required.
	Median *Float `json:"median,omitempty"`
	// Means are the other trials' running means of the metric over
	// [grace_period, Time], sorted.
	Means []Float `json:"means,omitempty"`
}

// ExploitInputs is a PBT perturbation of one trial.
type ExploitInputs struct {
	// Time is the result's time_attr value.
	Time float64 `json:"time"`
	// Score is the trial's sign * metric.
	Score Float `json:"score"`
	// Quantile is "upper", "lower" or "" (neither).
	Quantile string `json:"quantile,omitempty"`
	// Lower and Upper are the quantiles, each ordered by score ascending.
	Lower []Ranked `json:"lower,omitempty"`
	Upper []Ranked `json:"upper,omitempty"`
	// Source is the donor, an upper-quantile trial with a checkpoint;
	// empty when the trial does not exploit.
	Source string `json:"source,omitempty"`
	// SourceCheckpoint is the donor's checkpoint the trial restarts from.
	SourceCheckpoint string `json:"source_checkpoint,omitempty"`
	// NewConfig is the donor's config after explore.
	NewConfig map[string]any `json:"new_config,omitempty"`
	// Operations say how each mutated key changed: "resample",
	// "shift left", "shift right (noop)", "* 1.2"; nested keys are dotted.
	Operations map[string]string `json:"operations,omitempty"`
	// Driver is set when the experiment's driver finishes NewConfig: it
	// calls the function mutations of the keys OpDriverResample resampled
	// (null in NewConfig), then custom_explore_fn, if any.
	Driver bool `json:"driver,omitempty"`
}
