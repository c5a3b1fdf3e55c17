package spec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
)

// res is an experiment file whose trainable asks for resources (lines 4
// on), with param_space after it.
func res(resources, space string) string {
	return "name: exp\ntrainable:\n  name: fn\n  resources:\n" + resources + "param_space:\n" + space
}

func TestParseResourcesErrors(t *testing.T) {
	for _, c := range []struct {
		name, file, want string
	}{
		{"negative", res("    cpu: -1\n", "  a: 1\n"),
			"exp.yaml:5: trainable.resources.cpu: cpu must be >= 0, got -1"},
		{"fractional GPU above 1", res("    gpu: 1.5\n", "  a: 1\n"),
			"exp.yaml:5: trainable.resources.gpu: gpu above 1 must be a whole number of GPUs (fractions below 1 share one GPU), got 1.5"},
		{"unknown memory unit", res("    memory: 2GB\n", "  a: 1\n"),
			`exp.yaml:5: trainable.resources.memory: unknown unit "GB" in memory "2GB": use bytes or K, M, G, T, Ki, Mi, Gi, Ti`},
		{"string for a GPU", res("    gpu: one\n", "  a: 1\n"),
			`exp.yaml:5: trainable.resources.gpu: expected a finite number, got string "one"`},
		{"not a mapping", "name: exp\ntrainable:\n  name: fn\n  resources: 4\n",
			"exp.yaml:4: trainable.resources: expected a mapping such as {cpu: 1, gpu: 0.5, memory: 2G}, got integer 4"},
		{"missing config key", res("    gpu: {config: gpus}\n", "  lr: 0.1\n"),
			`exp.yaml:5: trainable.resources.gpu.config: param_space has no key "gpus"`},
		{"bad grid value", res("    gpu: {config: model.gpus}\n", "  model:\n    gpus: {grid_search: [1, 0.5, 2.5]}\n"),
			"exp.yaml:5: trainable.resources.gpu.config: param_space.model.gpus: gpu above 1 must be a whole number of GPUs (fractions below 1 share one GPU), got 2.5"},
		{"config reference without a key", res("    gpu: {conf: gpus}\n", "  a: 1\n"),
			"exp.yaml:5: trainable.resources.gpu.conf: unknown key; valid keys: config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("exp.yaml", []byte(c.file))
			if err == nil {
				t.Fatalf("no error; want %s", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, c.want)
			}
		})
	}
}

func TestParseResources(t *testing.T) {
	file := res("    cpu: 2\n    gpu: {config: gpus}\n    memory: 512Mi\n    accel: 1\n", "  gpus: {grid_search: [1, 0.5, 0]}\n")
	s, err := Parse("exp.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]events.ResourceAmount{
		"cpu": {Value: 2}, "gpu": {Config: "gpus"}, "memory": {Value: 512 << 20}, "accel": {Value: 1},
	}
	if d := cmp.Diff(want, s.Trainable.Resources); d != "" {
		t.Fatalf("resources (-want +got):\n%s", d)
	}
	if s.Trainable.Name != "fn" || len(s.Trainable.Command) != 0 {
		t.Fatalf("trainable = %+v, want the Go trainable fn", s.Trainable)
	}
	shape, err := s.Trainable.Shape(map[string]any{"gpus": 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(events.Resources{"cpu": 2, "gpu": 0.5, "memory": 512 << 20, "accel": 1}, shape); d != "" {
		t.Fatalf("shape (-want +got):\n%s", d)
	}
	if err := Validate(&events.ExperimentSpec{Name: "exp", Trainable: events.Trainable{Name: "fn",
		Resources: map[string]events.ResourceAmount{"gpu": {Value: -1}}}}); err == nil || !strings.Contains(err.Error(), "gpu must be >= 0") {
		t.Fatalf("Validate = %v, want the negative gpu", err)
	}
}
