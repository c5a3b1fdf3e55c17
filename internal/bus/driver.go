package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
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
