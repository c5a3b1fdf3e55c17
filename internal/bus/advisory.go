package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// maxDeliveries is the part of JetStream's max-deliveries advisory we use.
type maxDeliveries struct {
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// WatchExhausted calls fn with the log sequence of every piece of an
// experiment's trial work that ran out of deliveries (its last runner
// stopped heartbeating), replaying those already captured, until ctx ends.
func (b *Bus) WatchExhausted(ctx context.Context, exp string, fn func(workSeq uint64)) error {
	s, err := b.js.Stream(ctx, AdvisoryStreamName)
	if err != nil {
		return fmt.Errorf("advisory stream: %w", err)
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{maxDeliveriesPrefix + StreamName + "." + WorkConsumerName(exp)},
		InactiveThreshold: orderedInactive,
	})
	if err != nil {
		return fmt.Errorf("watch advisories of %s: %w", exp, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("watch advisories of %s: %w", exp, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer b.deleteOrdered(ctx, s, cons)
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return ctx.Err()
			}
			return fmt.Errorf("watch advisories of %s: %w", exp, err)
		}
		var adv maxDeliveries
		if err := json.Unmarshal(m.Data(), &adv); err != nil || adv.StreamSeq == 0 {
			b.Log.Warn().Str("subject", m.Subject()).Msg("unreadable max-deliveries advisory")
			continue
		}
		fn(adv.StreamSeq)
	}
}

// Raw is a message of the log as stored, whether it decodes or not.
type Raw struct {
	Subject  string
	Sequence uint64
	Header   map[string][]string
	Data     []byte
}

// ErrNoEvent is wrapped when the log holds no message at a sequence.
var ErrNoEvent = errors.New("no event at this sequence")

// RawEvent reads one message of the log by sequence; a message that is not
// there fails with ErrNoEvent.
func (b *Bus) RawEvent(ctx context.Context, seq uint64) (*Raw, error) {
	s, err := b.stream(ctx)
	if err != nil {
		return nil, err
	}
	m, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("read event %d: %w", seq, ErrNoEvent)
	}
	if err != nil {
		return nil, fmt.Errorf("read event %d: %w", seq, err)
	}
	return &Raw{Subject: m.Subject, Sequence: m.Sequence, Header: m.Header, Data: m.Data}, nil
}

// DeleteEvent removes one message from the log (dead-lettered work).
func (b *Bus) DeleteEvent(ctx context.Context, seq uint64) error {
	s, err := b.stream(ctx)
	if err != nil {
		return err
	}
	if err := s.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("delete event %d: %w", seq, err)
	}
	return nil
}
