package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
)

// ReplayFrom is Replay starting at stream sequence from (0 or 1 for the
// beginning): it calls fn for every event matching filter from there that
// is in the log now, in order, and returns. A reader that already holds the
// state up to some sequence folds only what came after it.
func (b *Bus) ReplayFrom(ctx context.Context, filter string, from uint64, fn func(ev *events.Event)) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := b.Watch(rctx, filter, from, Handler{Event: fn, CaughtUp: cancel})
	if err != nil && ctx.Err() == nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// EventIs reports whether the log still holds, at sequence seq, the event
// with id id of experiment exp: how a reader checks that a state it saved
// (a snapshot's last sequence and event id) belongs to the log at hand. A
// new log after a lost one reuses sequences, so the sequence alone says
// nothing. It is false, with no error, when the message is gone or is
// another one.
func (b *Bus) EventIs(ctx context.Context, exp string, seq uint64, id string) (bool, error) {
	if seq == 0 || id == "" {
		return false, nil
	}
	s, err := b.stream(ctx)
	if err != nil {
		return false, err
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, nil
		}
		return false, fmt.Errorf("read event %d: %w", seq, err)
	}
	ours := strings.HasPrefix(m.Subject, events.Prefix+"."+exp+".")
	return ours && m.Header.Get(events.HeaderMsgID) == id, nil
}

// LastEvent reads the newest event on subject (a filter: wildcards
// allowed) and its log sequence. seq is 0 when there is none; ev is nil,
// with seq set, when the newest message there does not decode.
func (b *Bus) LastEvent(ctx context.Context, subject string) (ev *events.Event, seq uint64, err error) {
	s, err := b.stream(ctx)
	if err != nil {
		return nil, 0, err
	}
	m, err := s.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("last event on %s: %w", subject, err)
	}
	ev, derr := events.Decode(m.Subject, m.Header, m.Data)
	if derr != nil {
		if b.log.firstSight(subject, m.Sequence) {
			b.Log.Debug().Err(derr).Str("subject", m.Subject).Uint64("seq", m.Sequence).Msg("the last event does not decode")
		}
		return nil, m.Sequence, nil
	}
	ev.Seq = m.Sequence
	return ev, m.Sequence, nil
}
