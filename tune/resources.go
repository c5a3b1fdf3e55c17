package tune

import (
	"context"
	"fmt"
	"maps"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/session"
)

// Resources are amounts of resources by name: "cpu", "gpu", "memory"
// (bytes) and custom resources.
type Resources = events.Resources

// ResourceAmount is one amount of a trial's resources: Amount(v), or
// FromConfig(key) to read it from each trial's config.
type ResourceAmount = events.ResourceAmount

// Amount is a fixed amount.
func Amount(v float64) ResourceAmount { return ResourceAmount{Value: v} }

// FromConfig is the amount at a dotted key of each trial's config, as
// Ray's tune.with_resources(trainable, lambda config: ...) computes it:
// one experiment can mix shapes (a grid over gpus: [1, 0.5, 0]).
func FromConfig(key string) ResourceAmount { return ResourceAmount{Config: key} }

// WithResources sets what each trial needs (Ray's tune.with_resources and
// resources_per_trial; the experiment file's trainable.resources): "cpu"
// (default 1), "gpu" (a fraction below 1 shares one device; above 1, a
// whole number), "memory" in bytes, and custom resources by name. A
// runner runs a trial only while it holds all of it.
func WithResources(r map[string]ResourceAmount) Option {
	return func(t *Tuner) error {
		for name, a := range r {
			if a.Config == "" {
				if err := events.CheckResource(name, a.Value); err != nil {
					return fmt.Errorf("%w: resources: %w", ErrInvalidConfig, err)
				}
			}
		}
		t.spec.Trainable.Resources = maps.Clone(r)
		return nil
	}
}

// RunnerCapacity is what an embedded runner has. Zero values take the
// defaults: CPUs the number of CPUs, no GPUs (runner.DetectGPUs, -1,
// finds them with nvidia-smi or CUDA_VISIBLE_DEVICES), no memory, no
// custom resources.
type RunnerCapacity struct {
	CPUs float64
	// GPUs is the number of GPUs, numbered 0..GPUs-1 unless GPUIDs names
	// them; -1 detects them.
	GPUs   int
	GPUIDs []string
	// Memory is in bytes.
	Memory float64
	// Custom are custom resources by name.
	Custom map[string]float64
}

// WithRunnerCapacity sets the embedded runner's capacity. It replaces
// WithRunnerSlots(n), which is CPUs n.
func WithRunnerCapacity(c RunnerCapacity) Option {
	return func(t *Tuner) error {
		if c.CPUs < 0 || c.Memory < 0 || c.GPUs < -1 {
			return fmt.Errorf("%w: runner capacity must not be negative: %+v", ErrInvalidConfig, c)
		}
		for name, v := range c.Custom {
			if err := events.CheckResource(name, v); err != nil {
				return fmt.Errorf("%w: runner capacity: %w", ErrInvalidConfig, err)
			}
		}
		t.capacity = c
		return nil
	}
}

// TrialResources is what the running trial holds on its runner.
type TrialResources struct {
	// Amounts are its resources: cpu, gpu, memory (bytes), custom.
	Amounts Resources
	// GPUIDs are the devices it may use, as CUDA_VISIBLE_DEVICES names
	// them (a command trainable gets them in that variable).
	GPUIDs []string
}

// GetResources returns what the running trial holds: its resources and
// its GPU ids (Ray's get_context().get_resources() and ray.get_gpu_ids()).
func GetResources(ctx context.Context) (TrialResources, error) {
	if _, err := session.From(ctx); err != nil {
		return TrialResources{}, err
	}
	r, ok := session.ResourcesFrom(ctx)
	if !ok {
		return TrialResources{Amounts: events.DefaultShape()}, nil
	}
	return TrialResources{Amounts: maps.Clone(Resources(r.Amounts)), GPUIDs: append([]string(nil), r.GPUIDs...)}, nil
}
