package tune

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
)

// WithDriver makes Fit, and the Fit of a restored Tuner, relay the
// experiment's events to a driver — the Python Tuner.fit() that runs
// Ray's callbacks — over a pair of pipes, as JSON lines (docs/driver.md):
// each event after the driver's cursor, one at a time, which the driver
// acknowledges once its hooks have returned; the cursor, kept in
// JetStream, then moves past it. Events up to the cursor are sent first,
// marked "replay", for the driver to fold without calling its hooks. So
// each hook sees each event once across a driver's death and a restore.
// Fit returns once the driver has acknowledged the experiment's end; a
// driver that goes away (its pipe closes) ends Fit with an error, the
// experiment restorable.
func WithDriver(in io.Reader, out io.Writer) Option {
	return func(t *Tuner) error {
		if in == nil || out == nil {
			return fmt.Errorf("%w: WithDriver needs both pipes", ErrInvalidConfig)
		}
		t.driver = &driverConn{in: in, out: out}
		return nil
	}
}

// driverConn is the driver's pipes.
type driverConn struct {
	in  io.Reader
	out io.Writer
	wmu sync.Mutex // one message at a time on out

	// The driver's messages are read by one goroutine started with the
	// first relay: acks go to acks, replies to the request waiting for
	// them; readErr ends them.
	once    sync.Once
	acks    chan uint64
	readErr chan error

	rmu     sync.Mutex
	lastID  uint64
	waiting map[uint64]chan DriverMessage
}

// maxDriverLine bounds one message from the driver.
const maxDriverLine = 1 << 20

func (d *driverConn) read(log zerolog.Logger) {
	d.once.Do(func() {
		d.acks, d.readErr, d.waiting = make(chan uint64, 16), make(chan error, 1), map[uint64]chan DriverMessage{}
		go func() {
			sc := bufio.NewScanner(d.in)
			sc.Buffer(make([]byte, 64*1024), maxDriverLine)
			var err error
			for err == nil && sc.Scan() {
				err = d.route(sc.Bytes(), log)
			}
			if err == nil {
				err = sc.Err()
			}
			if err == nil {
				err = io.EOF
			}
			d.readErr <- err
		}()
	})
}

// route passes one message from the driver to whoever waits for it.
func (d *driverConn) route(raw []byte, log zerolog.Logger) error {
	var m DriverMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("the driver sent %q: %w", raw, err)
	}
	switch m.Kind {
	case "ack":
		d.acks <- m.Seq
	case "reply":
		d.rmu.Lock()
		ch := d.waiting[m.ID]
		delete(d.waiting, m.ID)
		d.rmu.Unlock()
		if ch != nil {
			ch <- m
		}
	default:
		log.Debug().Str("kind", m.Kind).Msg("driver: ignoring a message of a kind this version does not know")
	}
	return nil
}

// write sends one message to the driver.
func (d *driverConn) write(msg DriverMessage) error {
	line, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("message to the driver: %w", err)
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if _, err := d.out.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("the driver went away: %w", err)
	}
	return nil
}

// ask sends the driver a question and returns its reply.
func (d *driverConn) ask(ctx context.Context, q events.DriverQuestion) (bus.DriverReply, error) {
	ch := make(chan DriverMessage, 1)
	d.rmu.Lock()
	d.lastID++
	id := d.lastID
	d.waiting[id] = ch
	d.rmu.Unlock()
	defer func() { d.rmu.Lock(); delete(d.waiting, id); d.rmu.Unlock() }()
	msg := DriverMessage{Kind: "request", ID: id, Method: q.Method, Key: q.Key, Through: q.Through, TrialID: q.TrialID, Index: q.Index, Result: q.Result, Config: q.Config, Resample: q.Resample}
	if err := d.write(msg); err != nil {
		return bus.DriverReply{}, err
	}
	select {
	case <-ctx.Done():
		return bus.DriverReply{}, ctx.Err()
	case m := <-ch:
		reply := bus.DriverReply{By: m.By, Error: m.Error}
		if len(m.Answer) > 0 {
			if err := json.Unmarshal(m.Answer, &reply.Answer); err != nil {
				return reply, fmt.Errorf("the driver's answer to %s: %w", q.Key, err)
			}
		}
		return reply, nil
	case err := <-d.readErr:
		d.readErr <- err // for whoever reads next
		return bus.DriverReply{}, fmt.Errorf("the driver went away before answering %s: %w", q.Key, err)
	}
}

// DriverMessage is one JSON line between tunejet and the driver
// (docs/driver.md). Kind "event" goes to the driver (Seq, Type, TrialID,
// Time, Data, Replay) and "ack" comes back (Seq); "request" goes to it
// (ID, Method, Key, Through, TrialID, Index, Result, Config, Resample) and "reply" comes
// back (ID, Answer, By, or Error). Other kinds are ignored.
type DriverMessage struct {
	Kind    string          `json:"kind"`
	Seq     uint64          `json:"seq,omitempty"`
	Type    string          `json:"type,omitempty"`
	TrialID string          `json:"trial_id,omitempty"`
	Time    *time.Time      `json:"time,omitempty"`
	Replay  bool            `json:"replay,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`

	ID       uint64          `json:"id,omitempty"`
	Method   string          `json:"method,omitempty"`
	Key      string          `json:"key,omitempty"`
	Through  uint64          `json:"through,omitempty"`
	Index    *int            `json:"index,omitempty"`
	Result   map[string]any  `json:"result,omitempty"`
	Config   map[string]any  `json:"config,omitempty"`
	Resample []string        `json:"resample,omitempty"`
	Answer   json.RawMessage `json:"answer,omitempty"`
	By       string          `json:"by,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// driverTypes are the event types relayed to the driver: what Ray's
// callbacks and its Trial objects are made of.
var driverTypes = []string{
	events.TypeExperimentStarted, events.TypeExperimentRestored, events.TypeExperimentInterrupted, events.TypeExperimentCompleted,
	events.TypeTrialCreated, events.TypeTrialStarted, events.TypeTrialReported, events.TypeTrialCheckpointed,
	events.TypeTrialFailed, events.TypeTrialPaused, events.TypeTrialCompleted, events.TypeCheckpointPersisted,
	events.TypeDriverAnswered,
}

// relay sends one experiment's events to the driver, and passes it the
// controller's questions.
type relay struct {
	d        *driverConn
	b        *bus.Bus
	exp      string
	cursor   uint64 // the driver's cursor when the relay started
	from     uint64 // the first event of this run
	stopFn   context.CancelFunc
	stopping atomic.Bool
	done     chan struct{}

	mu      sync.Mutex
	acked   uint64
	passed  uint64 // the last event the relay sent, or had no need to
	err     error
	changed chan struct{} // closed and replaced when acked, passed or err changes
}

// relayed reports whether ev goes to the driver: one of driverTypes, or
// the controller's stop of a trial, which ends a trial not running
// (docs/driver.md).
func relayed(ev *events.Event) bool {
	if p, ok := ev.Data.(*events.TrialStopRequested); ok {
		return ev.Writer == events.WriterController && !p.Pause
	}
	return slices.Contains(driverTypes, ev.Type())
}

// startRelay starts relaying experiment exp's events to t's driver, if
// it has one (else it returns nil, whose methods do nothing), and
// answering the controller's questions to the driver. A relay that fails
// calls fail.
//
// from is where this run's own events start (its experiment.restored; 0
// for a fresh run): an experiment's end before it, which the driver of an
// earlier run did not acknowledge, is sent as a replay, not as this run's
// end.
func (t *Tuner) startRelay(ctx context.Context, b *bus.Bus, exp string, from uint64, fail func()) (*relay, error) {
	if t.driver == nil {
		return nil, nil
	}
	cursor, err := b.DriverCursor(ctx, exp)
	if err != nil {
		return nil, err
	}
	t.driver.read(b.Log)
	rctx, cancel := context.WithCancel(ctx)
	r := &relay{d: t.driver, b: b, exp: exp, cursor: cursor, from: from, acked: cursor, stopFn: cancel, done: make(chan struct{}), changed: make(chan struct{})}
	stopServing, err := b.ServeDriver(rctx, exp, r.question)
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		// A driver that goes away while nothing is on its way to it (its
		// trials wait) ends the relay too, not only at the next event.
		select {
		case err := <-r.d.readErr:
			r.d.readErr <- err // for whoever reads next
			if !r.stopping.Load() && ctx.Err() == nil {
				r.set(0, 0, fmt.Errorf("driver of %s: the driver went away: %w", exp, err))
				fail()
			}
		case <-rctx.Done():
		}
	}()
	go func() {
		defer close(r.done)
		defer stopServing()
		var sendErr error
		// Every event of the experiment, so that the relay knows how far
		// the driver has the log when a question comes (question).
		err := b.Watch(rctx, events.ExperimentSubjects(exp), 1, bus.Handler{Event: func(ev *events.Event) {
			if sendErr != nil {
				return
			}
			if relayed(ev) {
				if sendErr = r.send(rctx, ev); sendErr != nil {
					cancel()
					return
				}
			}
			r.set(0, ev.Seq, nil)
		}})
		if ctx.Err() != nil || r.stopping.Load() {
			return // stopped, not failed
		}
		if sendErr != nil {
			err = sendErr
		}
		if err == nil {
			err = errors.New("the relay's watch ended")
		}
		r.set(0, 0, fmt.Errorf("driver of %s: %w", exp, err))
		fail()
	}()
	return r, nil
}

// question passes one of the controller's questions to the driver, once
// the driver has every event up to the log sequence the controller had
// folded (docs/driver.md), and returns its reply.
func (r *relay) question(ctx context.Context, q events.DriverQuestion) bus.DriverReply {
	if err := r.until(ctx, func() bool { return r.passed >= q.Through }); err != nil {
		return bus.DriverReply{Error: err.Error()}
	}
	reply, err := r.d.ask(ctx, q)
	if err != nil {
		return bus.DriverReply{Error: err.Error()}
	}
	return reply
}

// send writes ev to the driver and, unless it is a replay, waits for its
// ack, then moves the cursor past it.
func (r *relay) send(ctx context.Context, ev *events.Event) error {
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return fmt.Errorf("event %d: %w", ev.Seq, err)
	}
	t := ev.Time
	msg := DriverMessage{Kind: "event", Seq: ev.Seq, Type: strings.TrimPrefix(ev.Type(), events.TypePrefix),
		TrialID: ev.Trial(), Time: &t, Replay: ev.Seq <= r.cursor || ev.Seq < r.from && endsRun(ev), Data: data}
	if err := r.d.write(msg); err != nil {
		return err
	}
	if msg.Replay {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-r.d.readErr:
			r.d.readErr <- err // for whoever reads next
			return fmt.Errorf("the driver went away before acknowledging event %d: %w", ev.Seq, err)
		case seq := <-r.d.acks:
			if seq < ev.Seq {
				continue // an ack sent twice
			}
			if seq > ev.Seq {
				return fmt.Errorf("the driver acknowledged event %d, not sent yet, while event %d waits", seq, ev.Seq)
			}
			if err := r.b.SetDriverCursor(ctx, r.exp, ev.Seq); err != nil {
				return err
			}
			r.set(ev.Seq, 0, nil)
			return nil
		}
	}
}

// endsRun reports whether ev ends a run of the experiment.
func endsRun(ev *events.Event) bool {
	switch ev.Data.(type) {
	case *events.ExperimentCompleted, *events.ExperimentInterrupted:
		return true
	}
	return false
}

// set records an ack, the relay's progress, or its error.
func (r *relay) set(acked, passed uint64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acked, r.passed = max(r.acked, acked), max(r.passed, passed)
	if err != nil && r.err == nil {
		r.err = err
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// failed is the relay's error, if it failed.
func (r *relay) failed() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// until returns once cond, called under the relay's lock, holds, or the
// relay failed, or ctx is done.
func (r *relay) until(ctx context.Context, cond func() bool) error {
	for {
		r.mu.Lock()
		ok, err, changed := cond(), r.err, r.changed
		r.mu.Unlock()
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// wait returns once the driver has acknowledged the event at seq (the
// experiment's end), or the relay failed, or ctx is done.
func (r *relay) wait(ctx context.Context, seq uint64) error {
	if r == nil {
		return nil
	}
	if err := r.until(ctx, func() bool { return r.acked >= seq }); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: waiting for the driver to acknowledge the experiment's end", ErrInterrupted)
		}
		return err
	}
	return nil
}

// stop ends the relay and waits for it.
func (r *relay) stop() {
	if r == nil {
		return
	}
	r.stopping.Store(true)
	r.stopFn()
	<-r.done
}
