package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/services/runner"
	"github.com/tunejet/tunejet/tune"
)

// capacityFlags are a runner's --cpus, --gpus, --gpu-ids, --memory,
// --resources and the deprecated --slots.
type capacityFlags struct {
	cpus      float64
	slots     int
	gpus      int
	gpuIDs    []string
	memory    string
	resources []string
}

func (f *capacityFlags) add(fs *pflag.FlagSet) {
	fs.IntVar(&f.slots, "slots", 0, "deprecated: a shorthand for --cpus N")
	f.addResources(fs, "the runner")
}

// addResources adds every flag but --slots; who names the runner in their
// help ("the runner", "the embedded runner").
func (f *capacityFlags) addResources(fs *pflag.FlagSet, who string) {
	fs.Float64Var(&f.cpus, "cpus", 0, "CPUs "+who+"'s trials may hold at once; a trial holds its trainable.resources cpu, default 1 (default: number of CPUs)")
	fs.IntVar(&f.gpus, "gpus", runner.DetectGPUs, "GPUs "+who+" has; -1 finds them: those nvidia-smi -L lists, else those of CUDA_VISIBLE_DEVICES, else none")
	fs.StringSliceVar(&f.gpuIDs, "gpu-ids", nil, "device ids of "+who+"'s GPUs, as CUDA_VISIBLE_DEVICES names them (default 0..N-1)")
	fs.StringVar(&f.memory, "memory", "", "memory "+who+"'s trials may hold at once, in bytes or with K, M, G, T, Ki, Mi, Gi, Ti (default: none; trials asking for memory do not fit)")
	fs.StringArrayVar(&f.resources, "resources", nil, "a custom resource "+who+" has, name=amount (repeatable)")
}

// embedded is the embedded runner's capacity the flags say, with slots
// (the embedded stack's --slots) as its CPUs unless --cpus is given.
func (f *capacityFlags) embedded(slots int) (tune.RunnerCapacity, error) {
	f.slots = slots
	var c runner.Config
	if err := f.config(&c); err != nil {
		return tune.RunnerCapacity{}, err
	}
	cpus := c.CPUs
	if cpus == 0 {
		cpus = float64(c.Slots)
	}
	return tune.RunnerCapacity{CPUs: cpus, GPUs: c.GPUs, GPUIDs: c.GPUIDs, Memory: c.Memory, Custom: c.Resources}, nil
}

// config fills in a runner's capacity.
func (f *capacityFlags) config(c *runner.Config) error {
	if f.cpus < 0 || f.slots < 0 {
		return fmt.Errorf("--cpus and --slots must be >= 0")
	}
	c.CPUs, c.Slots = f.cpus, f.slots
	switch {
	case len(f.gpuIDs) > 0 && f.gpus >= 0 && f.gpus != len(f.gpuIDs):
		return fmt.Errorf("--gpus %d does not match the %d ids of --gpu-ids", f.gpus, len(f.gpuIDs))
	case f.gpus < runner.DetectGPUs:
		return fmt.Errorf("--gpus must be >= 0, got %d", f.gpus)
	}
	c.GPUs, c.GPUIDs = f.gpus, f.gpuIDs
	if f.memory != "" {
		m, err := events.ParseMemory(f.memory)
		if err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
		if err := events.CheckResource(events.ResourceMemory, m); err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
		c.Memory = m
	}
	for _, r := range f.resources {
		name, amount, ok := strings.Cut(r, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return fmt.Errorf("--resources %q: want name=amount", r)
		}
		if flag, ok := map[string]string{events.ResourceCPU: "--cpus", events.ResourceGPU: "--gpus", events.ResourceMemory: "--memory"}[name]; ok {
			return fmt.Errorf("--resources %q: give %s with %s", r, name, flag)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(amount), 64)
		if err == nil {
			err = events.CheckResource(name, v)
		}
		if err != nil {
			return fmt.Errorf("--resources %q: %w", r, err)
		}
		if c.Resources == nil {
			c.Resources = map[string]float64{}
		}
		c.Resources[name] = v
	}
	return nil
}
