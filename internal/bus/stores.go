package bus

import (
	"context"

	"github.com/tunejet/tunejet/internal/ckpt"
)

// Checkpoints opens (creating if needed, with the bus's replicas)
// experiment exp's checkpoint bucket. The bus is a ckpt.Opener: the
// restored-state loader (restorestate.Loader) reads through it.
//
// It is the one verb of the bus that hands out a JetStream handle (an
// Object Store, as ckpt.Objects): checkpoints are that Object Store's
// objects, and internal/ckpt, the checkpoint transport, reads and writes
// them through the handle (ckpt.Open, Info, Stage, Fetch, Restage). The
// bus opens it because it holds the connection and the replica count.
func (b *Bus) Checkpoints(ctx context.Context, exp string) (ckpt.Objects, error) {
	return ckpt.StoreReplicated(ctx, b.js, exp, b.replicas())
}
