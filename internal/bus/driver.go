package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
)

// DriverBucket is the KV bucket of driver cursors, one key per experiment:
// the log sequence of the last event the experiment's driver (the Python
// Tuner.fit() running its callbacks) acknowledged. A restored run relays
// the events after it, so that each callback hook sees each event once
// across driver deaths and restores.
const DriverBucket = "tunejet_drivers"

// drivers opens (creating if needed) the driver cursor bucket.
func (b *Bus) drivers(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := b.bucket(ctx, jetstream.KeyValueConfig{
		Bucket: DriverBucket, Description: "tunejet driver cursors, one per experiment", History: 1,
		Replicas: b.replicas(),
	})
	if err != nil {
		return nil, fmt.Errorf("driver cursor bucket: %w", err)
	}
	return kv, nil
}

// DriverCursor is the log sequence of the last event experiment exp's
// driver acknowledged; 0 when it has acknowledged none.
func (b *Bus) DriverCursor(ctx context.Context, exp string) (uint64, error) {
	kv, err := b.drivers(ctx)
	if err != nil {
		return 0, err
	}
	e, err := kv.Get(ctx, exp)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("driver cursor of %s: %w", exp, err)
	}
	seq, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("driver cursor of %s: %q is not a sequence: %w", exp, e.Value(), err)
	}
	return seq, nil
}

// SetDriverCursor records that experiment exp's driver acknowledged every
// event up to log sequence seq.
func (b *Bus) SetDriverCursor(ctx context.Context, exp string, seq uint64) error {
	kv, err := b.drivers(ctx)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, exp, []byte(strconv.FormatUint(seq, 10))); err != nil {
		return fmt.Errorf("driver cursor of %s: %w", exp, err)
	}
	return nil
}

// dropDriverCursor removes experiment exp's driver cursor, if the bucket
// and the key exist.
func (b *Bus) dropDriverCursor(ctx context.Context, exp string) (bool, error) {
	kv, err := b.js.KeyValue(ctx, DriverBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("driver cursor bucket: %w", err)
	}
	if _, err := kv.Get(ctx, exp); errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err := kv.Purge(ctx, exp); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, fmt.Errorf("forget %s: its driver cursor: %w", exp, err)
	}
	return true, nil
}

// driverPrefix starts the core subject on which the controller asks an
// experiment's driver its questions: tunejet-driver.<exp>.
const driverPrefix = "tunejet-driver"

func driverSubject(exp string) string { return driverPrefix + "." + token(exp) }

// DriverReply is the driver's reply: its answer and the user object that
// gave it, or why it could not answer.
type DriverReply struct {
	Answer DriverAnswer `json:"answer"`
	By     string       `json:"by,omitempty"`
	Error  string       `json:"error,omitempty"`
}

// DriverAnswer is an answer as recorded, or Wait: the searcher has no
// config now (Ray's suggest returned None), ask again later.
type DriverAnswer struct {
	events.DriverAnswer
	Wait bool `json:"wait,omitempty"`
}

// ErrNoDriver means that no driver serves the experiment now.
var ErrNoDriver = errors.New("no driver serves the experiment")

// AskDriver asks experiment exp's driver q and returns its reply;
// ErrNoDriver when none is attached.
func (b *Bus) AskDriver(ctx context.Context, exp string, q events.DriverQuestion) (DriverReply, error) {
	var reply DriverReply
	err := b.Request(ctx, driverSubject(exp), q, &reply)
	if errors.Is(err, nats.ErrNoResponders) {
		return reply, fmt.Errorf("ask the driver of %s: %w", exp, ErrNoDriver)
	}
	if err != nil {
		return reply, err
	}
	if reply.Error != "" {
		return reply, fmt.Errorf("the driver of %s could not answer %s: %s", exp, q.Key, reply.Error)
	}
	return reply, nil
}

// ServeDriver answers the controller's questions to experiment exp's
// driver with h until the returned stop is called.
func (b *Bus) ServeDriver(ctx context.Context, exp string, h func(ctx context.Context, q events.DriverQuestion) DriverReply) (stop func(), err error) {
	return b.Serve(ctx, driverSubject(exp), "", func(ctx context.Context, req []byte) any {
		var q events.DriverQuestion
		if err := json.Unmarshal(req, &q); err != nil {
			return DriverReply{Error: "not a question: " + err.Error()}
		}
		return h(ctx, q)
	})
}
