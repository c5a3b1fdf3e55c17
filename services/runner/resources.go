package runner

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/session"
)

// eps absorbs the rounding of fractional amounts (three GPU thirds make 1).
const eps = 1e-9

// DetectGPUs is Config.GPUs asking the runner to find its GPUs itself.
const DetectGPUs = -1

// FindGPUs returns the ids of this machine's GPUs: "0".."n-1" for the n
// lines "GPU i: ..." of `nvidia-smi -L` when it is on PATH, else the ids
// in CUDA_VISIBLE_DEVICES when it is set, else none.
func FindGPUs(ctx context.Context) []string {
	if path, err := exec.LookPath("nvidia-smi"); err == nil {
		out, err := exec.CommandContext(ctx, path, "-L").Output()
		if err == nil {
			var ids []string
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "GPU ") {
					ids = append(ids, strconv.Itoa(len(ids)))
				}
			}
			return ids
		}
	}
	return visibleDevices(os.Getenv("CUDA_VISIBLE_DEVICES"))
}

// visibleDevices reads a CUDA_VISIBLE_DEVICES list; "-1" or "" hide every
// device.
func visibleDevices(v string) []string {
	var ids []string
	for _, id := range strings.Split(v, ",") {
		id = strings.TrimSpace(id)
		if id == "" || strings.HasPrefix(id, "-") {
			break // CUDA ignores the devices after an invalid one
		}
		ids = append(ids, id)
	}
	return ids
}

// capacity is what the runner has in total: Config's cpus, gpus, memory
// and custom resources.
func (c *Config) capacity() events.Resources {
	total := events.Resources{events.ResourceCPU: c.CPUs}
	if n := len(c.GPUIDs); n > 0 {
		total[events.ResourceGPU] = float64(n)
	}
	if c.Memory > 0 {
		total[events.ResourceMemory] = c.Memory
	}
	for k, v := range c.Resources {
		total[k] = v
	}
	return total
}

// pool is the runner's capacity: every trial attempt holds its shape of it
// while it runs. GPUs are devices: a whole GPU is a device nobody else
// holds a share of, a fraction a share of one device (best fit, so
// fractions pack onto as few devices as they can, as Ray packs them).
type pool struct {
	mu      sync.Mutex
	total   events.Resources
	free    events.Resources // every resource but gpu
	devices []string
	gpuFree []float64
	wake    chan struct{} // closed and replaced when capacity is released
}

func newPool(total events.Resources, devices []string) *pool {
	p := &pool{total: total, free: events.Resources{}, devices: devices, gpuFree: make([]float64, len(devices)), wake: make(chan struct{})}
	for k, v := range total {
		if k != events.ResourceGPU {
			p.free[k] = v
		}
	}
	for i := range p.gpuFree {
		p.gpuFree[i] = 1
	}
	return p
}

// grant is what one holder holds: a shape, with its GPU shares.
type grant struct {
	shape events.Resources
	gpus  []gpuShare
}

type gpuShare struct {
	dev    int
	amount float64
}

// fitsTotal reports whether shape fits the runner at all, when idle; if
// not, short names the resource it lacks.
func (p *pool) fitsTotal(shape events.Resources) (short string) {
	return shape.Short(p.total)
}

// take takes shape if it fits the free capacity now.
func (p *pool) take(shape events.Resources) (*grant, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takeLocked(shape)
}

func (p *pool) takeLocked(shape events.Resources) (*grant, bool) {
	for k, v := range shape {
		if k != events.ResourceGPU && v > p.free[k]+eps {
			return nil, false
		}
	}
	gpus, ok := p.pickGPUs(shape[events.ResourceGPU])
	if !ok {
		return nil, false
	}
	for k, v := range shape {
		if k != events.ResourceGPU {
			p.free[k] -= v
		}
	}
	for _, s := range gpus {
		p.gpuFree[s.dev] -= s.amount
	}
	return &grant{shape: shape, gpus: gpus}, true
}

// pickGPUs chooses the devices for an amount of GPU: whole devices, the
// lowest free ones, for 1 and more; for a fraction, the device with the
// least free share that still holds it.
func (p *pool) pickGPUs(amount float64) ([]gpuShare, bool) {
	if amount <= eps {
		return nil, true
	}
	if amount >= 1-eps {
		n := int(math.Round(amount))
		var out []gpuShare
		for i, f := range p.gpuFree {
			if len(out) < n && f >= 1-eps {
				out = append(out, gpuShare{dev: i, amount: 1})
			}
		}
		return out, len(out) == n
	}
	best := -1
	for i, f := range p.gpuFree {
		if f >= amount-eps && (best < 0 || f < p.gpuFree[best]) {
			best = i
		}
	}
	if best < 0 {
		return nil, false
	}
	return []gpuShare{{dev: best, amount: amount}}, true
}

// release gives g back.
func (p *pool) release(g *grant) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releaseLocked(g)
	close(p.wake)
	p.wake = make(chan struct{})
}

func (p *pool) releaseLocked(g *grant) {
	for k, v := range g.shape {
		if k != events.ResourceGPU {
			p.free[k] += v
		}
	}
	for _, s := range g.gpus {
		p.gpuFree[s.dev] = min(p.gpuFree[s.dev]+s.amount, 1)
	}
}

// swap gives g back and takes shape instead, at once: false, holding g
// still, if shape does not fit then.
func (p *pool) swap(g *grant, shape events.Resources) (*grant, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releaseLocked(g)
	if n, ok := p.takeLocked(shape); ok {
		close(p.wake) // what g held beyond shape is free
		p.wake = make(chan struct{})
		return n, true
	}
	again, _ := p.takeLocked(g.shape)
	return again, false
}

// changed is closed the next time capacity is released.
func (p *pool) changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wake
}

// ids are the device ids of g's GPUs.
func (p *pool) ids(g *grant) []string {
	out := make([]string, len(g.gpus))
	for i, s := range g.gpus {
		out[i] = p.devices[s.dev]
	}
	return out
}

// hold is what one work message holds of the pool (bus.Hold): first the
// largest shape its experiment may send, then, once it is read, its own.
type hold struct {
	p    *pool
	mu   sync.Mutex
	g    *grant
	done bool
	used bool // a message came for it
}

// take marks the hold as a message's.
func (h *hold) take() {
	h.mu.Lock()
	h.used = true
	h.mu.Unlock()
}

// missed reports whether the hold was released with no message taken:
// the fetch it was for found none. (Consume releases such a hold before
// it asks for the next.)
func (h *hold) missed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done && !h.used
}

// Release gives the hold back, once.
func (h *hold) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done && h.g != nil {
		h.p.release(h.g)
	}
	h.done = true
}

// narrow makes the hold shape instead of what it holds, if shape fits in
// it (or in the free capacity) now.
func (h *hold) narrow(shape events.Resources) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.p.swap(h.g, shape)
	h.g = g
	return ok
}

// resources is what the hold holds, for the trainable.
func (h *hold) resources() session.Resources {
	h.mu.Lock()
	defer h.mu.Unlock()
	amounts := make(map[string]float64, len(h.g.shape))
	for k, v := range h.g.shape {
		amounts[k] = v
	}
	return session.Resources{Amounts: amounts, GPUIDs: h.p.ids(h.g)}
}

// resourceEnv is the environment that tells a command trainable what it
// holds: CUDA_VISIBLE_DEVICES (empty without a GPU, so it sees none),
// TUNEJET_GPU_IDS and TUNEJET_RESOURCES (a JSON object of the amounts).
func resourceEnv(r session.Resources) []string {
	ids := strings.Join(r.GPUIDs, ",")
	amounts, err := json.Marshal(r.Amounts) // keys sorted; numbers cannot fail
	if err != nil || r.Amounts == nil {
		amounts = []byte("{}")
	}
	return []string{
		"CUDA_VISIBLE_DEVICES=" + ids,
		"TUNEJET_GPU_IDS=" + ids,
		"TUNEJET_RESOURCES=" + string(amounts),
	}
}

// numCPU is runtime.NumCPU, as a default.
func numCPU() float64 { return float64(runtime.NumCPU()) }

// resourcesOf is the session's view of amounts and GPU ids.
func resourcesOf(amounts events.Resources, gpuIDs ...string) session.Resources {
	return session.Resources{Amounts: maps.Clone(amounts), GPUIDs: gpuIDs}
}
