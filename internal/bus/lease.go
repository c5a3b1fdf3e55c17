package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LeaseBucket is the KV bucket of controller leases, one key per
// experiment. An entry expires LeaseTTL after its last renewal.
const LeaseBucket = "tunejet_leases"

// LeaseTTL is how long a lease outlives its holder's last renewal: the
// longest a standby controller waits to take over from a dead one.
const LeaseTTL = 3 * time.Second

// leases opens (creating if needed) the lease bucket.
func (b *Bus) leases(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := b.bucket(ctx, jetstream.KeyValueConfig{
		Bucket: LeaseBucket, Description: "tunejet controller leases, one per experiment", TTL: LeaseTTL, History: 1,
		Replicas: b.replicas(),
	})
	if err != nil {
		return nil, fmt.Errorf("lease bucket: %w", err)
	}
	return kv, nil
}

// LeaseHolder is the id of whoever holds the lease on key, "" when nobody
// does.
func (b *Bus) LeaseHolder(ctx context.Context, key string) (string, error) {
	kv, err := b.leaseBucket(ctx)
	if err != nil {
		return "", err
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("lease %s: %w", key, err)
	}
	return string(e.Value()), nil
}

// LeaseReader reads leases without writing them.
type LeaseReader struct{ kv jetstream.KeyValue }

// ExistingLeases opens the lease bucket for reading if a controller has
// made it; ok is false when none has. It only looks the bucket up, so a
// service that may not write leases can read them.
func (b *Bus) ExistingLeases(ctx context.Context) (r *LeaseReader, ok bool, err error) {
	kv, err := b.js.KeyValue(ctx, LeaseBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("lease bucket: %w", err)
	}
	return &LeaseReader{kv: kv}, true, nil
}

// Holder is the holder and revision of the lease on key: "" and 0 when
// nobody holds it. A holder that renews it changes the revision.
func (r *LeaseReader) Holder(ctx context.Context, key string) (string, uint64, error) {
	e, err := r.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("lease %s: %w", key, err)
	}
	return string(e.Value()), e.Revision(), nil
}

// leaseBucket is leases, opened once per bus and its copies.
func (b *Bus) leaseBucket(ctx context.Context) (jetstream.KeyValue, error) {
	if b.log == nil {
		return b.leases(ctx)
	}
	b.log.mu.Lock()
	defer b.log.mu.Unlock()
	if b.log.leases == nil {
		kv, err := b.leases(ctx)
		if err != nil {
			return nil, err
		}
		b.log.leases = kv
	}
	return b.log.leases, nil
}

// bucket opens a KV bucket, creating it if it does not exist, and asks
// again while the cluster does not answer (see retryRequest): a bucket
// that did not answer in time is not "missing", to be created anew.
func (b *Bus) bucket(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := b.retryRequest(ctx, "bucket "+cfg.Bucket, func(ctx context.Context) (err error) {
		kv, err = b.js.KeyValue(ctx, cfg.Bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = b.js.CreateKeyValue(ctx, cfg)
			if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				kv, err = b.js.KeyValue(ctx, cfg.Bucket) // another service created it first
			}
		}
		return err
	})
	return kv, err
}

// Lease is one holder's claim on a key.
type Lease struct {
	kv      jetstream.KeyValue
	key, id string
	rev     uint64
	renewed time.Time
	// seenRev is another holder's revision as this one last read it, and
	// seenAt when it first read it (this process's clock only).
	seenRev uint64
	seenAt  time.Time
}

// Lease returns holder's (not yet acquired) lease on key, opening (creating
// if needed) the lease bucket.
func (b *Bus) Lease(ctx context.Context, key, holder string) (*Lease, error) {
	kv, err := b.leases(ctx)
	if err != nil {
		return nil, err
	}
	return newLease(kv, key, holder), nil
}

// newLease returns holder id's (not yet acquired) lease on key.
func newLease(kv jetstream.KeyValue, key, id string) *Lease {
	return &Lease{kv: kv, key: key, id: id}
}

// Held reports whether the lease is held and was renewed within its TTL.
func (l *Lease) Held() bool { return l.rev != 0 && time.Since(l.renewed) < LeaseTTL }

// Acquire takes the lease if nobody holds it, or renews it if this holder
// does; it reports whether the lease is held after the call. A holder
// whose renewal came too late, after the entry expired, takes the lease
// again if nobody else has.
func (l *Lease) Acquire(ctx context.Context) bool {
	if l.rev != 0 && l.renew(ctx) {
		return true
	}
	rev, err := l.kv.Create(ctx, l.key, []byte(l.id))
	if err == nil {
		l.rev, l.renewed = rev, time.Now()
		return true
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return false
	}
	e, err := l.kv.Get(ctx, l.key)
	if err != nil {
		return false
	}
	if string(e.Value()) == l.id {
		l.rev = e.Revision() // ours, from before a reconnect
		return l.renew(ctx)
	}
	return l.takeOver(ctx, e.Revision())
}

// takeOver takes another holder's lease once its revision has not changed
// for LeaseTTL as this process saw it. The server drops an entry LeaseTTL
// after its last renewal, but a cluster's stream leader may expire it
// seconds late (measured: 7 s); this needs no clock but the local one. The
// update is a compare-and-set on the revision seen, so it fails if the
// holder renewed meanwhile, and the holder's next renewal then fails.
func (l *Lease) takeOver(ctx context.Context, rev uint64) bool {
	if rev != l.seenRev {
		l.seenRev, l.seenAt = rev, time.Now()
		return false
	}
	if time.Since(l.seenAt) < LeaseTTL {
		return false
	}
	newRev, err := l.kv.Update(ctx, l.key, []byte(l.id), rev)
	if err != nil {
		return false
	}
	l.rev, l.renewed, l.seenRev = newRev, time.Now(), 0
	return true
}

// renew extends the lease; a conflict means another holder took it.
func (l *Lease) renew(ctx context.Context) bool {
	rev, err := l.kv.Update(ctx, l.key, []byte(l.id), l.rev)
	if err != nil {
		l.rev = 0
		return false
	}
	l.rev, l.renewed = rev, time.Now()
	return true
}

// Release gives the lease up, so a standby takes over at once.
func (l *Lease) Release(ctx context.Context) {
	if l.rev == 0 {
		return
	}
	_ = l.kv.Delete(ctx, l.key, jetstream.LastRevision(l.rev))
	l.rev = 0
}

// Fence makes a publish conditional on the log: the event is stored only
// while the newest message on Subject (a filter: wildcards allowed) is the
// one at sequence Seq, or while there is none if Seq is 0. A writer that
// read the log up to Seq so learns whether another wrote meanwhile.
type Fence struct {
	Subject string
	Seq     uint64
}

// Fenced reports whether a publish failed because the expected last
// sequence no longer holds: another writer published first.
func Fenced(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == 10164)
}
