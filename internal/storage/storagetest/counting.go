package storagetest

import (
	"context"
	"maps"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"

	"github.com/tunejet/tunejet/internal/storage"
)

// Counter counts the writes that completed (the writer closed without
// error) through a bucket from Counting, per key.
type Counter struct {
	mu     sync.Mutex
	writes map[string]int
}

// Counting returns a bucket that forwards to b and counts completed writes.
// b stays open and owned by the caller.
func Counting(b *blob.Bucket) (*blob.Bucket, *Counter) {
	c := &Counter{writes: map[string]int{}}
	return blob.NewBucket(&countingDriver{Bucket: storage.DriverOf(b), c: c}), c
}

// Writes returns how many writes of key completed.
func (c *Counter) Writes(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes[key]
}

// Total returns how many writes completed, over all keys.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.writes {
		n += v
	}
	return n
}

// All returns a copy of the per-key counts.
func (c *Counter) All() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.writes)
}

type countingDriver struct {
	driver.Bucket
	c *Counter
}

func (d *countingDriver) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	w, err := d.Bucket.NewTypedWriter(ctx, key, contentType, opts)
	if err != nil {
		return nil, err
	}
	return &countingWriter{Writer: w, key: key, c: d.c}, nil
}

type countingWriter struct {
	driver.Writer
	key string
	c   *Counter
}

func (w *countingWriter) Close() error {
	if err := w.Writer.Close(); err != nil {
		return err
	}
	w.c.mu.Lock()
	w.c.writes[w.key]++
	w.c.mu.Unlock()
	return nil
}
