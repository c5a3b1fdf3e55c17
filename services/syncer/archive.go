package syncer

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/tunejet/tunejet/internal/ckpt"
)

// objectStore is the experiment's Object Store, where runners stage
// checkpoints and artifacts.
func (p *persister) objectStore(ctx context.Context) (ckpt.Objects, error) {
	return p.bus.Checkpoints(ctx, p.exp)
}

// copyArchive streams a staged archive into storage under prefix,
// verifying its digest. Symlinks and folders have no place in a bucket and
// are skipped, and so are the files keep names (paths in the archive):
// storage's own files, which the syncer writes. An empty checkpoint stores
// nothing (its name is in the state).
//
// The bytes go from the Object Store straight into the storage writers,
// hashed once (by nats.go's Get, see ckpt.Walk). A file's writer is closed
// (on a bucket: its last part uploaded) while the next file streams, up to
// parallelCloses at once; copyArchive returns when every one is closed.
func (p *persister) copyArchive(ctx context.Context, object, digest, prefix string, keep map[string]bool) error {
	obs, err := p.objectStore(ctx)
	if err != nil {
		return err
	}
	r, err := ckpt.Open(ctx, obs, object)
	if err != nil {
		return fmt.Errorf("read staged %s: %w", object, err)
	}
	defer func() { _ = r.Close() }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	closes := newCloser(parallelCloses)
	err = ckpt.Walk(r, digest, func(hdr *tar.Header, rel string, body io.Reader) error {
		if hdr.Typeflag != tar.TypeReg || keep[rel] {
			return nil
		}
		if err := closes.failed(); err != nil {
			return err
		}
		bw, err := p.bucket.NewWriter(ctx, prefix+rel, nil)
		if err != nil {
			return err
		}
		if _, err := io.Copy(bw, body); err != nil {
			_ = bw.Close()
			return err
		}
		closes.close(bw)
		return nil
	})
	if err != nil {
		cancel()          // a writer still closing publishes nothing
		_ = closes.wait() // the walk's error is the one that counts
		return err
	}
	return closes.wait()
}

// parallelCloses bounds the storage writers of one archive closing at once.
const parallelCloses = 4

// closer closes writers in the background, a bounded number at once, and
// keeps the first error.
type closer struct {
	slots chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	err   error
}

func newCloser(n int) *closer { return &closer{slots: make(chan struct{}, n)} }

// close closes c in the background, waiting first for a free slot.
func (c *closer) close(wc io.Closer) {
	c.slots <- struct{}{}
	c.wg.Go(func() {
		defer func() { <-c.slots }()
		if err := wc.Close(); err != nil {
			c.mu.Lock()
			if c.err == nil {
				c.err = err
			}
			c.mu.Unlock()
		}
	})
}

// failed is the first error of a close so far.
func (c *closer) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// wait waits for every close and returns the first error.
func (c *closer) wait() error {
	c.wg.Wait()
	return c.failed()
}

// removeStaged deletes staged Object Store copies that storage now holds.
func (p *persister) removeStaged(ctx context.Context, objects []string) {
	if len(objects) == 0 {
		return
	}
	obs, err := p.objectStore(ctx)
	if err != nil {
		return
	}
	for _, o := range objects {
		if err := obs.Delete(ctx, o); err != nil && !errors.Is(err, ckpt.ErrObjectNotFound) {
			p.log.Warn().Err(err).Str("object", o).Msg("remove a staged copy")
		}
	}
}
