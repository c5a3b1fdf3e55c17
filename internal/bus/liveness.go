package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// livenessPrefix starts the subjects runners answer on while their
// connection lives. It is outside tunejet.> on purpose: a subscriber to
// every event (an observer) would otherwise be a responder too, and a
// request would never learn that the runner has gone.
const livenessPrefix = "tunejet-alive"

// LivenessSubject is the core NATS subject runner answers on while its
// connection is up. The name becomes one token: characters a token cannot
// hold (dots, wildcards, spaces) become '_'. Two names that map to the same
// subject only hide each other's death (the survivor answers for both); they
// never make a live runner look gone.
func LivenessSubject(runner string) string { return livenessPrefix + "." + token(runner) }

// token makes name one subject token: characters a token cannot hold
// (dots, wildcards, spaces) become '_'.
func token(name string) string {
	tok := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, name)
	if tok == "" {
		tok = "_"
	}
	return tok
}

// workAgainPrefix starts the subjects on which a controller tells runners
// that an experiment's work is pending again. It is no event (the log
// holds nothing of a nak), so it is outside tunejet.>.
const workAgainPrefix = "tunejet-work-again"

// AnnounceWorkAgain tells the runners that work of experiment exp was
// handed out again (the nak of a gone runner's work), which no event
// announces, so that an idle runner fetches it at once instead of at its
// next poll. It is sent, not confirmed; the poll is the fallback.
func (b *Bus) AnnounceWorkAgain(exp string) error {
	if err := b.nc.Publish(workAgainPrefix+"."+token(exp), nil); err != nil {
		return fmt.Errorf("announce work of %s: %w", exp, err)
	}
	return nil
}

// OnWorkAgain calls fn for each AnnounceWorkAgain of experiment exp until
// the returned stop is called.
func (b *Bus) OnWorkAgain(exp string, fn func()) (stop func(), err error) {
	sub, err := b.nc.Subscribe(workAgainPrefix+"."+token(exp), func(*nats.Msg) { fn() })
	if err != nil {
		return nil, fmt.Errorf("watch work of %s: %w", exp, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// Liveness is what a liveness request learned about a runner.
type Liveness int

const (
	// Present: the runner answered, or its subscription is still known to
	// the server but did not answer in time (busy, or frozen: the heartbeat
	// timeout deals with a frozen runner), or the request could not tell.
	Present Liveness = iota
	// Gone: the server knows no subscriber on the runner's subject — its
	// connection has closed (the process died) or is being re-established.
	Gone
)

// AnswerLiveness answers requests on runner's liveness subject until the
// returned stop is called or the connection closes. The reply comes from
// the client library's own goroutine, so a runner busy with its
// trainables still answers.
func (b *Bus) AnswerLiveness(runner string) (stop func(), err error) {
	sub, err := b.nc.Subscribe(LivenessSubject(runner), func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		return nil, err
	}
	// The server knows of the interest before the runner says it exists.
	if err := b.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// ProbeRunner asks whether runner's connection is still up. Only
// nats.ErrNoResponders, which the server sends at once when nobody is
// subscribed, says Gone; a timeout or any other failure says Present.
func (b *Bus) ProbeRunner(ctx context.Context, runner string) Liveness {
	_, err := b.nc.RequestWithContext(ctx, LivenessSubject(runner), nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return Gone
	}
	return Present
}

// judgedPrefix starts the subjects on which a controller tells the runner
// of a trial that waits for decisions (TuneConfig.WaitForDecisions) that
// its results are judged and it may go on. No event: a stop or pause
// comes as trial.stop_requested instead.
const judgedPrefix = "tunejet-judged"

func judgedSubject(exp, trial string) string {
	return judgedPrefix + "." + token(exp) + "." + token(trial)
}

// Judged says that attempt's results up to iteration are judged, and
// that nothing stops or pauses the trial at them.
type Judged struct {
	Attempt   int `json:"attempt"`
	Iteration int `json:"iteration"`
}

// AnnounceJudged tells the runner of experiment exp's trial that its
// results up to j.Iteration are judged. It is sent, not confirmed: a
// runner that misses it goes on after its wait runs out.
func (b *Bus) AnnounceJudged(exp, trial string, j Judged) error {
	data, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("announce judged: %w", err)
	}
	if err := b.nc.Publish(judgedSubject(exp, trial), data); err != nil {
		return fmt.Errorf("announce judged: %w", err)
	}
	return nil
}

// OnJudged calls fn for each AnnounceJudged of experiment exp's trial
// until the returned stop is called.
func (b *Bus) OnJudged(exp, trial string, fn func(Judged)) (stop func(), err error) {
	sub, err := b.nc.Subscribe(judgedSubject(exp, trial), func(m *nats.Msg) {
		var j Judged
		if json.Unmarshal(m.Data, &j) == nil {
			fn(j)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("watch judgements of %s: %w", trial, err)
	}
	// The server knows of the interest before the trial reports.
	if err := b.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("watch judgements of %s: %w", trial, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
