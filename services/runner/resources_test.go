package runner

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/session"
)

func TestPool(t *testing.T) {
	type step struct {
		take    events.Resources
		ok      bool
		devices []string // the GPU ids it gets
		release int      // instead of taking: release the grant of step release-1
	}
	total := events.Resources{"cpu": 4, "gpu": 2, "memory": 1 << 30, "disk": 1}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"fit and not", []step{
			{take: events.Resources{"cpu": 3}, ok: true},
			{take: events.Resources{"cpu": 2}, ok: false},
			{take: events.Resources{"cpu": 1, "memory": 1 << 30, "disk": 1}, ok: true},
			{take: events.Resources{"cpu": 0, "disk": 1}, ok: false},
		}},
		{"a custom resource the runner lacks", []step{
			{take: events.Resources{"cpu": 1, "tpu": 1}, ok: false},
		}},
		{"fractions pack onto one device", []step{
			{take: events.Resources{"gpu": 0.5}, ok: true, devices: []string{"a"}},
			{take: events.Resources{"gpu": 0.25}, ok: true, devices: []string{"a"}},
			{take: events.Resources{"gpu": 0.25}, ok: true, devices: []string{"a"}},
			{take: events.Resources{"gpu": 0.5}, ok: true, devices: []string{"b"}},
			{take: events.Resources{"gpu": 0.6}, ok: false},
			{take: events.Resources{"gpu": 0.5}, ok: true, devices: []string{"b"}},
			{take: events.Resources{"gpu": 0.1}, ok: false},
		}},
		{"best fit keeps a whole device free", []step{
			{take: events.Resources{"gpu": 0.7}, ok: true, devices: []string{"a"}},
			{take: events.Resources{"gpu": 0.3}, ok: true, devices: []string{"a"}},
			{take: events.Resources{"gpu": 1}, ok: true, devices: []string{"b"}},
		}},
		{"whole GPUs get distinct free devices", []step{
			{take: events.Resources{"gpu": 1}, ok: true, devices: []string{"a"}},
			{take: events.Resources{"gpu": 1}, ok: true, devices: []string{"b"}},
			{take: events.Resources{"gpu": 1}, ok: false},
		}},
		{"a shared device is not whole", []step{
			{take: events.Resources{"gpu": 0.5}, ok: true, devices: []string{"a"}},
			{take: events.Resources{"gpu": 2}, ok: false},
			{take: events.Resources{"gpu": 1}, ok: true, devices: []string{"b"}},
		}},
		{"release", []step{
			{take: events.Resources{"cpu": 4, "gpu": 2}, ok: true, devices: []string{"a", "b"}},
			{take: events.Resources{"cpu": 1}, ok: false},
			{release: 1},
			{take: events.Resources{"cpu": 2, "gpu": 0.5}, ok: true, devices: []string{"a"}},
			{take: events.Resources{"cpu": 2, "gpu": 1}, ok: true, devices: []string{"b"}},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPool(total, []string{"a", "b"})
			grants := make([]*grant, len(c.steps))
			for i, s := range c.steps {
				if s.release > 0 {
					p.release(grants[s.release-1])
					continue
				}
				g, ok := p.take(s.take)
				if ok != s.ok {
					t.Fatalf("step %d: take %v = %v, want %v", i+1, s.take, ok, s.ok)
				}
				if !ok {
					continue
				}
				grants[i] = g
				if ids := p.ids(g); !slices.Equal(ids, s.devices) && (len(ids) > 0 || len(s.devices) > 0) {
					t.Fatalf("step %d: take %v got GPUs %v, want %v", i+1, s.take, ids, s.devices)
				}
				for d, f := range p.gpuFree {
					if f < -eps {
						t.Fatalf("step %d: device %d booked beyond 1 (free %v)", i+1, d, f)
					}
				}
			}
		})
	}
}

func TestPoolSwap(t *testing.T) {
	p := newPool(events.Resources{"cpu": 2, "gpu": 1}, []string{"0"})
	big, ok := p.take(events.Resources{"cpu": 2, "gpu": 1})
	if !ok {
		t.Fatal("the whole runner does not fit an idle runner")
	}
	small, ok := p.swap(big, events.Resources{"cpu": 1, "gpu": 0.5})
	if !ok || !slices.Equal(p.ids(small), []string{"0"}) {
		t.Fatalf("narrowing to a smaller shape: %v, GPUs %v", ok, p.ids(small))
	}
	other, ok := p.take(events.Resources{"cpu": 1, "gpu": 0.5})
	if !ok {
		t.Fatal("what the narrowed hold gave back is not free")
	}
	kept, ok := p.swap(small, events.Resources{"cpu": 2})
	if ok {
		t.Fatal("grew into capacity another holds")
	}
	if !kept.shape.FitsIn(events.Resources{"cpu": 1, "gpu": 0.5}) || kept.shape["gpu"] != 0.5 {
		t.Fatalf("a failed swap holds %v, want the shape it held", kept.shape)
	}
	p.release(other)
	p.release(kept)
	if _, ok := p.take(events.Resources{"cpu": 2, "gpu": 1}); !ok {
		t.Fatal("released capacity is not free")
	}
}

func TestVisibleDevices(t *testing.T) {
	for in, want := range map[string][]string{
		"": nil, "0": {"0"}, "2,3": {"2", "3"}, "-1": nil, "0,-1,2": {"0"}, "GPU-a1b2,GPU-c3": {"GPU-a1b2", "GPU-c3"},
	} {
		if got := visibleDevices(in); !slices.Equal(got, want) {
			t.Errorf("visibleDevices(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestResourceEnv(t *testing.T) {
	got := resourceEnv(resourcesOf(events.Resources{"cpu": 1, "gpu": 0.5}, "3"))
	want := []string{"CUDA_VISIBLE_DEVICES=3", "TUNEJET_GPU_IDS=3", `TUNEJET_RESOURCES={"cpu":1,"gpu":0.5}`}
	if !slices.Equal(got, want) {
		t.Fatalf("env %q, want %q", got, want)
	}
	got = resourceEnv(resourcesOf(events.Resources{"cpu": 2}))
	if got[0] != "CUDA_VISIBLE_DEVICES=" {
		t.Fatalf("a trial without a GPU gets %q, want an empty CUDA_VISIBLE_DEVICES so it sees none", got[0])
	}
}

// TestCommandSeesItsGPUs: a command trainable gets the GPUs it holds in
// CUDA_VISIBLE_DEVICES (overriding the runner's own), TUNEJET_GPU_IDS and
// TUNEJET_RESOURCES; one without a GPU gets an empty CUDA_VISIBLE_DEVICES.
func TestCommandSeesItsGPUs(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
	script := `printf '%s|%s|%s' "$CUDA_VISIBLE_DEVICES" "$TUNEJET_GPU_IDS" "$TUNEJET_RESOURCES" > env.txt`
	for _, c := range []struct {
		held events.Resources
		ids  []string
		want string
	}{
		{events.Resources{"cpu": 1, "gpu": 2}, []string{"1", "3"}, `1,3|1,3|{"cpu":1,"gpu":2}`},
		{events.Resources{"cpu": 1, "gpu": 0.5}, []string{"2"}, `2|2|{"cpu":1,"gpu":0.5}`},
		{events.Resources{"cpu": 2, "memory": 1 << 30}, nil, `||{"cpu":2,"memory":1073741824}`},
	} {
		r := newRecorder(t, "env")
		r.ctx = session.WithResources(r.ctx, resourcesOf(c.held, c.ids...))
		e := &commandExecutor{Command: []string{"/bin/sh", "-c", script}, Sockets: t.TempDir(), Grace: testGrace, Log: zerolog.Nop()}
		if err := r.run(t, e); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(r.info.TrialDir, "env.txt"))
		if err != nil || string(b) != c.want {
			t.Errorf("holding %v on %v the command saw %q (%v); want %q", c.held, c.ids, b, err, c.want)
		}
	}
}
