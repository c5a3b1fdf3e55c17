package controller

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/tuning"
)

// BenchmarkDecideTPE1000 is the controller's view of the target "a TPE
// suggestion with 1,000 finished trials in the history takes ≤ 10 ms":
// Decide on an experiment with search_alg tpe (default settings) over six
// uniform parameters (Hartmann6's domain), 1,000 trials TERMINATED with
// their metric and none in flight, creating the next trial — the history
// read from the state (tpeHistory), the suggestion, the trial's id, tag
// and directory, and its work message. Sub-benchmark `decide` times all of
// it; `suggest` times the sampler alone on the same history, so the
// difference is what the controller adds. Decide is pure, so every
// iteration decides on the same state. Each reports wall and CPU time per
// op; on shared cores read the CPU time.
//
//	go test -run '^$' -bench BenchmarkDecideTPE1000 -benchtime 50x ./services/controller
func BenchmarkDecideTPE1000(b *testing.B) { benchmarkDecide(b, "tpe", 1000) }

// BenchmarkDecideGP200 is BenchmarkDecideTPE1000 with search_alg bayesopt
// and 200 finished trials: the target "a suggestion at N=200 ≤ 100 ms
// CPU".
//
//	go test -run '^$' -bench BenchmarkDecideGP200 -benchtime 10x ./services/controller
func BenchmarkDecideGP200(b *testing.B) { benchmarkDecide(b, "bayesopt", 200) }

// benchmarkDecide times Decide creating the next trial of an experiment
// with search algorithm alg and finished trials TERMINATED, and the
// searcher's suggestion alone on the same history.
func benchmarkDecide(b *testing.B, alg string, finished int) {
	st, in := finishedExperiment(b, alg, finished)
	b.Run("decide", func(b *testing.B) {
		cpu0 := processCPU(b)
		for b.Loop() {
			acts := Decide(st, in)
			if len(acts) != 2 {
				b.Fatalf("decided %v, want trial %d created and scheduled", describeAll(acts), finished)
			}
			if c, ok := acts[0].Payload.(*events.TrialCreated); !ok || c.Index != finished {
				b.Fatalf("decided %v, want trial %d created first", describeAll(acts), finished)
			}
		}
		b.ReportMetric(msPerOp(b), "ms/decide")
		b.ReportMetric(cpuMsPerOp(b, cpu0), "cpu_ms/decide")
	})
	b.Run("suggest", func(b *testing.B) {
		history := tpeHistory(st)
		if len(history) != finished {
			b.Fatalf("history of %d trials, want %d", len(history), finished)
		}
		cpu0 := processCPU(b)
		for b.Loop() {
			in.Searcher.Suggest(history, tuning.Rand(st.Seed, "suggest", uint64(finished)))
		}
		b.ReportMetric(msPerOp(b), "ms/suggest")
		b.ReportMetric(cpuMsPerOp(b, cpu0), "cpu_ms/suggest")
	})
}

// msPerOp is a loop's wall time per iteration in milliseconds.
func msPerOp(b *testing.B) float64 {
	return float64(b.Elapsed()) / float64(b.N) / float64(time.Millisecond)
}

// processCPU is the user and system CPU time of this process so far. On
// shared cores the wall time per op swings with the load; CPU time far
// less.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMsPerOp is the process's CPU time since cpu0 per iteration in
// milliseconds (the garbage collector's included).
func cpuMsPerOp(b *testing.B, cpu0 time.Duration) float64 {
	return float64(processCPU(b)-cpu0) / float64(b.N) / float64(time.Millisecond)
}

// finishedExperiment is the state of an experiment with search_alg alg
// over six parameters in [0, 1] whose first n trials ended TERMINATED,
// each with loss = the squared distance of its config from the point
// (0.2, 0.2, …), folded from its events, and Decide's inputs with the
// experiment's TPE sampler. The n trials' configs are random draws (n
// suggestions would only make the setup slow); the next trial is TPE's.
func finishedExperiment(b *testing.B, alg string, n int) (*state.Experiment, Inputs) {
	b.Helper()
	params := map[string]any{}
	for i := range 6 {
		params[fmt.Sprintf("x%d", i)] = map[string]any{"uniform": []any{0.0, 1.0}}
	}
	spec := events.ExperimentSpec{
		Name: "exp", Trainable: events.Trainable{Name: "fn"}, ParamSpace: params,
		TuneConfig: events.TuneConfig{
			NumSamples: n + 1, MaxConcurrentTrials: 1, Metric: "loss", Mode: "min", SearchAlg: alg,
		},
	}
	space, err := search.ParseSpace(spec.ParamSpace)
	if err != nil {
		b.Fatal(err)
	}
	set, err := tuning.Parse(&spec)
	if err != nil {
		b.Fatal(err)
	}
	sampler, err := set.Sampler(space)
	if err != nil || sampler == nil {
		b.Fatalf("Searcher: %v, %v", sampler, err)
	}
	random := Inputs{Now: t0, Space: space, NewSeed: 42, NewPrefix: "abcde", StoragePath: "/results"}
	st := state.New("exp")
	var seq uint64
	apply := func(w events.Writer, p events.Payload) {
		seq++
		ev := events.New(st.Name, w, "bench", p)
		ev.Seq, ev.Time = seq, t0
		st, _, _ = state.Fold(b.Context(), st, ev, nil)
	}
	apply(events.WriterClient, &events.ExperimentSubmitted{Spec: spec})
	apply(events.WriterController, Decide(st, random)[0].Payload)
	for i := range n {
		var config map[string]any
		for _, a := range trialActions(st, random, newSearcher(st, random), i) {
			if c, ok := a.Payload.(*events.TrialCreated); ok {
				config = c.Config
			}
			apply(events.WriterController, a.Payload)
		}
		loss := 0.0
		for _, v := range config {
			d := v.(float64) - 0.2
			loss += d * d
		}
		tr := search.TrialID(st.TrialIDPrefix, i)
		apply(events.WriterRunner, &events.TrialStarted{TrialID: tr, Attempt: 1, Runner: "r1"})
		apply(events.WriterRunner, &events.TrialReported{TrialID: tr, Attempt: 1, Result: map[string]any{"training_iteration": 1.0, "loss": loss}})
		apply(events.WriterRunner, &events.TrialCompleted{TrialID: tr, Attempt: 1, Status: events.StatusTerminated, Reason: "finished"})
	}
	if got := st.Counts()[events.StatusTerminated]; got != n || st.InFlight() != 0 {
		b.Fatalf("%d trials TERMINATED, %d in flight; want %d, 0", got, st.InFlight(), n)
	}
	in := random
	in.Searcher = sampler
	return st, in
}
