package api

// SuggestRequest asks an external searcher (search_alg external) for the
// config of a new trial. It is sent with NATS core request/reply to the
// subject the experiment's search_alg names, and carries everything a
// stateless searcher needs: the space, the objective and the history.
type SuggestRequest struct {
	// Experiment is the experiment's name.
	Experiment string `json:"experiment"`
	// Index is the new trial's search index (0, 1, ...), and TrialID the
	// id it will have. A searcher may be asked again for an index (after
	// a controller restart or a refused reply); the trial takes the
	// answer the controller recorded first.
	Index   int    `json:"index"`
	TrialID string `json:"trial_id"`
	// Seed is the experiment's seed.
	Seed int64 `json:"seed"`
	// ParamSpace is the experiment's param space, as given.
	ParamSpace map[string]any `json:"param_space"`
	// Metric and Mode are tune_config's: the metric to minimize ("min")
	// or maximize ("max").
	Metric string `json:"metric"`
	Mode   string `json:"mode"`
	// History is every trial so far, by index, as TPE sees it.
	History []SearchTrial `json:"history"`
	// Seq is the log sequence the history reflects; the trial's
	// trial.created records it as searcher_seq.
	Seq uint64 `json:"seq"`
}

// SearchTrial is one trial of a SuggestRequest's history.
type SearchTrial struct {
	// Index is the trial's search index.
	Index int `json:"index"`
	// State is TrialComplete, TrialPruned or TrialRunning.
	State string `json:"state"`
	// Config is the trial's config.
	Config map[string]any `json:"config"`
	// Value is the metric: a complete trial's last value, a pruned trial's
	// value at Step; absent for a running trial.
	Value *float64 `json:"value,omitempty"`
	// Step is a pruned trial's last training_iteration.
	Step int `json:"step,omitempty"`
}

// The states of a SearchTrial. A trial that errored, or ended without
// reporting the metric, is not in the history.
const (
	// TrialComplete: ended with the metric; Value is its last value.
	TrialComplete = "complete"
	// TrialPruned: a scheduler stopped it early (Optuna's pruned trial).
	TrialPruned = "pruned"
	// TrialRunning: created and not finished.
	TrialRunning = "running"
)

// SuggestReply answers a SuggestRequest: the config, or why not.
type SuggestReply struct {
	// Config sets a value for every domain of the param space (nested
	// keys as nested mappings), each one the domain can produce.
	Config map[string]any `json:"config,omitempty"`
	// Error says why there is no config, for humans; Code classifies it
	// (CodeBadRequest or CodeInternal).
	Error string `json:"error,omitempty"`
	Code  Code   `json:"code,omitempty"`
}

// Err is the reply's refusal as an error matching the sentinel of its
// code, or nil when it holds a config. A reply with neither is
// CodeInternal.
func (r SuggestReply) Err() error {
	if r.Config != nil && r.Error == "" && r.Code == "" {
		return nil
	}
	code, msg := r.Code, r.Error
	if code == "" {
		code = CodeInternal
	}
	if msg == "" {
		msg = "the reply holds no config"
	}
	return &Error{Code: code, Message: msg}
}
