package tune

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/state"
)

// tableState is an experiment of three trials over lr (layers is a
// constant), minimizing loss: one running, one a scheduler stopped, one
// paused.
func tableState() *state.Experiment {
	st := state.New("exp")
	st.Status = state.ExperimentRunning
	st.Spec = &events.ExperimentSpec{
		Name:       "exp",
		ParamSpace: map[string]any{"lr": map[string]any{"loguniform": []any{1e-4, 1e-1}}, "layers": 2},
		TuneConfig: events.TuneConfig{Metric: "loss", Mode: "min"},
	}
	add := func(id, status string, lr, loss float64, stop string) {
		st.Trials[id] = &state.Trial{
			ID: id, Name: "train_" + id, Status: status, Iteration: 3, StopDecision: stop,
			Config:     map[string]any{"lr": lr, "layers": 2.0},
			LastResult: map[string]any{"loss": loss, "acc": 1 - loss, "training_iteration": 3.0, "time_total_s": 1.5},
		}
		st.Order = append(st.Order, id)
	}
	add("a_00000", events.StatusRunning, 0.01, 0.5, "")
	add("a_00001", events.StatusTerminated, 0.001, 0.9, "scheduler: stopped at rung 1 (training_iteration 1): -0.9 < cutoff -0.5")
	add("a_00002", events.StatusPaused, 0.05, 0.25, "")
	st.Recount()
	return st
}

// A Reporter's columns, as Ray's CLIReporter(metric_columns,
// parameter_columns), replace the default ones, in the order given.
func TestStatusTableColumnsOfAReporter(t *testing.T) {
	st := tableState()
	out := render(st, time.Now(), time.Second, VerboseTable, columns{params: []string{"layers"}, metrics: []string{"acc", "loss"}})
	header := strings.Fields(strings.Split(out, "\n")[3])
	want := []string{"Trial", "name", "status", "layers", "iter", "total", "time", "(s)", "acc", "loss", "reason"}
	if !slices.Equal(header, want) {
		t.Fatalf("header %q, want %q", header, want)
	}
	if row := strings.Fields(strings.Split(out, "\n")[4]); row[2] != "2" || row[5] != "0.5" {
		t.Errorf("row %q: want layers 2 and acc 0.5", row)
	}
}

// The table shows, as Ray's reporter, the hyperparameters that vary (not
// the constant), the metric, the current best trial, and why a scheduler
// ended or paused a trial; verbosity says how much.
func TestStatusTableAsRay(t *testing.T) {
	st := tableState()
	params := paramColumns(st.Spec)
	full := render(st, time.Now(), time.Second, VerboseTable, columns{params: params})
	lines := strings.Split(full, "\n")
	header := lines[3]
	for _, want := range []string{"Trial name", "status", "lr", "iter", "total time (s)", "loss", "reason"} {
		if !strings.Contains(header, want) {
			t.Errorf("header %q lacks %q", header, want)
		}
	}
	if strings.Contains(header, "layers") || strings.Contains(header, "acc") {
		t.Errorf("header %q shows a constant or a metric other than the experiment's at verbosity 2", header)
	}
	for _, want := range []string{
		"Current best trial: a_00002 with loss=0.25 and params=",
		"scheduler: stopped at rung 1",
		"1 RUNNING, 1 PAUSED, 1 TERMINATED",
	} {
		if !strings.Contains(full, want) {
			t.Errorf("the table does not say %q:\n%s", want, full)
		}
	}
	if rows := lines[4:7]; !strings.Contains(rows[0], "RUNNING") || !strings.Contains(rows[1], "PAUSED") || !strings.Contains(rows[2], "TERMINATED") {
		t.Errorf("rows in the order %q, want RUNNING, PAUSED, TERMINATED", rows)
	}
	if all := render(st, time.Now(), time.Second, VerboseAll, columns{params: params}); !strings.Contains(strings.Split(all, "\n")[3], "acc") {
		t.Errorf("verbosity 3 shows no other metric:\n%s", all)
	}
	if s := render(st, time.Now(), time.Second, VerboseStatus, columns{params: params}); strings.Contains(s, "Trial name") || !strings.Contains(s, "Experiment exp: RUNNING") {
		t.Errorf("verbosity 1 shows more or less than the status line:\n%s", s)
	}
	if s := render(st, time.Now(), time.Second, VerboseSilent, columns{params: params}); s != "" {
		t.Errorf("verbosity 0 shows %q", s)
	}
}

// An interrupted Fit prints its last table, as Ray does, even before the
// table's first periodic redraw.
func TestInterruptedFitPrintsItsLastTable(t *testing.T) {
	reported := make(chan struct{})
	var once sync.Once
	fn := func(ctx context.Context, _ map[string]any) error {
		if err := Report(ctx, map[string]any{"loss": 1.0}); err != nil {
			return err
		}
		once.Do(func() { close(reported) })
		<-ctx.Done()
		return nil
	}
	st, err := StartStack(t.Context(), StackConfig{StoreDir: t.TempDir(), Slots: 1, Listen: true, Log: zerolog.Nop(),
		Trainables: map[string]Trainable{"waits": fn}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	var out strings.Builder
	tuner, err := NewTuner("waits", WithName("interrupted_table"), WithRunConfig(RunConfig{StoragePath: t.TempDir()}),
		WithNATS(st.NATSOptions()), WithProgress(&out))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := tuner.Fit(ctx); done <- err }()
	select {
	case <-reported:
	case err := <-done:
		t.Fatalf("Fit returned before the trial reported: %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Fit: %v, want ErrInterrupted", err)
	}
	if !strings.Contains(out.String(), "== Status ==") || !strings.Contains(out.String(), "waits_") {
		t.Errorf("no last table after the interruption:\n%q", out.String())
	}
}
