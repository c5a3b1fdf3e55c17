package tune

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	// lines are the driver's messages, read by one goroutine started with
	// the first relay; readErr ends them.
	once    sync.Once
	lines   chan []byte
	readErr chan error
}

// maxDriverLine bounds one message from the driver.
const maxDriverLine = 1 << 20

func (d *driverConn) read() {
	d.once.Do(func() {
		d.lines, d.readErr = make(chan []byte), make(chan error, 1)
		go func() {
			sc := bufio.NewScanner(d.in)
			sc.Buffer(make([]byte, 64*1024), maxDriverLine)
			for sc.Scan() {
				d.lines <- append([]byte(nil), sc.Bytes()...)
			}
			err := sc.Err()
			if err == nil {
				err = io.EOF
			}
			d.readErr <- err
		}()
	})
}

// DriverMessage is one JSON line between tunejet and the driver. Kind
// "event" goes to the driver (Seq, Type, TrialID, Time, Data, Replay);
// "ack" comes back (Seq). Other kinds are for requests and replies to
// come, and are ignored by this version.
type DriverMessage struct {
	Kind    string          `json:"kind"`
	Seq     uint64          `json:"seq,omitempty"`
	Type    string          `json:"type,omitempty"`
	TrialID string          `json:"trial_id,omitempty"`
	Time    *time.Time      `json:"time,omitempty"`
	Replay  bool            `json:"replay,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// driverTypes are the event types relayed to the driver: what Ray's
// callbacks and its Trial objects are made of.
var driverTypes = []string{
	events.TypeExperimentStarted, events.TypeExperimentRestored, events.TypeExperimentInterrupted, events.TypeExperimentCompleted,
	events.TypeTrialCreated, events.TypeTrialStarted, events.TypeTrialReported, events.TypeTrialCheckpointed,
	events.TypeTrialFailed, events.TypeTrialPaused, events.TypeTrialCompleted, events.TypeCheckpointPersisted,
}

// driverFilters are the subjects of experiment exp's driverTypes.
func driverFilters(exp string) []string {
	var out []string
	for _, typ := range driverTypes {
		for _, w := range events.Writers(typ) {
			out = append(out, events.TypeSubjects(exp, w, typ))
		}
	}
	return out
}

// relay sends one experiment's events to the driver.
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
	err     error
	changed chan struct{} // closed and replaced when acked or err changes
}

// startRelay starts relaying experiment exp's events to t's driver, if
// it has one (else it returns nil, whose methods do nothing). A relay that
// fails calls fail.
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
	t.driver.read()
	rctx, cancel := context.WithCancel(ctx)
	r := &relay{d: t.driver, b: b, exp: exp, cursor: cursor, from: from, acked: cursor, stopFn: cancel, done: make(chan struct{}), changed: make(chan struct{})}
	go func() {
		defer close(r.done)
		var sendErr error
		err := b.WatchSubjects(rctx, driverFilters(exp), 1, bus.Handler{Event: func(ev *events.Event) {
			if sendErr != nil {
				return
			}
			if sendErr = r.send(rctx, ev); sendErr != nil {
				cancel()
			}
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
		r.set(0, fmt.Errorf("driver of %s: %w", exp, err))
		fail()
	}()
	return r, nil
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
	line, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("event %d: %w", ev.Seq, err)
	}
	if _, err := r.d.out.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("the driver went away: %w", err)
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
		case raw := <-r.d.lines:
			var m DriverMessage
			if err := json.Unmarshal(raw, &m); err != nil {
				return fmt.Errorf("the driver sent %q: %w", raw, err)
			}
			if m.Kind != "ack" {
				r.b.Log.Debug().Str("kind", m.Kind).Msg("driver: ignoring a message of a kind this version does not know")
				continue
			}
			if m.Seq < ev.Seq {
				continue // an ack sent twice
			}
			if m.Seq > ev.Seq {
				return fmt.Errorf("the driver acknowledged event %d, not sent yet, while event %d waits", m.Seq, ev.Seq)
			}
			if err := r.b.SetDriverCursor(ctx, r.exp, ev.Seq); err != nil {
				return err
			}
			r.set(ev.Seq, nil)
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

// set records an ack, or the relay's error.
func (r *relay) set(acked uint64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acked = max(r.acked, acked)
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

// wait returns once the driver has acknowledged the event at seq (the
// experiment's end), or the relay failed, or ctx is done.
func (r *relay) wait(ctx context.Context, seq uint64) error {
	if r == nil {
		return nil
	}
	for {
		r.mu.Lock()
		acked, err, changed := r.acked, r.err, r.changed
		r.mu.Unlock()
		switch {
		case err != nil:
			return err
		case acked >= seq:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for the driver to acknowledge the experiment's end", ErrInterrupted)
		case <-changed:
		}
	}
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
