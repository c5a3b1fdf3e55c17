package tuning

import (
	"hash/fnv"
	"math/rand/v2"
)

// Rand is the generator of one decision: seeded from the experiment's
// seed, the decision's kind ("add", "result", "suggest") and its ordinal
// alone, so there is no generator state to save, and an interrupted and an
// uninterrupted run draw the same numbers for the same decision.
func Rand(seed int64, kind string, ordinal uint64) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(kind))
	return rand.New(rand.NewPCG(uint64(seed)^h.Sum64(), ordinal))
}
