package events_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
)

func TestParseMemory(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		err  string
	}{
		{in: "1000", want: 1000},
		{in: "2G", want: 2e9},
		{in: "512Mi", want: 512 << 20},
		{in: "1.5Gi", want: 1.5 * (1 << 30)},
		{in: "4 Ki", want: 4096},
		{in: "2GB", err: "unknown unit"},
		{in: "2X", err: "unknown unit"},
		{in: "G", err: "not a number"},
	} {
		got, err := events.ParseMemory(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseMemory(%q) = %v, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseMemory(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestTrainableShape(t *testing.T) {
	tr := events.Trainable{Name: "f", Resources: map[string]events.ResourceAmount{
		"gpu": {Config: "model.gpus"}, "memory": {Config: "mem"}, "disk": {Value: 2},
	}}
	for _, c := range []struct {
		name   string
		config map[string]any
		want   events.Resources
		err    string
	}{
		{"whole", map[string]any{"model": map[string]any{"gpus": 2.0}, "mem": "1Gi"},
			events.Resources{"cpu": 1, "gpu": 2, "memory": 1 << 30, "disk": 2}, ""},
		{"fraction", map[string]any{"model": map[string]any{"gpus": 0.5}, "mem": 100.0},
			events.Resources{"cpu": 1, "gpu": 0.5, "memory": 100, "disk": 2}, ""},
		{"none", map[string]any{"model": map[string]any{"gpus": 0}, "mem": 0},
			events.Resources{"cpu": 1, "disk": 2}, ""},
		{"missing key", map[string]any{"mem": 1.0}, nil, `no key "model.gpus"`},
		{"fractional above 1", map[string]any{"model": map[string]any{"gpus": 1.5}, "mem": 1.0}, nil, "whole number"},
		{"negative", map[string]any{"model": map[string]any{"gpus": -1.0}, "mem": 1.0}, nil, ">= 0"},
		{"not a number", map[string]any{"model": map[string]any{"gpus": "two"}, "mem": 1.0}, nil, "must be a number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := tr.Shape(c.config)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Shape = %v, %v; want an error with %q", got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Fatalf("Shape (-want +got):\n%s", d)
			}
		})
	}
	if got, want := tr.DefaultShapeOf(), (events.Resources{"cpu": 1, "disk": 2}); !cmp.Equal(got, want) {
		t.Errorf("DefaultShapeOf = %v, want %v", got, want)
	}
}

func TestResourcesFit(t *testing.T) {
	total := events.Resources{"cpu": 4, "gpu": 1}
	if s := (events.Resources{"cpu": 2, "gpu": 1}).Short(total); s != "" {
		t.Errorf("a fitting shape is short of %q", s)
	}
	if s := (events.Resources{"cpu": 1, "gpu": 2}).Short(total); s != "gpu" {
		t.Errorf("Short = %q, want gpu", s)
	}
	if s := (events.Resources{"cpu": 1, "tpu": 1}).Short(total); s != "tpu" {
		t.Errorf("Short = %q, want tpu (a custom resource the runner lacks)", s)
	}
	if got := (events.Resources{"cpu": 1, "gpu": 0.5, "memory": 2 << 30}).String(); got != "cpu=1 gpu=0.5 memory=2Gi" {
		t.Errorf("String = %q", got)
	}
}

func TestResourceAmountJSON(t *testing.T) {
	var got map[string]events.ResourceAmount
	if err := json.Unmarshal([]byte(`{"cpu": 2, "gpu": {"config": "gpus"}}`), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]events.ResourceAmount{"cpu": {Value: 2}, "gpu": {Config: "gpus"}}
	if !cmp.Equal(got, want) {
		t.Fatalf("decoded %v, want %v", got, want)
	}
	b, err := json.Marshal(got)
	if err != nil || string(b) != `{"cpu":2,"gpu":{"config":"gpus"}}` {
		t.Fatalf("encoded %s, %v", b, err)
	}
	if err := json.Unmarshal([]byte(`{"gpu": {"config": ""}}`), &got); err == nil {
		t.Fatal("an empty config key decoded")
	}
	// Work from before resources existed needs one CPU.
	if s := (&events.TrialScheduled{}).Shape(); !cmp.Equal(s, events.Resources{"cpu": 1}) {
		t.Fatalf("Shape of work without resources = %v", s)
	}
}
