package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// RunnerBucket is the KV bucket of live runners. Entries expire RunnerTTL
// after a runner's last renewal, so a dead runner disappears by itself.
const RunnerBucket = "tunejet_runners"

// RunnerTTL is how long a runner's entry outlives its last renewal;
// runners renew every RunnerTTL/4.
const RunnerTTL = 10 * time.Second

// RunnerInfo is what a runner publishes about itself.
type RunnerInfo struct {
	Name     string        `json:"name"`
	Hostname string        `json:"hostname"`
	PID      int           `json:"pid"`
	Slots    int           `json:"slots"`
	Started  time.Time     `json:"started"`
	Trials   []RunnerTrial `json:"trials"`
}

// RunnerTrial is a trial attempt a runner is running.
type RunnerTrial struct {
	Experiment string `json:"experiment"`
	TrialID    string `json:"trial_id"`
	Attempt    int    `json:"attempt"`
	// Ack is the reply subject of the attempt's work message: a controller
	// that finds the runner gone naks the work through it, so it is
	// redelivered at once instead of after the heartbeat timeout.
	Ack string `json:"ack,omitempty"`
	// Delivery is which delivery of the work message the attempt runs
	// (JetStream's NumDelivered): the last one allowed is left to the
	// heartbeat timeout, whose expiry reports the work exhausted.
	Delivery int `json:"delivery,omitempty"`
}

// Runners opens (creating if needed) the runner registry.
func (b *Bus) Runners(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := b.bucket(ctx, jetstream.KeyValueConfig{
		Bucket: RunnerBucket, Description: "tunejet live runners", TTL: RunnerTTL, History: 1, Replicas: b.replicas(),
	})
	if err != nil {
		return nil, fmt.Errorf("runner registry: %w", err)
	}
	return kv, nil
}

// ProvisionBuckets creates the KV buckets the controller owns: the runner
// registry and the controller leases. Runners only use the registry, so
// they need no right to create streams.
func (b *Bus) ProvisionBuckets(ctx context.Context) error {
	if _, err := b.Runners(ctx); err != nil {
		return err
	}
	_, err := b.Leases(ctx)
	return err
}

// ExistingRunners opens the runner registry if some runner created it;
// ok is false when none has yet.
func (b *Bus) ExistingRunners(ctx context.Context) (kv jetstream.KeyValue, ok bool, err error) {
	kv, err = b.JS.KeyValue(ctx, RunnerBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("runner registry: %w", err)
	}
	return kv, true, nil
}

// PutRunner records or renews a runner's entry.
func PutRunner(ctx context.Context, kv jetstream.KeyValue, info RunnerInfo) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, info.Name, b); err != nil {
		return fmt.Errorf("register runner %s: %w", info.Name, err)
	}
	return nil
}

// ListRunners returns the live runners, by name.
func ListRunners(ctx context.Context, kv jetstream.KeyValue) ([]RunnerInfo, error) {
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	var out []RunnerInfo
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("runner %s: %w", k, err)
		}
		var info RunnerInfo
		if err := json.Unmarshal(e.Value(), &info); err != nil {
			continue
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
