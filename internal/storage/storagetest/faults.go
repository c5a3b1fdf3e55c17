package storagetest

import (
	"context"
	"errors"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"

	"github.com/tunejet/tunejet/internal/storage"
)

// Faults sets the faults a bucket from Faulty injects. Its zero state
// injects none; every method is safe for concurrent use.
type Faults struct {
	mu          sync.Mutex
	hangWrites  bool
	hangDeletes bool
	failWrites  int
	writeErr    error
	failDeletes int
	deleteErr   error
	writes      int
	hanging     int
	released    []error
}

// Faulty returns a bucket that forwards to b except where f says to fail
// or hang. b stays open and owned by the caller.
func Faulty(b *blob.Bucket) (*blob.Bucket, *Faults) {
	f := &Faults{}
	return blob.NewBucket(&faultyDriver{Bucket: storage.DriverOf(b), f: f}), f
}

// HangWrites makes every write (from now on, while on) block until its
// context ends, then fail with the context's error.
func (f *Faults) HangWrites(on bool) { f.set(func() { f.hangWrites = on }) }

// HangDeletes makes every delete block until its context ends.
func (f *Faults) HangDeletes(on bool) { f.set(func() { f.hangDeletes = on }) }

// FailWrites makes the next n writes fail with err; later ones succeed.
func (f *Faults) FailWrites(n int, err error) { f.set(func() { f.failWrites, f.writeErr = n, err }) }

// FailDeletes makes the next n deletes fail with err; later ones succeed.
func (f *Faults) FailDeletes(n int, err error) {
	f.set(func() { f.failDeletes, f.deleteErr = n, err })
}

// Writes returns how many writes were started, failed or not.
func (f *Faults) Writes() int { return get(f, func() int { return f.writes }) }

// Hanging returns how many writes or deletes are hanging now.
func (f *Faults) Hanging() int { return get(f, func() int { return f.hanging }) }

// Released returns, for every hung call whose context ended, the cause of
// the end (context.Cause), in order.
func (f *Faults) Released() []error {
	return get(f, func() []error { return append([]error(nil), f.released...) })
}

func (f *Faults) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func get[T any](f *Faults, fn func() T) T {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fn()
}

// hang blocks until ctx ends and records why.
func (f *Faults) hang(ctx context.Context) error {
	f.set(func() { f.hanging++ })
	<-ctx.Done()
	f.set(func() {
		f.hanging--
		f.released = append(f.released, context.Cause(ctx))
	})
	return ctx.Err()
}

// take decides the fault for one call: hang, fail with an error, or none.
func take(hang bool, n *int, err error) (bool, error) {
	if hang {
		return true, nil
	}
	if *n > 0 {
		*n--
		if err == nil {
			err = errInjected
		}
		return false, err
	}
	return false, nil
}

var errInjected = errors.New("storagetest: injected fault")

type faultyDriver struct {
	driver.Bucket
	f *Faults
}

func (d *faultyDriver) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	var hang bool
	var err error
	d.f.set(func() {
		d.f.writes++
		hang, err = take(d.f.hangWrites, &d.f.failWrites, d.f.writeErr)
	})
	if hang {
		return nil, d.f.hang(ctx)
	}
	if err != nil {
		return nil, err
	}
	return d.Bucket.NewTypedWriter(ctx, key, contentType, opts)
}

func (d *faultyDriver) Delete(ctx context.Context, key string, opts *driver.DeleteOptions) error {
	var hang bool
	var err error
	d.f.set(func() { hang, err = take(d.f.hangDeletes, &d.f.failDeletes, d.f.deleteErr) })
	if hang {
		return d.f.hang(ctx)
	}
	if err != nil {
		return err
	}
	return d.Bucket.Delete(ctx, key, opts)
}
