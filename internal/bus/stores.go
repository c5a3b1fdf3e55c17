package bus

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/internal/ckpt"
)

// Checkpoints opens (creating if needed, with the bus's replicas)
// experiment exp's checkpoint bucket. The bus is a ckpt.Opener: the
// restored-state loader (restorestate.Loader) reads through it.
func (b *Bus) Checkpoints(ctx context.Context, exp string) (jetstream.ObjectStore, error) {
	return ckpt.StoreReplicated(ctx, b.js, exp, b.replicas())
}
