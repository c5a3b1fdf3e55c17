package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/session"
	"github.com/tunejet/tunejet/services/controller"
	"github.com/tunejet/tunejet/services/runner"
	"github.com/tunejet/tunejet/tune"
)

func TestRunnerCapacityFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
		want runner.Config
		err  string
	}{
		{"defaults", nil, runner.Config{GPUs: runner.DetectGPUs}, ""},
		{"slots stay a shorthand for cpus", []string{"--slots", "3"}, runner.Config{Slots: 3, GPUs: runner.DetectGPUs}, ""},
		{"everything", []string{"--cpus", "4.5", "--gpus", "2", "--gpu-ids", "3,5", "--memory", "16Gi", "--resources", "tpu=4", "--resources", "license=1"},
			runner.Config{CPUs: 4.5, GPUs: 2, GPUIDs: []string{"3", "5"}, Memory: 16 << 30, Resources: map[string]float64{"tpu": 4, "license": 1}}, ""},
		{"fake GPUs", []string{"--gpus", "2"}, runner.Config{GPUs: 2}, ""},
		{"ids without a count", []string{"--gpu-ids", "0,1,2"}, runner.Config{GPUs: runner.DetectGPUs, GPUIDs: []string{"0", "1", "2"}}, ""},
		{"ids and count disagree", []string{"--gpus", "1", "--gpu-ids", "0,1"}, runner.Config{}, "does not match"},
		{"bad memory", []string{"--memory", "2GB"}, runner.Config{}, `unknown unit "GB"`},
		{"bad resource", []string{"--resources", "tpu"}, runner.Config{}, "want name=amount"},
		{"negative resource", []string{"--resources", "tpu=-1"}, runner.Config{}, "tpu must be >= 0"},
		{"gpu as a custom resource", []string{"--resources", "gpu=2"}, runner.Config{}, "give gpu with --gpus"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var f capacityFlags
			fs := pflag.NewFlagSet("runner", pflag.ContinueOnError)
			f.add(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			var got runner.Config
			err := f.config(&got)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v; want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Fatalf("config (-want +got):\n%s", d)
			}
		})
	}
	var f capacityFlags
	fs := pflag.NewFlagSet("runner", pflag.ContinueOnError)
	f.add(fs)
	if u := fs.Lookup("slots").Usage; !strings.Contains(u, "deprecated") || !strings.Contains(u, "--cpus") {
		t.Fatalf("--slots says %q; want it deprecated, for --cpus", u)
	}
}

// TestStatusShowsRunnerCapacityAndWhyTrialsWait: tunejet status lists
// what each runner holds of its capacity, with each attempt's share and
// GPU, and says why a trial no runner can hold is PENDING.
func TestStatusShowsRunnerCapacityAndWhyTrialsWait(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	fn := func(ctx context.Context, _ map[string]any) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	ctl := controller.New(srv.Bus("controller"), controller.Config{Tick: 20 * time.Millisecond})
	rb := srv.Bus("runner")
	rb.Log = log
	run := runner.New(rb, runner.Config{Name: "gpu-box", CPUs: 4, GPUIDs: []string{"7"}, WorkDir: t.TempDir(),
		Trainables: map[string]session.Func{"fn": fn}, StopGrace: time.Second})
	for _, svc := range []func(context.Context) error{ctl.Run, run.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = svc(ctx) }()
	}
	client := srv.Bus("client")
	bustest.Eventually(t, time.Minute, "the runner in the registry", func() bool {
		runners, ok, err := client.LiveRunners(ctx)
		return err == nil && ok && slices.ContainsFunc(runners, func(r bus.RunnerInfo) bool { return r.Name == "gpu-box" })
	})
	sp := events.ExperimentSpec{
		Name: "gpus", Trainable: events.Trainable{Name: "fn", Resources: map[string]events.ResourceAmount{"gpu": {Config: "gpus"}}},
		ParamSpace: map[string]any{"gpus": map[string]any{"grid_search": []any{0.5, 2.0}}},
		TuneConfig: events.TuneConfig{NumSamples: 1},
	}
	if _, err := client.Publish(ctx, client.Event(sp.Name, events.WriterClient, &events.ExperimentSubmitted{Spec: sp})); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	bustest.Eventually(t, time.Minute, "status to show the half-GPU trial running and the 2-GPU one waiting", func() bool {
		out.Reset()
		if err := printStatus(ctx, client, &out, false, false); err != nil {
			t.Log(err)
			return false
		}
		return strings.Contains(out.String(), "gpu 0.5/1")
	})
	text := out.String()
	for _, want := range []string{
		"PENDING: needs gpu=2; the largest live runner has gpu=1",
		"HELD/CAPACITY",
		"0/2 trials done (0%)",
		"cpu 1/4 gpu 0.5/1",
		"(cpu=1 gpu=0.5 on 7)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}
	if lines := strings.Split(text, "\n"); !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "gpus/") && strings.Contains(l, "PENDING") }) {
		t.Errorf("the waiting trial's line does not name its experiment:\n%s", text)
	}
}

// TestEmbeddedRunnerCapacityFlags: run and restore size their embedded
// runner with the runner's flags (GPUs found by default), --slots staying
// the CPUs unless --cpus is given.
func TestEmbeddedRunnerCapacityFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
		want tune.RunnerCapacity
		err  string
	}{
		{"defaults", nil, tune.RunnerCapacity{GPUs: runner.DetectGPUs}, ""},
		{"slots are cpus", []string{"--slots", "3"}, tune.RunnerCapacity{CPUs: 3, GPUs: runner.DetectGPUs}, ""},
		{"cpus win over slots", []string{"--slots", "3", "--cpus", "6"}, tune.RunnerCapacity{CPUs: 6, GPUs: runner.DetectGPUs}, ""},
		{"fake GPUs and memory", []string{"--gpus", "2", "--memory", "1Gi", "--resources", "tpu=1"},
			tune.RunnerCapacity{GPUs: 2, Memory: 1 << 30, Custom: map[string]float64{"tpu": 1}}, ""},
		{"bad gpus", []string{"--gpus", "-2"}, tune.RunnerCapacity{}, "--gpus must be >= 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sf stackFlags
			cmd := &cobra.Command{}
			sf.add(cmd)
			if err := cmd.Flags().Parse(c.args); err != nil {
				t.Fatal(err)
			}
			got, err := sf.capacity.embedded(sf.slots)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v; want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("capacity (-want +got):\n%s", d)
			}
		})
	}
}
