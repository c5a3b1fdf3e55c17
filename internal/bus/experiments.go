package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt"
)

// ErrLeaseHeld is wrapped by Forget when a controller holds the
// experiment's lease: the experiment is running.
var ErrLeaseHeld = errors.New("a controller holds the experiment's lease")

// LoggedExperiments lists the experiments whose events the log holds,
// sorted by name.
func (b *Bus) LoggedExperiments(ctx context.Context) ([]string, error) {
	s, err := b.stream(ctx)
	if err != nil {
		return nil, err
	}
	// Every experiment has experiment-level events (submitted first), and
	// few of them: the subjects listed stay few.
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.Prefix+".*.*.experiment.*"))
	if err != nil {
		return nil, fmt.Errorf("list experiments: %w", err)
	}
	var names []string
	for subject := range info.State.Subjects {
		if parts := strings.Split(subject, "."); len(parts) > 1 && !slices.Contains(names, parts[1]) {
			names = append(names, parts[1])
		}
	}
	slices.Sort(names)
	return names, nil
}

// Forgotten is what Forget removed.
type Forgotten struct {
	// Events is how many of the experiment's events the log held.
	Events uint64
	// Consumers are the durable consumers deleted (work_<name>, sync_<name>).
	Consumers []string
	// Checkpoints says whether the experiment's checkpoint bucket (staged
	// checkpoints and objects) was deleted.
	Checkpoints bool
	// DriverCursor says whether the experiment's driver cursor (the last
	// event its Python driver's callbacks acknowledged) was deleted.
	DriverCursor bool
}

// Forget removes experiment exp from NATS: its events from the log, the
// dead letters and max-deliveries advisories about it, its consumers, its
// checkpoint bucket, its driver cursor and its lease. It refuses (ErrLeaseHeld) while a
// controller holds the experiment's lease. Storage is not touched.
func (b *Bus) Forget(ctx context.Context, exp string) (Forgotten, error) {
	var f Forgotten
	if err := events.ValidateID("experiment name", exp); err != nil {
		return f, err
	}
	if err := b.notLeased(ctx, exp); err != nil {
		return f, err
	}
	s, err := b.stream(ctx)
	if err != nil {
		return f, err
	}
	if f.Consumers, err = deleteConsumersOf(ctx, s, exp); err != nil {
		return f, err
	}
	filter := events.ExperimentSubjects(exp)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return f, fmt.Errorf("forget %s: %w", exp, err)
	}
	for _, n := range info.State.Subjects {
		f.Events += n
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(filter)); err != nil {
		return f, fmt.Errorf("forget %s: purge its events: %w", exp, err)
	}
	for stream, subject := range map[string]string{
		DLQStreamName:      dlqPrefix + "." + filter,
		AdvisoryStreamName: maxDeliveriesPrefix + StreamName + "." + WorkConsumerName(exp),
	} {
		if err := b.purgeIfAny(ctx, stream, subject); err != nil {
			return f, fmt.Errorf("forget %s: %w", exp, err)
		}
	}
	switch err := b.js.DeleteObjectStore(ctx, ckpt.Bucket(exp)); {
	case err == nil:
		f.Checkpoints = true
	case !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, jetstream.ErrBucketNotFound):
		return f, fmt.Errorf("forget %s: delete its checkpoint bucket: %w", exp, err)
	}
	if f.DriverCursor, err = b.dropDriverCursor(ctx, exp); err != nil {
		return f, err
	}
	return f, b.dropLease(ctx, exp)
}

// notLeased refuses an experiment whose lease a controller holds.
func (b *Bus) notLeased(ctx context.Context, exp string) error {
	leases, ok, err := b.ExistingLeases(ctx)
	if err != nil || !ok {
		return err
	}
	holder, _, err := leases.Holder(ctx, exp)
	if err != nil {
		return err
	}
	if holder != "" {
		return fmt.Errorf("%w: experiment %s is running, led by controller %s", ErrLeaseHeld, exp, holder)
	}
	return nil
}

// dropLease removes the experiment's lease key (no holder, as checked),
// so no expired entry is left behind.
func (b *Bus) dropLease(ctx context.Context, exp string) error {
	leases, ok, err := b.ExistingLeases(ctx)
	if err != nil || !ok {
		return err
	}
	if err := leases.kv.Purge(ctx, exp); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("forget %s: its lease: %w", exp, err)
	}
	return nil
}

// deleteConsumersOf deletes the log's consumers that read only
// experiment exp's events, and returns the names of the durable ones.
func deleteConsumersOf(ctx context.Context, s jetstream.Stream, exp string) ([]string, error) {
	var mine []*jetstream.ConsumerInfo
	list := s.ListConsumers(ctx)
	for info := range list.Info() {
		if readsOnly(info.Config, exp) {
			mine = append(mine, info)
		}
	}
	if err := list.Err(); err != nil {
		return nil, fmt.Errorf("forget %s: list consumers: %w", exp, err)
	}
	var names []string
	for _, info := range mine {
		if err := s.DeleteConsumer(ctx, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return names, fmt.Errorf("forget %s: delete consumer %s: %w", exp, info.Name, err)
		}
		if info.Config.Durable != "" {
			names = append(names, info.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// readsOnly reports whether a consumer's filters all lie within
// experiment exp's subjects.
func readsOnly(c jetstream.ConsumerConfig, exp string) bool {
	prefix := events.Prefix + "." + exp + "."
	filters := c.FilterSubjects
	if c.FilterSubject != "" {
		filters = append(filters, c.FilterSubject)
	}
	for _, f := range filters {
		if !strings.HasPrefix(f, prefix) {
			return false
		}
	}
	return len(filters) > 0
}

// purgeIfAny purges subject from stream, when the stream exists.
func (b *Bus) purgeIfAny(ctx context.Context, stream, subject string) error {
	s, err := b.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", stream, err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return fmt.Errorf("purge %s from %s: %w", subject, stream, err)
	}
	return nil
}
