package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/clock"
)

// Names of the streams and consumers tunejet provisions.
const (
	StreamName    = "TUNEJET"
	DLQStreamName = "TUNEJET_DLQ"
	// AdvisoryStreamName captures max-deliveries advisories of work consumers.
	AdvisoryStreamName  = "TUNEJET_ADVISORIES"
	maxDeliveriesPrefix = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."
	dlqPrefix           = "tunejet-dlq"
	// MaxEventSize is the largest event we store; bytes go to the Object Store.
	MaxEventSize = 1 << 20
)

// Headers added to dead-lettered messages.
const (
	HeaderDLQError    = "Tunejet-Dlq-Error"
	HeaderDLQSubject  = "Tunejet-Dlq-Subject"
	HeaderDLQSequence = "Tunejet-Dlq-Sequence"
)

// Bus is a JetStream connection with tunejet's conventions.
type Bus struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	Source string // CloudEvents source of events published through it
	Log    zerolog.Logger
	// Replicas is the replica count of the streams and buckets this bus
	// creates: 1 on a single server, 3 on a cluster. Default 1.
	Replicas int
	// EmbeddedStore is the store dir of the embedded server this bus is
	// connected to in-process, "" on a deployment's server.
	EmbeddedStore string

	log *streamCache // shared by copies of the Bus
}

// streamCache keeps the event log's handle and the lease bucket's:
// looking them up is a round trip.
type streamCache struct {
	mu      sync.Mutex
	s       jetstream.Stream
	leases  jetstream.KeyValue
	runners jetstream.KeyValue
	// undecodable is the last message by subject that LastEvent found
	// malformed and logged: a periodic read of the same one logs it once.
	undecodable map[string]uint64
}

// firstSight records that the message seq on subject does not decode,
// and reports whether it is news.
func (c *streamCache) firstSight(subject string, seq uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.undecodable[subject] == seq {
		return false
	}
	if c.undecodable == nil || len(c.undecodable) > 1024 {
		c.undecodable = map[string]uint64{}
	}
	c.undecodable[subject] = seq
	return true
}

// New wraps a connection. source names the service instance.
func New(nc *nats.Conn, source string, log zerolog.Logger) (*Bus, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	b := &Bus{nc: nc, js: js, Source: source, Log: log, log: &streamCache{}}
	return b, nil
}

func logSubjects() []string {
	ws := []events.Writer{events.WriterClient, events.WriterController, events.WriterRunner, events.WriterSyncer, events.WriterRestorer}
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = events.WriterSubjects("*", w)
	}
	return out
}

// Provision creates or updates the streams. It is idempotent: a second
// start finds them and changes nothing.
func (b *Bus) Provision(ctx context.Context) error {
	cfgs := []jetstream.StreamConfig{{
		Name:        StreamName,
		Description: "tunejet event log: every event of every experiment",
		Subjects:    logSubjects(),
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxMsgSize:  MaxEventSize,
		Duplicates:  2 * time.Minute,
	}, {
		Name:        DLQStreamName,
		Description: "tunejet dead letters: messages on tunejet subjects that did not decode",
		Subjects:    []string{dlqPrefix + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      30 * 24 * time.Hour,
	}, {
		// Captures the advisory JetStream emits when trial work runs out of
		// deliveries with nobody left to say so. It must exist before
		// runners start: advisories nobody listens to are never produced.
		Name:        AdvisoryStreamName,
		Description: "tunejet: max-deliveries advisories of trial work",
		Subjects:    []string{maxDeliveriesPrefix + StreamName + ".*"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      30 * 24 * time.Hour,
	}}
	for _, cfg := range cfgs {
		cfg.Replicas = b.replicas()
		if err := b.ensureStreamRetrying(ctx, cfg); err != nil {
			return fmt.Errorf("provision stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// provisionTry bounds one attempt to ensure a stream.
const provisionTry = 5 * time.Second

// ensureStreamRetrying is ensureStream, tried again when the server does
// not answer in time (see retryRequest).
func (b *Bus) ensureStreamRetrying(ctx context.Context, cfg jetstream.StreamConfig) error {
	return b.retryRequest(ctx, "stream "+cfg.Name, func(ctx context.Context) error { return b.ensureStream(ctx, cfg) })
}

// retryRequest runs an idempotent JetStream request, each try bounded by
// provisionTry, again while the server does not answer, until ctx is
// done. On a cluster, services starting together create the same stream
// or bucket at once: the meta leader proposes the equal assignments,
// answers the first, and marks the others answered without a reply
// (nats-server 2.15, processStreamAssignment), so their requests time out
// although the stream is there; looking again finds it. A meta or stream
// leader election after a node's loss makes requests time out the same
// way.
func (b *Bus) retryRequest(ctx context.Context, what string, f func(ctx context.Context) error) error {
	for {
		tctx, cancel := context.WithTimeout(ctx, provisionTry)
		err := f(tctx)
		cancel()
		if err == nil || ctx.Err() != nil || !retryable(err) {
			return err
		}
		b.Log.Warn().Err(err).Str("what", what).Msg("no answer in time; asking again")
		if clock.Sleep(ctx, 200*time.Millisecond) != nil {
			return err
		}
	}
}

// retryable reports whether a JetStream request failed for want of an
// answer (a timeout, no responders, a cluster between leaders) rather than
// being refused.
func retryable(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, jetstream.ErrAsyncPublishTimeout) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrCodeClusterNotAvailable
}

// jsErrCodeClusterNotAvailable is the server's "JetStream system
// temporarily unavailable" (no meta leader yet).
const jsErrCodeClusterNotAvailable jetstream.ErrorCode = 10008

// ensureStream creates a stream, or updates it only if its configuration
// differs: every service provisions on start, and needless updates would
// churn the server's store while consumers are being created.
func (b *Bus) ensureStream(ctx context.Context, cfg jetstream.StreamConfig) error {
	s, err := b.js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = b.js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil // another service created it first
		}
		return err
	}
	if err != nil {
		return err
	}
	have := s.CachedInfo().Config
	// Provisioning never lowers a stream's replicas: a client or a service
	// started without --replicas must not strip a cluster's R3 log down to
	// one copy, which the loss of that one node would take with it.
	cfg.Replicas = max(cfg.Replicas, have.Replicas)
	if slices.Equal(have.Subjects, cfg.Subjects) && have.Retention == cfg.Retention && have.Storage == cfg.Storage && have.Replicas == cfg.Replicas &&
		unlimited(have.MaxMsgSize) == unlimited(cfg.MaxMsgSize) && have.MaxAge == cfg.MaxAge && have.Description == cfg.Description &&
		(cfg.Duplicates == 0 || have.Duplicates == cfg.Duplicates) {
		return nil
	}
	_, err = b.js.UpdateStream(ctx, cfg)
	return err
}

// unlimited normalizes a limit the way the server stores it: 0 and -1
// both mean none.
func unlimited(n int32) int32 {
	if n <= 0 {
		return -1
	}
	return n
}

func (b *Bus) replicas() int {
	if b.Replicas < 1 {
		return 1
	}
	return b.Replicas
}

// stream returns the event log.
func (b *Bus) stream(ctx context.Context) (jetstream.Stream, error) {
	if b.log != nil {
		b.log.mu.Lock()
		defer b.log.mu.Unlock()
		if b.log.s != nil {
			return b.log.s, nil
		}
	}
	s, err := b.js.Stream(ctx, StreamName)
	if err != nil {
		return nil, fmt.Errorf("event log stream %s: %w", StreamName, err)
	}
	if b.log != nil {
		b.log.s = s
	}
	return s, nil
}

// Event builds an event from this bus's source.
func (b *Bus) Event(exp string, w events.Writer, p events.Payload) *events.Event {
	return events.New(exp, w, b.Source, p)
}

// Publish encodes ev, stores it in the log and returns its sequence. The
// event id is the Nats-Msg-Id, so a retried publish is stored once: a
// publish rides out a stream leader election or a reconnect (see
// publishMsg). With a fence, the event is stored only while the fence
// holds; a publish refused by it fails with an error Fenced recognizes.
func (b *Bus) Publish(ctx context.Context, ev *events.Event, fence ...Fence) (uint64, error) {
	msg, err := ToNATS(ev)
	if err != nil {
		return 0, err
	}
	opts := make([]jetstream.PublishOpt, 0, len(fence))
	for _, f := range fence {
		opts = append(opts, jetstream.WithExpectLastSequenceForSubject(f.Seq, f.Subject))
	}
	ack, err := b.publishMsg(ctx, msg, opts...)
	if err != nil {
		return 0, fmt.Errorf("publish %s for %s: %w", ev.Type(), ev.Experiment, err)
	}
	ev.Seq = ack.Sequence
	return ack.Sequence, nil
}

// ToNATS encodes an event as a NATS message.
func ToNATS(ev *events.Event) (*nats.Msg, error) {
	m, err := events.Encode(ev)
	if err != nil {
		return nil, err
	}
	return &nats.Msg{Subject: m.Subject, Header: nats.Header(m.Header), Data: m.Data}, nil
}

// FromJS decodes a JetStream message as an event with its stream sequence.
func FromJS(m jetstream.Msg) (*events.Event, error) {
	ev, err := events.Decode(m.Subject(), m.Headers(), m.Data())
	if err != nil {
		return nil, err
	}
	if md, err := m.Metadata(); err == nil {
		ev.Seq = md.Sequence.Stream
	}
	return ev, nil
}

// DeadLetter moves a message that did not decode out of the log and into
// TUNEJET_DLQ, with the error, and logs it.
func (b *Bus) DeadLetter(ctx context.Context, subject string, seq uint64, hdr map[string][]string, data []byte, cause error) {
	h := nats.Header{}
	for k, v := range hdr {
		// Nats-* headers were JetStream directives for the original publish
		// (Nats-Expected-Stream, Nats-Expected-Last-Sequence, ...); applied to
		// the copy they would make it fail.
		if !strings.HasPrefix(strings.ToLower(k), "nats-") {
			h[k] = v
		}
	}
	// One id per original message: a second dead-lettering of it (two
	// watchers overlap, or a restarted controller retries) is dropped.
	h.Set(events.HeaderMsgID, dlqPrefix+"-"+StreamName+"-"+strconv.FormatUint(seq, 10))
	h.Set(HeaderDLQError, cause.Error())
	h.Set(HeaderDLQSubject, subject)
	h.Set(HeaderDLQSequence, strconv.FormatUint(seq, 10))
	b.Log.Warn().Str("subject", subject).Uint64("seq", seq).Err(cause).Msg("dead-lettering a malformed message")
	if _, err := b.js.PublishMsg(ctx, &nats.Msg{Subject: dlqPrefix + "." + subject, Header: h, Data: data}); err != nil {
		b.Log.Error().Err(err).Uint64("seq", seq).Msg("dead letter: publish failed; the message stays in the log")
		return
	}
	s, err := b.stream(ctx)
	if err == nil {
		err = s.DeleteMsg(ctx, seq)
	}
	if err != nil && s != nil {
		// DeleteMsg of a message that is already gone does not wrap
		// ErrMsgNotFound ("sequence not found"); GetMsg does.
		if _, gerr := s.GetMsg(ctx, seq); errors.Is(gerr, jetstream.ErrMsgNotFound) {
			err = nil
		}
	}
	if err != nil {
		b.Log.Error().Err(err).Uint64("seq", seq).Msg("dead letter: could not remove the message from the log")
	}
}
