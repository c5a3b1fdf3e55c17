package tune_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/tune"
)

// fakeDriver is the driver's end of WithDriver's pipes, as the Python
// Tuner.fit() speaks it: it reads each event and acknowledges it (but a
// replay; twice with ackTwice), until it has acknowledged dieAfter events
// (0: never), where it closes both pipes without acknowledging the next one.
type fakeDriver struct {
	toTune, fromTune *os.File // the driver's ends
	tuneIn, tuneOut  *os.File // tunejet's ends
	dieAfter         int
	ackTwice         bool
	done             chan struct{}
	// answer, when set, answers the requests (docs/driver.md): the
	// reply's answer, or nil to reply an error.
	answer func(m tune.DriverMessage) map[string]any

	mu     sync.Mutex
	got    []tune.DriverMessage // every message, replays too
	acked  []uint64
	reason error
}

func startFakeDriver(t *testing.T, dieAfter int, ackTwice bool, answer ...func(tune.DriverMessage) map[string]any) *fakeDriver {
	t.Helper()
	r1, w1, err := os.Pipe() // driver → tunejet
	if err != nil {
		t.Fatal(err)
	}
	r2, w2, err := os.Pipe() // tunejet → driver
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDriver{toTune: w1, fromTune: r2, tuneIn: r1, tuneOut: w2, dieAfter: dieAfter, ackTwice: ackTwice, done: make(chan struct{})}
	if len(answer) > 0 {
		d.answer = answer[0]
	}
	t.Cleanup(func() {
		for _, f := range []*os.File{r1, w1, r2, w2} {
			_ = f.Close()
		}
	})
	go d.run()
	return d
}

func (d *fakeDriver) run() {
	defer close(d.done)
	sc := bufio.NewScanner(d.fromTune)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m tune.DriverMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			d.fail(err)
			return
		}
		d.mu.Lock()
		d.got = append(d.got, m)
		die := !m.Replay && d.dieAfter > 0 && len(d.acked) == d.dieAfter
		d.mu.Unlock()
		if m.Kind == "request" {
			if err := d.reply(m); err != nil {
				d.fail(err)
				return
			}
			continue
		}
		if m.Replay {
			continue
		}
		if die {
			_ = d.toTune.Close()
			_ = d.fromTune.Close()
			return
		}
		for range 1 + btoi(d.ackTwice) {
			if _, err := fmt.Fprintf(d.toTune, `{"kind":"ack","seq":%d}`+"\n", m.Seq); err != nil {
				d.fail(err)
				return
			}
		}
		d.mu.Lock()
		d.acked = append(d.acked, m.Seq)
		d.mu.Unlock()
	}
}

// reply answers a request with d.answer.
func (d *fakeDriver) reply(m tune.DriverMessage) error {
	reply := map[string]any{"kind": "reply", "id": m.ID, "by": "FakeDriver"}
	if a := d.answer(m); a != nil {
		reply["answer"] = a
	} else {
		reply["error"] = "no answer"
	}
	b, err := json.Marshal(reply)
	if err != nil {
		return err
	}
	_, err = d.toTune.Write(append(b, '\n'))
	return err
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (d *fakeDriver) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reason = err
}

func (d *fakeDriver) option() tune.Option { return tune.WithDriver(d.tuneIn, d.tuneOut) }

// seen returns the events the driver acknowledged, in order, and the
// replays it was sent.
func (d *fakeDriver) seen(t *testing.T) (acked, replayed []tune.DriverMessage) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.reason != nil {
		t.Fatalf("driver: %v", d.reason)
	}
	for _, m := range d.got {
		switch {
		case m.Replay:
			replayed = append(replayed, m)
		case slices.Contains(d.acked, m.Seq):
			acked = append(acked, m)
		}
	}
	return acked, replayed
}

// results returns each trial's reported step (or training_iteration)
// values, in the order the messages carry them.
func results(t *testing.T, msgs []tune.DriverMessage, key string) map[string][]float64 {
	t.Helper()
	out := map[string][]float64{}
	for _, m := range msgs {
		if m.Type != "trial.reported" {
			continue
		}
		var p struct {
			Earlier []map[string]any `json:"earlier"`
			Result  map[string]any   `json:"result"`
		}
		if err := json.Unmarshal(m.Data, &p); err != nil {
			t.Fatal(err)
		}
		for _, r := range append(p.Earlier, p.Result) {
			v, _ := r[key].(float64)
			out[m.TrialID] = append(out[m.TrialID], v)
		}
	}
	return out
}

func seqs(msgs []tune.DriverMessage) []uint64 {
	var out []uint64
	for _, m := range msgs {
		out = append(out, m.Seq)
	}
	return out
}

func types(msgs []tune.DriverMessage) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Type)
	}
	return out
}

// TestDriverGetsEachEventOnceInOrder: a Fit WithDriver sends the driver
// every event its callbacks are made of, in log order, each once, and
// returns only after the driver acknowledged the experiment's end.
func TestDriverGetsEachEventOnceInOrder(t *testing.T) {
	d := startFakeDriver(t, 0, false)
	tuner, err := tune.NewTuner(steps(3), tune.WithTrainableName("steps"), tune.WithName("relayed"),
		tune.WithStoreDir(t.TempDir()), tune.WithRunnerSlots(2), tune.WithRunConfig(storage(t)),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1.0, 2.0)}), d.option())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), fitDeadline)
	defer cancel()
	g, err := tuner.Fit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	acked, replayed := d.seen(t) // Fit has returned: all it waited for is here
	if len(replayed) != 0 {
		t.Errorf("a first run replayed %v", types(replayed))
	}
	if len(acked) == 0 || acked[len(acked)-1].Type != "experiment.completed" {
		t.Fatalf("acknowledged %v; want it to end with experiment.completed", types(acked))
	}
	for i := 1; i < len(acked); i++ {
		if acked[i].Seq <= acked[i-1].Seq {
			t.Fatalf("event %d (%s) after event %d: not in log order, or twice", acked[i].Seq, acked[i].Type, acked[i-1].Seq)
		}
	}
	count := map[string]int{}
	for _, m := range acked {
		count[m.Type+" "+m.TrialID]++
	}
	for _, r := range g.Results() {
		for _, typ := range []string{"trial.created", "trial.started", "trial.completed"} {
			if n := count[typ+" "+r.TrialID]; n != 1 {
				t.Errorf("trial %s: %d %s; want 1", r.TrialID, n, typ)
			}
		}
		if got := results(t, acked, "score")[r.TrialID]; !slices.Equal(got, []float64{1, 2, 3}) {
			t.Errorf("trial %s: results %v; want each of 1, 2, 3 once, in order", r.TrialID, got)
		}
	}
	if count["experiment.completed "] != 1 || len(g.Results()) != 2 {
		t.Errorf("%d experiment.completed, %d trials; want 1 and 2", count["experiment.completed "], len(g.Results()))
	}
}

// TestDriverRelayStartsAfterItsCursor: a driver that goes away ends Fit
// with an error; a restored Fit with a new driver replays what the first
// acknowledged (marked so) and sends the rest: together they acknowledge
// each result once.
func TestDriverRelayStartsAfterItsCursor(t *testing.T) {
	var firstRun atomic.Bool
	firstRun.Store(true)
	// Each trial reports steps 1 and 2 with checkpoints, then, on the
	// first run, waits to be stopped; restored, it goes on to step 3.
	trainable := func(ctx context.Context, config map[string]any) error {
		step, err := stepFrom(ctx)
		if err != nil {
			return err
		}
		for step < 3 {
			if step == 2 && firstRun.Load() {
				<-ctx.Done()
				return ctx.Err()
			}
			step++
			if err := reportStep(ctx, step); err != nil {
				return err
			}
		}
		return nil
	}
	store, rc := t.TempDir(), storage(t)
	opts := []tune.Option{tune.WithTrainableName("resumed"), tune.WithStoreDir(store), tune.WithRunnerSlots(2)}
	// The first driver dies before acknowledging its 8th event: by then
	// both trials were created and started and some results came.
	first := startFakeDriver(t, 7, false)
	tuner, err := tune.NewTuner(tune.Trainable(trainable), append(opts, tune.WithName("cursor"), tune.WithRunConfig(rc),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1.0, 2.0)}), first.option())...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), fitDeadline)
	defer cancel()
	if _, err := tuner.Fit(ctx); err == nil || !strings.Contains(err.Error(), "driver") {
		t.Fatalf("Fit with a driver gone = %v; want an error about the driver", err)
	}
	<-first.done
	acked1, _ := first.seen(t)
	if len(acked1) != 7 {
		t.Fatalf("the first driver acknowledged %v; want 7 events", types(acked1))
	}

	firstRun.Store(false)
	second := startFakeDriver(t, 0, false)
	restored, err := tune.Restore(ctx, filepath.Join(rc.StoragePath, "cursor"), tune.Trainable(trainable), append(opts, second.option())...)
	if err != nil {
		t.Fatal(err)
	}
	g, err := restored.Fit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	acked2, replayed := second.seen(t)
	// Replayed: what the first driver acknowledged, and the first run's
	// end (its experiment.interrupted), which is not the restored run's.
	want := seqs(acked1)
	var got []uint64
	var ends []string
	for _, m := range replayed {
		if m.Seq > want[len(want)-1] {
			ends = append(ends, m.Type)
			continue
		}
		got = append(got, m.Seq)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the restore replayed events %v; want those the first driver acknowledged, %v", got, want)
	}
	if !slices.Equal(ends, []string{"experiment.interrupted"}) {
		t.Errorf("after the cursor, the restore replayed %v; want only the first run's end, experiment.interrupted", ends)
	}
	if slices.Contains(types(acked2), "experiment.interrupted") {
		t.Errorf("the second driver acknowledged %v: the first run's end as its own", types(acked2))
	}
	if len(acked2) == 0 || acked2[0].Seq <= want[len(want)-1] {
		t.Fatalf("the second driver acknowledged %v, from event %v; want events after the cursor %d", types(acked2), seqs(acked2), want[len(want)-1])
	}
	both := append(slices.Clone(acked1), acked2...)
	for _, r := range g.Results() {
		if got := results(t, both, "step")[r.TrialID]; !slices.Equal(got, []float64{1, 2, 3}) {
			t.Errorf("trial %s: the two drivers acknowledged results %v; want 1, 2, 3 once each", r.TrialID, got)
		}
	}
	if n := slices.Index(types(acked2), "experiment.completed"); n != len(acked2)-1 {
		t.Errorf("the second driver acknowledged %v; want experiment.completed last", types(acked2))
	}
}

// TestDriverMayAckTwice: an ack sent twice is taken once; the relay goes
// on with the next event.
func TestDriverMayAckTwice(t *testing.T) {
	d := startFakeDriver(t, 0, true)
	tuner, err := tune.NewTuner(steps(2), tune.WithTrainableName("steps"), tune.WithName("twice"),
		tune.WithStoreDir(t.TempDir()), tune.WithRunConfig(storage(t)), d.option())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tuner.Fit(t.Context()); err != nil {
		t.Fatal(err)
	}
	acked, _ := d.seen(t)
	if got := types(acked); len(got) == 0 || got[len(got)-1] != "experiment.completed" {
		t.Errorf("acknowledged %v; want it to end with experiment.completed", got)
	}
}

// TestDriverGoneWhileIdleEndsFit: a driver that goes away while no event
// is on its way (its trials wait) ends Fit with an error at once, the
// experiment restorable, rather than leaving the run behind it.
func TestDriverGoneWhileIdleEndsFit(t *testing.T) {
	d := startFakeDriver(t, 0, false)
	blocked := make(chan struct{})
	trainable := func(ctx context.Context, config map[string]any) error {
		if err := tune.Report(ctx, map[string]any{"score": 1.0}); err != nil {
			return err
		}
		close(blocked)
		<-ctx.Done()
		return ctx.Err()
	}
	tuner, err := tune.NewTuner(trainable, tune.WithTrainableName("idle"), tune.WithName("idle"),
		tune.WithStoreDir(t.TempDir()), tune.WithRunConfig(storage(t)), d.option())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), fitDeadline)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := tuner.Fit(ctx); done <- err }()
	<-blocked
	// Once the driver has the result, nothing more comes its way.
	bustest.Eventually(t, fitDeadline, "the driver acknowledges the result", func() bool {
		acked, _ := d.seen(t)
		return slices.Contains(types(acked), "trial.reported")
	})
	_ = d.toTune.Close()
	_ = d.fromTune.Close()
	err = <-done
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "driver") {
		t.Fatalf("Fit: %v (context: %v); want an error saying the driver went away, before the deadline", err, ctx.Err())
	}
}
