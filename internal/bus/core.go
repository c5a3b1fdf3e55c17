package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tunejet/tunejet/events"
)

// Version is tunejet's version, as services report it to NATS micro.
const Version = "0.1.0"

// ErrNoResponders is wrapped by Request when nobody serves the subject.
var ErrNoResponders = nats.ErrNoResponders

// ErrBadReply is wrapped by Request when the answer does not decode.
var ErrBadReply = errors.New("the answer does not decode")

// Subscribe calls fn with each event published on subject from now on (a
// core NATS subscription: nothing is replayed) until the returned stop is
// called. Messages that do not decode are skipped; a panic in fn is
// recovered and logged with the event.
func (b *Bus) Subscribe(subject string, fn func(ev *events.Event)) (stop func(), err error) {
	sub, err := b.nc.Subscribe(subject, func(m *nats.Msg) {
		ev, err := events.Decode(m.Subject, m.Header, m.Data)
		if err != nil {
			b.Log.Debug().Err(err).Str("subject", m.Subject).Msg("skipping a malformed message")
			return
		}
		_ = b.recovered(ev, m.Subject, func() error { fn(ev); return nil })
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", subject, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// Request sends req, encoded as JSON, to whoever serves subject and
// decodes the answer into reply. Nobody serving it fails at once with
// ErrNoResponders; an answer that does not decode fails with ErrBadReply.
func (b *Bus) Request(ctx context.Context, subject string, req, reply any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("request %s: %w", subject, err)
	}
	m, err := b.nc.RequestWithContext(ctx, subject, data)
	if err != nil {
		return fmt.Errorf("request %s: %w", subject, err)
	}
	if err := json.Unmarshal(m.Data, reply); err != nil {
		return fmt.Errorf("request %s: %w: %w", subject, ErrBadReply, err)
	}
	return nil
}

// Handle answers one request: it gets the request's bytes and returns the
// reply, which is sent encoded as JSON.
type Handle func(ctx context.Context, req []byte) (reply any)

// Serve answers requests on subject with h until the returned stop is
// called. Servers in the same queue group share the requests: one of them
// answers each. A panic in h is recovered and logged; the request then
// gets no answer.
func (b *Bus) Serve(ctx context.Context, subject, queue string, h Handle) (stop func(), err error) {
	sub, err := b.nc.QueueSubscribe(subject, queue, func(m *nats.Msg) {
		b.answer(ctx, subject, m.Data, h, m.Respond)
	})
	if err != nil {
		return nil, fmt.Errorf("serve %s: %w", subject, err)
	}
	// Once Serve returns, a request from any connection finds the server
	// interested: the subscription has reached it (else "no responders").
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.nc.FlushWithContext(fctx); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("serve %s: %w", subject, err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// answer runs h on a request and sends its reply through respond.
func (b *Bus) answer(ctx context.Context, subject string, req []byte, h Handle, respond func([]byte) error) {
	var reply any
	if err := b.recovered(nil, subject, func() error { reply = h(ctx, req); return nil }); err != nil {
		return
	}
	data, err := json.Marshal(reply)
	if err == nil {
		err = respond(data)
	}
	if err != nil {
		b.Log.Warn().Err(err).Str("subject", subject).Msg("answer a request")
	}
}

// Endpoint is a request/reply subject a registered service answers.
type Endpoint struct {
	Subject string
	Handle  Handle
}

// Register makes the service name (tunejet-<name>) known to NATS micro,
// so that $SRV.PING, INFO and STATS find it, with its endpoints, until the
// returned stop is called. Handlers get ctx.
func (b *Bus) Register(ctx context.Context, name, description string, endpoints ...Endpoint) (stop func(), err error) {
	svc, err := micro.AddService(b.nc, micro.Config{
		Name: "tunejet-" + name, Version: Version, Description: description,
		Metadata: map[string]string{"source": b.Source},
	})
	if err != nil {
		return nil, fmt.Errorf("register the %s with NATS micro: %w", name, err)
	}
	for _, e := range endpoints {
		handler := micro.HandlerFunc(func(req micro.Request) {
			b.answer(ctx, e.Subject, req.Data(), e.Handle, func(data []byte) error { return req.Respond(data) })
		})
		if err := svc.AddEndpoint(e.Subject[strings.LastIndex(e.Subject, ".")+1:], handler, micro.WithEndpointSubject(e.Subject)); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("register the %s: endpoint %s: %w", name, e.Subject, err)
		}
	}
	return func() { _ = svc.Stop() }, nil
}

// MaxPayload is the largest message the server takes.
func (b *Bus) MaxPayload() int64 { return b.nc.MaxPayload() }

// Connected reports whether the connection is up.
func (b *Bus) Connected() bool { return b.nc.IsConnected() }

// Reconnects is how many times the connection was re-established.
func (b *Bus) Reconnects() uint64 { return b.nc.Stats().Reconnects }

// Flush waits until the server has every message published so far (at
// most publishTry when ctx has no deadline).
func (b *Bus) Flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, publishTry)
		defer cancel()
	}
	if err := b.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

// errNoAck is returned by NakWork for a runner that gave no reply subject.
var errNoAck = errors.New("no ack subject")

// NakWork hands a piece of trial work back to its consumer at once (the
// nak of the delivery whose reply subject is ack, RunnerTrial.Ack), for
// another runner to take. It is sent, not confirmed: Flush confirms.
func (b *Bus) NakWork(ack string) error {
	if ack == "" {
		return errNoAck
	}
	if err := b.nc.Publish(ack, []byte("-NAK")); err != nil {
		return fmt.Errorf("nak work: %w", err)
	}
	return nil
}
