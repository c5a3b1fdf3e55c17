package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
)

// RunnerBucket is the KV bucket of live runners. Entries expire RunnerTTL
// after a runner's last renewal, so a dead runner disappears by itself.
const RunnerBucket = "tunejet_runners"

// RunnerTTL is how long a runner's entry outlives its last renewal;
// runners renew every RunnerTTL/4.
const RunnerTTL = 10 * time.Second

// RunnerInfo is what a runner publishes about itself.
type RunnerInfo struct {
	Name     string `json:"name"`
	Hostname string `json:"hostname"`
	PID      int    `json:"pid"`
	// Slots is the runner's CPUs, whole, for readers from before
	// Capacity.
	Slots   int           `json:"slots"`
	Started time.Time     `json:"started"`
	Trials  []RunnerTrial `json:"trials"`
	// Capacity is what the runner has in total: cpu, gpu, memory (bytes)
	// and custom resources. Absent (an older runner): {"cpu": Slots}.
	Capacity events.Resources `json:"capacity,omitempty"`
	// GPUIDs are the device ids of its GPUs.
	GPUIDs []string `json:"gpu_ids,omitempty"`
	// Workers are its warm workers (fork servers of command trainables).
	Workers []WarmWorker `json:"workers,omitempty"`
}

// WarmWorker is one of a runner's warm workers: a command trainable's
// fork server, loaded once, forking a process per attempt.
type WarmWorker struct {
	Experiment string `json:"experiment"`
	// Trainable is the last argument of its command (the Python SDK's
	// trainable name).
	Trainable string `json:"trainable"`
	PID       int    `json:"pid"`
	// GPUIDs are the devices it was started with (CUDA_VISIBLE_DEVICES).
	GPUIDs []string `json:"gpu_ids,omitempty"`
	// Running counts its attempts running now, Trials those it has forked.
	Running int `json:"running"`
	Trials  int `json:"trials"`
	// RSSBytes is its resident memory, not counting its forked trials.
	RSSBytes int64 `json:"rss_bytes"`
	// IdleSince is when its last attempt ended, if none runs.
	IdleSince time.Time `json:"idle_since,omitzero"`
}

// Total is what the runner has: Capacity, or Slots CPUs for an entry
// without it.
func (r RunnerInfo) Total() events.Resources {
	if len(r.Capacity) > 0 {
		return r.Capacity
	}
	return events.Resources{events.ResourceCPU: float64(r.Slots)}
}

// Held is what its running attempts hold, summed.
func (r RunnerInfo) Held() events.Resources {
	out := events.Resources{}
	for _, t := range r.Trials {
		for k, v := range t.Shape() {
			out[k] += v
		}
	}
	return out
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
	// Resources is what the attempt holds; absent (an older runner): one
	// CPU.
	Resources events.Resources `json:"resources,omitempty"`
	// GPUIDs are the devices it was given.
	GPUIDs []string `json:"gpu_ids,omitempty"`
}

// Shape is what the attempt holds: Resources, or one CPU.
func (t RunnerTrial) Shape() events.Resources {
	if len(t.Resources) == 0 {
		return events.DefaultShape()
	}
	return t.Resources
}

// runners opens (creating if needed) the runner registry.
func (b *Bus) runners(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := b.bucket(ctx, jetstream.KeyValueConfig{
		Bucket: RunnerBucket, Description: "tunejet live runners", TTL: RunnerTTL, History: 1, Replicas: b.replicas(),
	})
	if err != nil {
		return nil, fmt.Errorf("runner registry: %w", err)
	}
	return kv, nil
}

// ProvisionBuckets creates the KV buckets the controller owns: the runner
// registry, the controller leases and the driver cursors. Runners and
// clients only use them, so they need no right to create streams.
func (b *Bus) ProvisionBuckets(ctx context.Context) error {
	if _, err := b.runners(ctx); err != nil {
		return err
	}
	if _, err := b.leases(ctx); err != nil {
		return err
	}
	_, err := b.drivers(ctx)
	return err
}

// existingRunners opens the runner registry if some runner created it;
// ok is false when none has yet.
func (b *Bus) existingRunners(ctx context.Context) (kv jetstream.KeyValue, ok bool, err error) {
	kv, err = b.js.KeyValue(ctx, RunnerBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("runner registry: %w", err)
	}
	return kv, true, nil
}

// PutRunnerInfo records or renews a runner's entry in the registry, which
// the controller creates: ok is false while there is none yet.
func (b *Bus) PutRunnerInfo(ctx context.Context, info RunnerInfo) (ok bool, err error) {
	var kv jetstream.KeyValue
	if b.log != nil {
		b.log.mu.Lock()
		kv = b.log.runners
		b.log.mu.Unlock()
	}
	if kv == nil {
		found, ok, err := b.existingRunners(ctx)
		if err != nil || !ok {
			return false, err
		}
		kv = found
		if b.log != nil {
			b.log.mu.Lock()
			b.log.runners = kv
			b.log.mu.Unlock()
		}
	}
	return true, putRunner(ctx, kv, info)
}

// RemoveRunnerInfo deletes a runner's entry from the registry, if
// PutRunnerInfo found the registry.
func (b *Bus) RemoveRunnerInfo(ctx context.Context, name string) error {
	if b.log == nil {
		return nil
	}
	b.log.mu.Lock()
	kv := b.log.runners
	b.log.mu.Unlock()
	if kv == nil {
		return nil
	}
	if err := kv.Delete(ctx, name); err != nil {
		return fmt.Errorf("remove runner %s: %w", name, err)
	}
	return nil
}

// putRunner records or renews a runner's entry.
func putRunner(ctx context.Context, kv jetstream.KeyValue, info RunnerInfo) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, info.Name, b); err != nil {
		return fmt.Errorf("register runner %s: %w", info.Name, err)
	}
	return nil
}

// LiveRunners lists the live runners, by name, if some runner created the
// registry: ok is false when none has yet. It creates nothing, so a
// reader without the right to create buckets (tunejet status, the
// dashboard) can call it.
func (b *Bus) LiveRunners(ctx context.Context) (runners []RunnerInfo, ok bool, err error) {
	kv, ok, err := b.existingRunners(ctx)
	if err != nil || !ok {
		return nil, ok, err
	}
	runners, err = listRunners(ctx, kv)
	return runners, err == nil, err
}

// listRunners returns the live runners of the registry kv, by name.
func listRunners(ctx context.Context, kv jetstream.KeyValue) ([]RunnerInfo, error) {
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

// RunnerUpdate is one change of the runner registry, or the mark that the
// entries the registry held when the watch began have all been sent.
type RunnerUpdate struct {
	Name string
	// Info is the runner's entry, nil when the entry went (or, from
	// WatchExistingRunners, does not decode).
	Info *RunnerInfo
	// Entry is the entry as the runner wrote it, for readers that keep
	// fields RunnerInfo does not know, and Written when it was written;
	// Entry is nil when the entry went.
	Entry   []byte
	Written time.Time
	// Current marks the end of the entries the registry held when the
	// watch began (Name and Info are empty): the watcher now knows every
	// runner registered, none if there was no entry before it.
	Current bool
}

// WatchRunners follows the runner registry: its entries now, then the
// Current mark, then every change, until ctx ends or the watch ends by
// itself; then the channel is closed. Entries that do not decode are skipped. Entries that expire are
// not announced: a watcher forgets an entry not renewed for RunnerTTL.
func (b *Bus) WatchRunners(ctx context.Context) (<-chan RunnerUpdate, error) {
	kv, err := b.runners(ctx)
	if err != nil {
		return nil, err
	}
	return watchRunners(ctx, kv, true)
}

// WatchExistingRunners is WatchRunners on the registry if some runner
// created it (ok is false when none has yet; it creates nothing, so a
// reader without the right to create buckets can follow it), and it also
// sends the entries that do not decode as a RunnerInfo.
func (b *Bus) WatchExistingRunners(ctx context.Context) (updates <-chan RunnerUpdate, ok bool, err error) {
	kv, ok, err := b.existingRunners(ctx)
	if err != nil || !ok {
		return nil, ok, err
	}
	updates, err = watchRunners(ctx, kv, false)
	return updates, err == nil, err
}

// watchRunners follows the registry kv, skipping the entries that do not
// decode when skipInvalid.
func watchRunners(ctx context.Context, kv jetstream.KeyValue, skipInvalid bool) (<-chan RunnerUpdate, error) {
	watch, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch the runner registry: %w", err)
	}
	out := make(chan RunnerUpdate)
	go func() {
		defer close(out)
		defer func() { _ = watch.Stop() }()
		for {
			var e jetstream.KeyValueEntry
			select {
			case got, ok := <-watch.Updates():
				if !ok {
					return
				}
				e = got
			case <-ctx.Done():
				return
			}
			u := RunnerUpdate{Current: e == nil} // nil: the initial values are in
			if e != nil {
				u.Name, u.Written = e.Key(), e.Created()
			}
			if e != nil && e.Operation() == jetstream.KeyValuePut {
				u.Entry = e.Value()
				if u.Entry == nil {
					u.Entry = []byte{}
				}
				var info RunnerInfo
				if err := json.Unmarshal(e.Value(), &info); err == nil {
					u.Info = &info
				} else if skipInvalid {
					continue
				}
			}
			select {
			case out <- u:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// Unfit says why a trial of shape can run on none of the live runners of
// totals ("needs gpu=2; the largest live runner has gpu=1"), or "" when
// one of them holds it, or when there is none (runners may come later).
func Unfit(shape events.Resources, totals []events.Resources) string {
	if len(totals) == 0 {
		return ""
	}
	for _, t := range totals {
		if shape.FitsIn(t) {
			return ""
		}
	}
	for _, name := range shape.Names() {
		most := events.Resources{}
		for _, t := range totals {
			most[name] = max(most[name], t[name])
		}
		if shape[name] > most[name]+1e-9 {
			return fmt.Sprintf("needs %s=%s; the largest live runner has %s=%s", name, shape.Amount(name), name, most.Amount(name))
		}
	}
	return fmt.Sprintf("needs %s; no live runner has all of it at once", shape)
}

// Totals are the capacities of runners.
func Totals(runners []RunnerInfo) []events.Resources {
	out := make([]events.Resources, len(runners))
	for i, r := range runners {
		out[i] = r.Total()
	}
	return out
}
