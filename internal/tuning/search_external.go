package tuning

import (
	"strings"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/settings"
)

// SearchExternal asks a NATS service for each new trial's config.
const SearchExternal = "external"

// DefaultExternalTimeout is how long the controller waits for an external
// searcher's answer when timeout_s is unset.
const DefaultExternalTimeout = 10 * time.Second

// ExternalConfig is search_alg external's settings: subject (required, a
// NATS subject without wildcards), the subject of the service that
// suggests each new trial's config, and timeout_s (> 0, default 10), how
// long to wait for it.
type ExternalConfig struct {
	Subject  string        `json:"subject"`
	TimeoutS float64       `json:"timeout_s"`
	Timeout  time.Duration `json:"-"`
}

func init() {
	registerSearch(SearchExternal, func() searchConfig {
		return &ExternalConfig{TimeoutS: DefaultExternalTimeout.Seconds()}
	})
}

func (c *ExternalConfig) check(p *settings.Problems, tc events.TuneConfig) {
	at := p.Under(keySearchAlg)
	at.Check(validSubject(c.Subject), "subject",
		"required: the NATS subject the searcher answers, dot-separated tokens without spaces or wildcards, got %q", c.Subject)
	at.Check(c.TimeoutS > 0, "timeout_s", "must be > 0, got %v", c.TimeoutS)
	c.Timeout = time.Duration(c.TimeoutS * float64(time.Second))
	oneObjective(SearchExternal, tc, p)
	needObjective(tc, p)
}

// validSubject reports whether s is a NATS subject a request can be sent
// to: non-empty tokens separated by dots, without whitespace or wildcards.
func validSubject(s string) bool {
	if s == "" {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return false
		}
	}
	return true
}
