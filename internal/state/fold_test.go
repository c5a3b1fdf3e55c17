package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
)

// wire encodes and decodes an event, as it would travel through the log,
// and gives it a stream sequence.
func wire(t testing.TB, seq uint64, e *events.Event) *events.Event {
	t.Helper()
	m, err := events.Encode(e)
	if err != nil {
		t.Fatalf("encode %s: %v", e.Type(), err)
	}
	d, err := events.Decode(m.Subject, m.Header, m.Data)
	if err != nil {
		t.Fatalf("decode %s: %v", e.Type(), err)
	}
	d.Seq = seq
	return d
}

// log builds a sequence of wire events for experiment "exp".
type log struct {
	t      testing.TB
	seq    uint64
	evs    []*events.Event
	when   time.Time
	staged map[string][]byte // restored states by object, for load
}

func (l *log) add(w events.Writer, p events.Payload) *events.Event {
	l.seq++
	l.when = l.when.Add(time.Second)
	e := events.New("exp", w, "test", p)
	e.Time = l.when
	d := wire(l.t, l.seq, e)
	l.evs = append(l.evs, d)
	return d
}

func newLog(t testing.TB) *log {
	l := &log{t: t, when: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	l.add(events.WriterClient, &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
		Name: "exp", Trainable: events.Trainable{Name: "fn"}, TuneConfig: events.TuneConfig{NumSamples: 1},
	}})
	l.add(events.WriterController, &events.ExperimentStarted{Run: 1, Session: "2026-01-02_03-04-05", Seed: 1, TrialIDPrefix: "abcde", NumTrials: 2, StoragePath: "/tmp/x"})
	return l
}

func (l *log) create(id string, index int) {
	l.add(events.WriterController, &events.TrialCreated{TrialID: id, Index: index, TrialName: "fn_" + id, ExperimentTag: fmt.Sprint(index), DirName: "fn_" + id, Config: map[string]any{"x": float64(index)}})
	l.add(events.WriterController, &events.TrialScheduled{TrialID: id, TrialName: "fn_" + id, DirName: "fn_" + id, Config: map[string]any{}, Trainable: events.Trainable{Name: "fn"}, HeartbeatTimeoutS: 3})
}

func (l *log) start(id string, attempt int) {
	l.add(events.WriterRunner, &events.TrialStarted{TrialID: id, Attempt: attempt, Runner: "r1"})
}

func (l *log) report(id string, attempt, it int, loss float64) {
	l.add(events.WriterRunner, &events.TrialReported{TrialID: id, Attempt: attempt, Result: map[string]any{"training_iteration": it, "loss": loss}})
}

func fold(evs []*events.Event) *Experiment { return foldWith(evs, nil) }

// foldWith folds evs with Fold, as every reader does.
func foldWith(evs []*events.Event, load Loader) *Experiment {
	e := New("exp")
	for _, ev := range evs {
		e, _, _ = Fold(context.Background(), e, ev, load)
	}
	return e
}

// load is the log's Loader: the restored states it staged.
func (l *log) load(_ context.Context, r *events.ExperimentRestored) (*Experiment, error) {
	data, ok := l.staged[r.Object]
	if !ok {
		return nil, fmt.Errorf("no staged state %s", r.Object)
	}
	return Load(data)
}

// restore does what a restore from the log does: it stages the state
// folded so far with every unfinished trial back to PENDING, publishes
// experiment.restored naming it, and starts the next run.
func (l *log) restore(run int) {
	e := foldWith(l.evs, l.load)
	for _, t := range e.Trials {
		if !t.Finished() {
			t.Status, t.Scheduled = events.StatusPending, false
		}
	}
	e.Status = ExperimentPending
	data, err := e.Snapshot()
	if err != nil {
		l.t.Fatal(err)
	}
	object := fmt.Sprintf("restored/run-%d", run)
	if l.staged == nil {
		l.staged = map[string][]byte{}
	}
	l.staged[object] = data
	l.add(events.WriterRestorer, &events.ExperimentRestored{
		Resume: events.ResumeConfig{Finished: "skip", Unfinished: "resume", Errored: "skip"}, Source: "log",
		Object: object, Digest: "sha256:" + strings.Repeat("ab", 32),
	})
	l.add(events.WriterController, &events.ExperimentStarted{Run: run, Session: fmt.Sprintf("2026-01-02_03-04-%02d", run), Seed: 1, TrialIDPrefix: "abcde", NumTrials: 7, StoragePath: "/tmp/x"})
}

func TestFoldTrialLifecycle(t *testing.T) {
	tests := []struct {
		name       string
		build      func(l *log)
		status     string
		iteration  int
		failures   int
		numResults int
	}{
		{"created is pending", func(l *log) { l.create("t1", 0) }, events.StatusPending, 0, 0, 0},
		{"started is running", func(l *log) { l.create("t1", 0); l.start("t1", 1) }, events.StatusRunning, 0, 0, 0},
		{"reports advance", func(l *log) {
			l.create("t1", 0)
			l.start("t1", 1)
			l.report("t1", 1, 1, 0.5)
			l.report("t1", 1, 2, 0.4)
		}, events.StatusRunning, 2, 0, 2},
		{"duplicate report ignored", func(l *log) {
			l.create("t1", 0)
			l.start("t1", 1)
			l.report("t1", 1, 1, 0.5)
			l.report("t1", 1, 1, 0.5)
		}, events.StatusRunning, 1, 0, 1},
		{"stale attempt fenced", func(l *log) {
			l.create("t1", 0)
			l.start("t1", 1)
			l.start("t1", 2)
			l.report("t1", 1, 1, 0.5)
			l.add(events.WriterRunner, &events.TrialCompleted{TrialID: "t1", Attempt: 1, Status: events.StatusTerminated, Reason: "finished"})
		}, events.StatusRunning, 0, 1, 0}, // attempt 1 was lost: counted as a failure, as Ray counts a dead node
		{"preempted is pending, not counted", func(l *log) {
			l.create("t1", 0)
			l.start("t1", 1)
			l.add(events.WriterRunner, &events.TrialFailed{TrialID: "t1", Attempt: 1, Cause: events.CausePreempted, Error: "SIGTERM"})
		}, events.StatusPending, 0, 0, 0},
		{"a retry repeats iterations after its checkpoint: the trial takes each once", func(l *log) {
			l.create("t1", 0)
			l.start("t1", 1)
			for i := 1; i <= 7; i++ {
				l.report("t1", 1, i, 0.5)
			}
			l.add(events.WriterRunner, &events.TrialFailed{TrialID: "t1", Attempt: 1, Cause: events.CauseError, Error: "boom", Counted: true})
			l.add(events.WriterRunner, &events.TrialStarted{TrialID: "t1", Attempt: 2, Runner: "r1", RestoredFrom: events.CheckpointName(5)})
			l.report("t1", 2, 6, 0.4) // resumed from the checkpoint of iteration 5
		}, events.StatusRunning, 7, 1, 7},
		{"a retry that starts afresh runs anew: its results count again", func(l *log) {
			l.create("t1", 0)
			l.start("t1", 1)
			for i := 1; i <= 3; i++ {
				l.report("t1", 1, i, 0.5)
			}
			l.add(events.WriterRunner, &events.TrialFailed{TrialID: "t1", Attempt: 1, Cause: events.CauseError, Error: "boom", Counted: true})
			l.start("t1", 2)
			l.report("t1", 2, 1, 0.4)
		}, events.StatusRunning, 1, 1, 4},
		{"completed", func(l *log) {
			l.create("t1", 0)
			l.start("t1", 1)
			l.report("t1", 1, 1, 0.5)
			l.add(events.WriterRunner, &events.TrialCompleted{TrialID: "t1", Attempt: 1, Status: events.StatusTerminated, Reason: "finished"})
		}, events.StatusTerminated, 1, 0, 1},
		{"retryable failure back to pending", func(l *log) {
			l.create("t1", 0)
			l.start("t1", 1)
			l.add(events.WriterRunner, &events.TrialFailed{TrialID: "t1", Attempt: 1, Cause: events.CauseError, Error: "boom", Counted: true})
		}, events.StatusPending, 0, 1, 0},
		{"final failure is error, counted once", func(l *log) {
			l.create("t1", 0)
			l.start("t1", 1)
			f := &events.TrialFailed{TrialID: "t1", Attempt: 1, Cause: events.CauseError, Error: "boom", Final: true, Counted: true}
			l.add(events.WriterRunner, f)
			l.add(events.WriterRunner, f)
		}, events.StatusError, 0, 1, 0},
		{"stop of a pending trial terminates it", func(l *log) {
			l.create("t1", 0)
			l.add(events.WriterController, &events.TrialStopRequested{TrialID: "t1", Reason: "time_budget"})
			l.start("t1", 1)
		}, events.StatusTerminated, 0, 0, 0},
		{"terminal is absorbing", func(l *log) {
			l.create("t1", 0)
			l.start("t1", 1)
			l.add(events.WriterRunner, &events.TrialCompleted{TrialID: "t1", Attempt: 1, Status: events.StatusTerminated, Reason: "finished"})
			l.start("t1", 2)
			l.report("t1", 2, 5, 0.1)
		}, events.StatusTerminated, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLog(t)
			tc.build(l)
			tr := fold(l.evs).Trials["t1"]
			if tr.Status != tc.status || tr.Iteration != tc.iteration || tr.NumFailures != tc.failures || tr.NumResults != tc.numResults {
				t.Fatalf("got status=%s iteration=%d failures=%d results=%d, want %s %d %d %d",
					tr.Status, tr.Iteration, tr.NumFailures, tr.NumResults, tc.status, tc.iteration, tc.failures, tc.numResults)
			}
		})
	}
}

func TestPreemptedTrialNeedsScheduling(t *testing.T) {
	l := newLog(t)
	l.create("t1", 0)
	l.start("t1", 1)
	l.add(events.WriterRunner, &events.TrialFailed{TrialID: "t1", Attempt: 1, Cause: events.CausePreempted, Error: "SIGTERM"})
	tr := fold(l.evs).Trials["t1"]
	if !tr.NeedsSchedule() || tr.Scheduled {
		t.Fatalf("preempted trial: scheduled=%v needsSchedule=%v; want it waiting to be scheduled again", tr.Scheduled, tr.NeedsSchedule())
	}
	l.add(events.WriterController, &events.TrialScheduled{TrialID: "t1", TrialName: "fn_t1", DirName: "fn_t1", Config: map[string]any{}, Trainable: events.Trainable{Name: "fn"}, AttemptBase: 1, HeartbeatTimeoutS: 3})
	tr = fold(l.evs).Trials["t1"]
	if tr.NeedsSchedule() || tr.AttemptBase != 1 {
		t.Fatalf("rescheduled trial: needsSchedule=%v attemptBase=%d; want false, 1", tr.NeedsSchedule(), tr.AttemptBase)
	}
}

func TestFoldMetricAnalysis(t *testing.T) {
	l := newLog(t)
	l.create("t1", 0)
	l.start("t1", 1)
	for i := 1; i <= 12; i++ {
		l.report("t1", 1, i, float64(i))
	}
	m := fold(l.evs).Trials["t1"].Metrics["loss"]
	if m.Min != 1 || m.Max != 12 || m.Last != 12 || m.Avg() != 6.5 || m.LastNAvg(5) != 10 || m.LastNAvg(10) != 7.5 {
		t.Fatalf("metric analysis: %+v avg=%v last5=%v last10=%v", m, m.Avg(), m.LastNAvg(5), m.LastNAvg(10))
	}
}

// A nested metric is analysed under its slash-joined name, as Ray flattens
// a result (flatten_dict) before it updates a trial's metric_analysis, so
// that the best trial by "val/loss" can be found.
func TestFoldMetricAnalysisOfNestedMetrics(t *testing.T) {
	l := newLog(t)
	l.create("t1", 0)
	l.start("t1", 1)
	for i := 1; i <= 3; i++ {
		l.add(events.WriterRunner, &events.TrialReported{TrialID: "t1", Attempt: 1, Result: map[string]any{
			"training_iteration": i, "val": map[string]any{"loss": float64(10 - i), "deep": map[string]any{"acc": float64(i)}},
		}})
	}
	tr := fold(l.evs).Trials["t1"]
	loss, acc := tr.Metrics["val/loss"], tr.Metrics["val/deep/acc"]
	if loss == nil || acc == nil || loss.Min != 7 || loss.Last != 7 || acc.Max != 3 || acc.Count != 3 {
		t.Fatalf("metric analysis of nested metrics: val/loss %+v, val/deep/acc %+v (all: %v)", loss, acc, tr.Metrics)
	}
}

// TestFoldTakesResultsSentTogether: results sent in one event fold as if
// each had its own, and a batch that repeats results the attempt already
// reported adds only the new ones.
func TestFoldTakesResultsSentTogether(t *testing.T) {
	res := func(it int) map[string]any { return map[string]any{"training_iteration": it, "loss": float64(it)} }
	one := newLog(t)
	one.create("t1", 0)
	one.start("t1", 1)
	for i := 1; i <= 6; i++ {
		one.report("t1", 1, i, float64(i))
	}
	together := newLog(t)
	together.create("t1", 0)
	together.start("t1", 1)
	together.report("t1", 1, 1, 1)
	together.add(events.WriterRunner, &events.TrialReported{TrialID: "t1", Attempt: 1, Earlier: []map[string]any{res(2), res(3)}, Result: res(4)})
	together.add(events.WriterRunner, &events.TrialReported{TrialID: "t1", Attempt: 1, Earlier: []map[string]any{res(3), res(4), res(5)}, Result: res(6)})
	together.add(events.WriterRunner, &events.TrialReported{TrialID: "t1", Attempt: 2, Earlier: []map[string]any{res(7)}, Result: res(8)}) // not the current attempt
	a, b := fold(one.evs).Trials["t1"], fold(together.evs).Trials["t1"]
	if a.NumResults != 6 || b.NumResults != 6 || b.Iteration != 6 || b.AttemptIteration != 6 {
		t.Fatalf("results %d (one per event) and %d (sent together) at iteration %d; want 6 and 6 at 6", a.NumResults, b.NumResults, b.Iteration)
	}
	if diff := cmp.Diff(a.Metrics, b.Metrics); diff != "" {
		t.Errorf("metric analysis differs (-one +together):\n%s", diff)
	}
	if intOf(b.LastResult["training_iteration"]) != 6 {
		t.Errorf("last result %v, want iteration 6", b.LastResult)
	}
}

func TestFoldIgnoresOtherExperiments(t *testing.T) {
	l := newLog(t)
	e := New("other")
	for _, ev := range l.evs {
		if e.apply(ev) {
			t.Fatalf("event %s of exp changed experiment other", ev.Type())
		}
	}
}

// randomLog produces a plausible, messy history: several trials, attempts
// that fail and are superseded, duplicates, stale runner events, restores.
func randomLog(t testing.TB, r *rand.Rand) ([]*events.Event, Loader) {
	l := newLog(t)
	if r.IntN(2) == 0 { // ASHA judges the results
		l = newTunedLog(t)
	}
	n := 1 + r.IntN(6)
	run := 1
	for i := 0; i < n; i++ {
		if i > 0 && r.IntN(4) == 0 { // the run was interrupted and restored
			run++
			l.restore(run)
		}
		id := fmt.Sprintf("abcde_%05d", i)
		l.create(id, i)
		attempts := 1 + r.IntN(3)
		it := 0
		for a := 1; a <= attempts; a++ {
			l.start(id, a)
			for k := r.IntN(6); k > 0; k-- {
				it++
				if r.IntN(4) == 0 { // results sent together
					var earlier []map[string]any
					for range 1 + r.IntN(3) {
						earlier = append(earlier, map[string]any{"training_iteration": it, "loss": r.Float64()})
						it++
					}
					l.add(events.WriterRunner, &events.TrialReported{TrialID: id, Attempt: a, Earlier: earlier, Result: map[string]any{"training_iteration": it, "loss": r.Float64()}})
				} else {
					l.report(id, a, it, r.Float64())
				}
				if r.IntN(4) == 0 { // duplicate delivery
					l.evs = append(l.evs, l.evs[len(l.evs)-1])
				}
				if r.IntN(3) == 0 {
					l.add(events.WriterRunner, &events.TrialCheckpointed{TrialID: id, Attempt: a, Checkpoint: events.CheckpointRef{
						Name: fmt.Sprintf("checkpoint_%06d", it), Index: it, Digest: "sha256:" + fmt.Sprintf("%064x", it), Iteration: it}})
				}
			}
			if a > 1 && r.IntN(2) == 0 { // a stale runner from an earlier attempt speaks up
				l.report(id, a-1, it+100, 9)
			}
			if a < attempts {
				l.add(events.WriterRunner, &events.TrialFailed{TrialID: id, Attempt: a, Cause: events.CauseError, Error: "x", Counted: true})
			}
		}
		switch r.IntN(3) {
		case 0:
			l.add(events.WriterRunner, &events.TrialCompleted{TrialID: id, Attempt: attempts, Status: events.StatusTerminated, Reason: "finished"})
		case 1:
			l.add(events.WriterRunner, &events.TrialFailed{TrialID: id, Attempt: attempts, Cause: events.CauseError, Error: "y", Final: true, Counted: true})
		}
	}
	if r.IntN(2) == 0 {
		l.add(events.WriterController, &events.ExperimentCompleted{Reason: "finished"})
	}
	// Interleave trials a little: shuffle adjacent events of different trials.
	for i := 1; i+1 < len(l.evs); i++ {
		a, b := l.evs[i], l.evs[i+1]
		if a.Trial() != "" && b.Trial() != "" && a.Trial() != b.Trial() && r.IntN(2) == 0 {
			l.evs[i], l.evs[i+1] = b, a
		}
	}
	for i, ev := range l.evs { // stream order defines the sequence
		cp := *ev
		cp.Seq = uint64(i + 1)
		l.evs[i] = &cp
	}
	return l.evs, l.load
}

func TestSnapshotPrefixEquivalence(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	restores := 0
	for run := 0; run < 50; run++ {
		evs, load := randomLog(t, r)
		whole, err := foldWith(evs, load).Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		again, _ := foldWith(evs, load).Snapshot()
		if !bytes.Equal(whole, again) {
			t.Fatalf("run %d: fold is not deterministic", run)
		}
		for cut := 0; cut <= len(evs); cut++ {
			snap, err := foldWith(evs[:cut], load).Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			e, err := Load(snap)
			if err != nil {
				t.Fatalf("run %d cut %d: load: %v", run, cut, err)
			}
			for _, ev := range evs[cut:] {
				if e, _, err = Fold(t.Context(), e, ev, load); err != nil {
					t.Fatalf("run %d cut %d: %v", run, cut, err)
				}
			}
			got, _ := e.Snapshot()
			if !bytes.Equal(got, whole) {
				t.Fatalf("run %d cut %d/%d: snapshot+tail differs from the whole fold:\n got %s\nwant %s", run, cut, len(evs), got, whole)
			}
		}
		for _, ev := range evs {
			if _, ok := ev.Data.(*events.ExperimentRestored); ok {
				restores++
			}
		}
	}
	if restores == 0 {
		t.Fatal("no history held a restore")
	}
}

func TestFoldIdempotentOnRedelivery(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for run := 0; run < 50; run++ {
		evs, load := randomLog(t, r)
		once, _ := foldWith(evs, load).Snapshot()
		e := foldWith(evs, load)
		for _, ev := range evs { // the whole log delivered a second time
			e, _, _ = Fold(t.Context(), e, ev, load)
		}
		twice, _ := e.Snapshot()
		if !bytes.Equal(once, twice) {
			t.Fatalf("run %d: folding the log twice changed the state", run)
		}
	}
}

// Without a loader, a restore cannot be folded: Fold says so rather than
// going on with the state from before it (what made a restored experiment
// show as INTERRUPTED).
func TestFoldNeedsALoaderForARestore(t *testing.T) {
	l := newLog(t)
	l.restore(2)
	e := New("exp")
	var err error
	for _, ev := range l.evs {
		if e, _, err = Fold(t.Context(), e, ev, nil); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrNoLoader) {
		t.Fatalf("folding a restore without a loader: %v, want ErrNoLoader", err)
	}
	if e = foldWith(l.evs, l.load); e.Status != ExperimentRunning || e.Run != 2 {
		t.Fatalf("with the loader: %s run %d, want RUNNING run 2", e.Status, e.Run)
	}
}

func TestLoadRejectsDamage(t *testing.T) {
	l := newLog(t)
	l.create("t1", 0)
	good, err := fold(l.evs).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", good[:len(good)/2], "not valid JSON"},
		{"edited", bytes.Replace(good, []byte(`"x":0`), []byte(`"x":1`), 1), "checksum mismatch"},
		{"wrong version", bytes.Replace(good, []byte(`"schema_version":1`), []byte(`"schema_version":99`), 1), "schema_version 99"},
		{"not a state file", []byte(`{"hello":"world"}`), `field "format"`},
		{"empty", nil, "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.data)
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
				t.Fatalf("Load: got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := Load(good); err != nil {
		t.Fatalf("Load(good): %v", err)
	}
}

// A checkpoint and its result are one report: a runner that dies after
// trial.checkpointed and before the trial.reported of the same iteration
// loses neither. The checkpoint's result counts, and the result event that
// follows it, when it comes, is the same result once.
func TestCheckpointCarriesItsResult(t *testing.T) {
	checkpointed := func(l *log, attempt, it, index int) {
		l.add(events.WriterRunner, &events.TrialCheckpointed{TrialID: "a", Attempt: attempt, Checkpoint: events.CheckpointRef{
			Name: fmt.Sprintf("checkpoint_%06d", index), Index: index, Iteration: it, Size: 1, Digest: "sha256:" + strings.Repeat("0", 64),
			Metrics: map[string]any{"training_iteration": it, "loss": float64(it), "checkpoint_dir_name": fmt.Sprintf("checkpoint_%06d", index)},
		}})
	}
	tests := []struct {
		name        string
		then        func(l *log)
		wantResults int
	}{
		{"the runner died before the result", func(*log) {}, 2},
		{"the result followed", func(l *log) { l.report("a", 1, 2, 2) }, 2},
		{"the next attempt resumes after it", func(l *log) { l.start("a", 2); l.report("a", 2, 3, 3) }, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLog(t)
			l.create("a", 0)
			l.start("a", 1)
			l.report("a", 1, 1, 1)
			checkpointed(l, 1, 2, 0)
			tc.then(l)
			tr := fold(l.evs).Trials["a"]
			if tr.NumResults != tc.wantResults || tr.Iteration != tc.wantResults {
				t.Fatalf("%d results up to iteration %d, want %d", tr.NumResults, tr.Iteration, tc.wantResults)
			}
			if c := tr.LatestCheckpoint(); c == nil || c.Iteration != 2 {
				t.Fatalf("latest checkpoint %+v, want the one at iteration 2", c)
			}
			if got := tr.LastResult["checkpoint_dir_name"]; tc.wantResults == 2 && got != "checkpoint_000000" {
				t.Fatalf("last result %v, want the checkpoint's", tr.LastResult)
			}
		})
	}
}

// A restored run's time budget is what the earlier runs left: each run
// counts from its start to its last event, and the time between runs
// does not count.
func TestRunsAddUpTheirTime(t *testing.T) {
	l := newLog(t) // run 1 starts at +2 s
	l.create("a", 0)
	l.start("a", 1)
	l.report("a", 1, 1, 0.5) // the run's last event, at +6 s
	e := fold(l.evs)
	if got := e.Elapsed(e.StartTime.Add(4 * time.Second)); got != 4*time.Second {
		t.Fatalf("run 1 elapsed %v, want 4s", got)
	}
	e.Status = ExperimentPending // as a restore leaves it
	l.when = l.when.Add(time.Hour)
	e.apply(l.add(events.WriterController, &events.ExperimentStarted{Run: 2, Session: "2026-01-02_04-04-11", Seed: 1, TrialIDPrefix: "abcde", NumTrials: 2, StoragePath: "/tmp/x"}))
	if e.RanBefore != 4*time.Second {
		t.Fatalf("RanBefore %v after run 1 ran from +2s to +6s, want 4s", e.RanBefore)
	}
	if got := e.Elapsed(e.StartTime.Add(10 * time.Second)); got != 14*time.Second {
		t.Fatalf("10s into run 2: elapsed %v, want 14s", got)
	}
}

// A retry that could not fetch the trial's newest checkpoints (their
// staged bytes lost, or lied about) resumes from an older one and says so
// in trial.started: the newer ones are no longer the trial's, and its own
// checkpoints, numbered on from the one it resumed from, count.
func TestStartFromAnOlderCheckpointDropsTheNewerOnes(t *testing.T) {
	checkpointed := func(l *log, attempt, index int) {
		name := events.CheckpointName(index)
		l.add(events.WriterRunner, &events.TrialCheckpointed{TrialID: "a", Attempt: attempt, Checkpoint: events.CheckpointRef{
			Name: name, Index: index, Iteration: index, Size: 1, Digest: "sha256:" + strings.Repeat("0", 64),
			Object:  events.CheckpointObject("a", attempt, name),
			Metrics: map[string]any{"training_iteration": index, "checkpoint_dir_name": name},
		}})
	}
	l := newLog(t)
	l.create("a", 0)
	l.start("a", 1)
	for i := 1; i <= 3; i++ {
		checkpointed(l, 1, i)
	}
	l.add(events.WriterRunner, &events.TrialFailed{TrialID: "a", Attempt: 1, Cause: events.CauseError, Error: "boom", Counted: true})
	l.add(events.WriterRunner, &events.TrialStarted{TrialID: "a", Attempt: 2, Runner: "r1", RestoredFrom: events.CheckpointName(1)})
	tr := fold(l.evs).Trials["a"]
	if c := tr.LatestCheckpoint(); c == nil || c.Name != events.CheckpointName(1) {
		t.Fatalf("latest checkpoint %+v after a start from checkpoint_000001, want checkpoint_000001", c)
	}
	checkpointed(l, 2, 2)
	tr = fold(l.evs).Trials["a"]
	if c := tr.LatestCheckpoint(); c == nil || c.Name != events.CheckpointName(2) || c.Object != events.CheckpointObject("a", 2, c.Name) {
		t.Fatalf("latest checkpoint %+v, want attempt 2's checkpoint_000002", c)
	}
	if len(tr.Dropped) != 0 {
		t.Fatalf("dropped %v: a checkpoint of the same name is the trial's, storage must keep it", tr.Dropped)
	}

	// A start from the latest checkpoint, or from one the trial no longer
	// keeps, changes nothing.
	l.add(events.WriterRunner, &events.TrialFailed{TrialID: "a", Attempt: 2, Cause: events.CauseError, Error: "boom", Counted: true})
	l.add(events.WriterRunner, &events.TrialStarted{TrialID: "a", Attempt: 3, Runner: "r1", RestoredFrom: events.CheckpointName(2)})
	l.add(events.WriterRunner, &events.TrialFailed{TrialID: "a", Attempt: 3, Cause: events.CauseError, Error: "boom", Counted: true})
	l.add(events.WriterRunner, &events.TrialStarted{TrialID: "a", Attempt: 4, Runner: "r1", RestoredFrom: events.CheckpointName(9)})
	tr = fold(l.evs).Trials["a"]
	if c := tr.LatestCheckpoint(); c == nil || c.Name != events.CheckpointName(2) || tr.NextCheckpoint != 3 {
		t.Fatalf("latest checkpoint %+v, next %d; want checkpoint_000002, next 3", c, tr.NextCheckpoint)
	}
}

// Only the trial's current work starts it. A runner may pull work of the
// run before a restore from that run's consumer, and its start may reach
// the log after the restore: it changes nothing (the trial stays PENDING,
// and is scheduled again). The start of the work scheduled after the
// restore counts.
func TestAStartOfWorkFromBeforeARestoreChangesNothing(t *testing.T) {
	l := newLog(t)
	l.create("a", 0)
	old := l.evs[len(l.evs)-1].Seq // a's trial.scheduled
	l.restore(2)
	l.add(events.WriterRunner, &events.TrialStarted{TrialID: "a", Attempt: 1, Runner: "r1", WorkSeq: old})
	if tr := foldWith(l.evs, l.load).Trials["a"]; tr.Status != events.StatusPending || tr.Attempt != 0 {
		t.Fatalf("after a start of the old run's work: %s attempt %d, want PENDING attempt 0", tr.Status, tr.Attempt)
	}
	l.add(events.WriterController, &events.TrialScheduled{TrialID: "a", TrialName: "fn_a", DirName: "fn_a", Config: map[string]any{}, Trainable: events.Trainable{Name: "fn"}, HeartbeatTimeoutS: 3})
	work := l.evs[len(l.evs)-1].Seq
	l.add(events.WriterRunner, &events.TrialStarted{TrialID: "a", Attempt: 2, Runner: "r1", WorkSeq: old})
	if tr := foldWith(l.evs, l.load).Trials["a"]; tr.Status != events.StatusPending {
		t.Fatalf("a start naming the old work once new work is out: %s, want PENDING", tr.Status)
	}
	l.add(events.WriterRunner, &events.TrialStarted{TrialID: "a", Attempt: 2, Runner: "r2", WorkSeq: work})
	if tr := foldWith(l.evs, l.load).Trials["a"]; tr.Status != events.StatusRunning || tr.Attempt != 2 || tr.Runner != "r2" {
		t.Fatalf("the current work's start: %s attempt %d on %s, want RUNNING attempt 2 on r2", tr.Status, tr.Attempt, tr.Runner)
	}
}

// A retry that resumes from a checkpoint older than the trial's last result
// repeats iterations the trial already has: each iteration is the trial's
// once (result.json holds 1..N once each, in order), and the retry's
// results count again from the first iteration the trial has not had.
// (The trial's checkpoint of iteration 3 is not in this log: the fold
// keeps a start's resume point whether or not it knows the checkpoint.)
func TestARetryDoesNotRepeatIterations(t *testing.T) {
	l := newLog(t)
	l.create("a", 0)
	l.start("a", 1)
	for it := 1; it <= 5; it++ {
		l.report("a", 1, it, float64(it))
	}
	l.add(events.WriterRunner, &events.TrialFailed{TrialID: "a", Attempt: 1, Cause: events.CauseError, Error: "boom", Counted: true})
	l.add(events.WriterRunner, &events.TrialStarted{TrialID: "a", Attempt: 2, Runner: "r1", RestoredFrom: events.CheckpointName(3)})
	for it := 4; it <= 6; it++ {
		l.report("a", 2, it, 10*float64(it))
	}
	tr := fold(l.evs).Trials["a"]
	if tr.NumResults != 6 || tr.Iteration != 6 || tr.Metrics["loss"].Count != 6 || tr.LastResult["loss"] != 60.0 {
		t.Fatalf("results %d, iteration %d, loss count %d, last loss %v; want 6, 6, 6, 60",
			tr.NumResults, tr.Iteration, tr.Metrics["loss"].Count, tr.LastResult["loss"])
	}
}

// A second experiment.submitted of the name, as a new run publishes once
// the old run has left the log (tune.WithNewRun), starts the experiment
// from nothing: a reader that folded the old run ends where a reader of
// the new run's events alone does, and the new run's ids are its own.
func TestFoldANewRunStartsFromNothing(t *testing.T) {
	l := newLog(t)
	l.create("abcde_00000", 0)
	l.start("abcde_00000", 1)
	l.report("abcde_00000", 1, 1, 0.5)
	l.add(events.WriterController, &events.ExperimentInterrupted{Reason: "shutdown"})
	old := len(l.evs)
	l.add(events.WriterClient, &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
		Name: "exp", Trainable: events.Trainable{Name: "fn"}, TuneConfig: events.TuneConfig{NumSamples: 3},
	}})
	l.add(events.WriterController, &events.ExperimentStarted{Run: 1, Session: "2026-01-02_03-05-00", Seed: 2, TrialIDPrefix: "f0e1d", NumTrials: 3, StoragePath: "/tmp/x"})
	l.create("f0e1d_00000", 0)
	all, _ := foldWith(l.evs, l.load).Snapshot()
	fresh, _ := foldWith(l.evs[old:], l.load).Snapshot()
	if !bytes.Equal(all, fresh) {
		t.Errorf("the old run's events changed the new run's state:\n%s\nwant\n%s", all, fresh)
	}
	e := foldWith(l.evs, l.load)
	if e.SubmittedSeq != l.evs[old].Seq || len(e.Trials) != 1 || e.Trials["f0e1d_00000"] == nil || e.Spec.TuneConfig.NumSamples != 3 {
		t.Errorf("state after the new submission: submitted at %d, trials %v, num_samples %d; want %d, [f0e1d_00000], 3",
			e.SubmittedSeq, e.Order, e.Spec.TuneConfig.NumSamples, l.evs[old].Seq)
	}
}

// A trial's RunnerSeq is the last event a runner wrote about it, whether
// the fold took it or not (a report from an attempt fenced off changes
// nothing but is still the last word: a runner comparing the log with the
// work must see it). Other writers' events leave it.
func TestTheFoldKeepsTheTrialsLastRunnerEvent(t *testing.T) {
	l := newLog(t)
	l.create("a", 0)
	l.create("b", 1)
	l.start("a", 1)
	l.report("a", 1, 1, 1)
	l.start("b", 1)
	bStart := l.evs[len(l.evs)-1].Seq
	l.report("a", 7, 2, 1) // a future attempt's: refused by the fold
	last := l.evs[len(l.evs)-1].Seq
	l.add(events.WriterController, &events.TrialStopRequested{TrialID: "a", Reason: "asha"})
	st := fold(l.evs)
	if got := st.Trials["a"].RunnerSeq; got != last {
		t.Errorf("a's RunnerSeq %d, want %d: its last runner event, the refused report", got, last)
	}
	if got := st.Trials["b"].RunnerSeq; got != bStart {
		t.Errorf("b's RunnerSeq %d, want %d: its start", got, bStart)
	}
}
