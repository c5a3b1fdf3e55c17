package session

import "context"

// Resources is what a trial attempt holds on its runner: the amounts it
// asked for (cpu, gpu, memory in bytes, custom resources by name) and the
// GPU devices it was given.
type Resources struct {
	Amounts map[string]float64
	// GPUIDs are the device ids of the GPUs the attempt may use: one per
	// whole GPU, or the one device a fractional GPU shares.
	GPUIDs []string
}

type resourcesKey struct{}

// WithResources returns ctx carrying what the attempt holds; the runner
// sets it on the context the trainable runs in.
func WithResources(ctx context.Context, r Resources) context.Context {
	return context.WithValue(ctx, resourcesKey{}, r)
}

// ResourcesFrom returns what the attempt running in ctx holds; ok is
// false outside a runner's attempt.
func ResourcesFrom(ctx context.Context) (r Resources, ok bool) {
	r, ok = ctx.Value(resourcesKey{}).(Resources)
	return r, ok
}
