package syncer_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/services/syncer"
)

const (
	wait    = 15 * time.Second
	exp     = "exp"
	session = "2026-01-02_03-04-05"
	trial   = "abcde_00000"
	trialD  = "fn_abcde_00000_0_x=1_2026-01-02_03-04-05"
)

var config = map[string]any{"x": 1.0, "model": map[string]any{"layers": 2.0}}

// script publishes a hand-made event history of experiment "exp", the way
// the controller and a runner would.
type script struct {
	t       testing.TB
	b       *bus.Bus
	storage string
	now     time.Time
	last    uint64 // sequence of the last event published
	// reported is when each iteration was last reported.
	reported map[int]time.Time
}

// begin publishes the experiment's submission, start, and one trial, on a
// storage path in a fresh directory. The experiment's sync_period is the
// default, 300 s.
func begin(t testing.TB, srv *bustest.Server) *script {
	t.Helper()
	return beginAt(t, srv, t.TempDir())
}

// beginAt is begin on the storage path storagePath.
func beginAt(t testing.TB, srv *bustest.Server, storagePath string) *script {
	t.Helper()
	s := &script{t: t, b: srv.Bus("script"), storage: storagePath, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s.add(events.WriterClient, &events.ExperimentSubmitted{Spec: events.ExperimentSpec{
		Name: exp, Trainable: events.Trainable{Name: "fn"}, TuneConfig: events.TuneConfig{NumSamples: 1},
		ParamSpace: map[string]any{"x": map[string]any{"choice": []any{1.0}}, "model": map[string]any{"layers": 2.0}},
	}})
	s.add(events.WriterController, &events.ExperimentStarted{Run: 1, Session: session, Seed: 1, TrialIDPrefix: "abcde", NumTrials: 1, StoragePath: s.storage})
	s.add(events.WriterController, &events.TrialCreated{TrialID: trial, Index: 0, TrialName: "fn_" + trial, ExperimentTag: "0_x=1", DirName: trialD, Config: config})
	s.add(events.WriterController, &events.TrialScheduled{TrialID: trial, TrialName: "fn_" + trial, DirName: trialD, Config: config, Trainable: events.Trainable{Name: "fn"}, HeartbeatTimeoutS: 3})
	return s
}

func (s *script) add(w events.Writer, p events.Payload) *events.Event {
	s.t.Helper()
	s.now = s.now.Add(time.Second)
	ev := s.b.Event(exp, w, p)
	ev.Time = s.now
	seq, err := s.b.Publish(s.t.Context(), ev)
	if err != nil {
		s.t.Fatal(err)
	}
	s.last = seq
	return ev
}

func (s *script) start(attempt int) {
	s.add(events.WriterRunner, &events.TrialStarted{TrialID: trial, Attempt: attempt, Runner: "r1"})
}

func (s *script) report(attempt int, its ...int) {
	for _, it := range its {
		if s.reported == nil {
			s.reported = map[int]time.Time{}
		}
		s.reported[it] = s.now.Add(time.Second) // add's time
		s.add(events.WriterRunner, &events.TrialReported{TrialID: trial, Attempt: attempt, Result: map[string]any{
			"training_iteration": it, "loss": 1 / float64(it), "eval": map[string]any{"acc": float64(it) / 10}, "done": false,
		}})
	}
}

// fail records a counted, retried failure and returns its event.
func (s *script) fail(attempt int, msg string) *events.Event {
	return s.add(events.WriterRunner, &events.TrialFailed{TrialID: trial, Attempt: attempt, Cause: events.CauseError, ErrorType: "Error", Error: msg, Counted: true})
}

func (s *script) end(attempt int) {
	s.add(events.WriterRunner, &events.TrialCompleted{TrialID: trial, Attempt: attempt, Status: events.StatusTerminated, Reason: "finished"})
	s.add(events.WriterController, &events.ExperimentCompleted{Reason: "finished"})
}

// dir is the experiment's directory, for a storage path on a file system.
func (s *script) dir() *storage.Dir {
	s.t.Helper()
	d, err := storage.Open(s.storage, exp)
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

// runSyncer runs a syncer on its own connection until stop is called.
func runSyncer(t testing.TB, srv *bustest.Server) (stop func()) {
	t.Helper()
	return runSyncerWith(t, srv, syncer.Config{Period: 20 * time.Millisecond})
}

func runSyncerWith(t testing.TB, srv *bustest.Server, cfg syncer.Config) (stop func()) {
	t.Helper()
	return runSyncerOn(t, srv.Bus("syncer"), cfg)
}

// runSyncerOn runs a syncer on b (its bus, with its logger) until the
// returned stop, or the test's end.
func runSyncerOn(t testing.TB, b *bus.Bus, cfg syncer.Config) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- syncer.New(b, cfg).Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("syncer: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// finalState waits for the state file to reflect the whole script. (It
// may reflect more: the syncer's own sync.completed events.)
func (s *script) finalState() (*state.Experiment, []byte) {
	s.t.Helper()
	var st *state.Experiment
	var raw []byte
	bustest.Eventually(s.t, wait, "the final experiment state file", func() bool {
		var err error
		raw, err = s.dir().Read(storage.StateFileName(session))
		if err != nil {
			return false
		}
		st, err = state.Load(raw)
		if err != nil {
			s.t.Fatalf("the state file does not load: %v", err)
		}
		return st.Done() && st.LastSeq >= s.last
	})
	return st, raw
}

// lines returns a file's lines, without the trailing newline.
func (s *script) lines(rel string) []string {
	s.t.Helper()
	b, err := s.dir().Read(rel)
	if err != nil {
		s.t.Fatal(err)
	}
	if !bytes.HasSuffix(b, []byte("\n")) {
		s.t.Fatalf("%s does not end with a newline: %q", rel, b)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// iterations reads result.json and checks each line carries the config.
func (s *script) iterations() []int {
	s.t.Helper()
	var its []int
	for i, line := range s.lines(trialD + "/result.json") {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			s.t.Fatalf("result.json line %d: %v", i+1, err)
		}
		if !cmp.Equal(row["config"], config) {
			s.t.Errorf("result.json line %d: config %v, want %v", i+1, row["config"], config)
		}
		its = append(its, int(row["training_iteration"].(float64)))
	}
	return its
}

func TestSyncerWritesRayLayout(t *testing.T) {
	srv := bustest.Start(t)
	runSyncer(t, srv)
	s := begin(t, srv)
	s.start(1)
	s.report(1, 1, 2, 3)
	failure := s.fail(1, "ValueError: boom\n  at train.py:12")
	s.start(2)
	s.report(2, 4, 5)
	s.end(2)

	st, raw := s.finalState()
	// stream_seq is the last event the file reflects: folding the log up
	// to it gives exactly the stored state.
	prefix := state.New(exp)
	for _, ev := range bustest.Log(t, s.b, exp) {
		if ev.Seq <= st.LastSeq {
			prefix, _, _ = state.Fold(t.Context(), prefix, ev, nil)
		}
	}
	if want, err := prefix.Snapshot(); err != nil || !bytes.Equal(raw, want) {
		t.Errorf("the state file at stream_seq %d differs from the fold of the log up to it (%v):\n got %s\nwant %s", st.LastSeq, err, raw, want)
	}
	if !st.Done() || st.Trials[trial].NumResults != 5 || st.Trials[trial].NumFailures != 1 || st.Trials[trial].Status != events.StatusTerminated {
		t.Errorf("state file: done=%v results=%d failures=%d status=%s; want true 5 1 TERMINATED",
			st.Done(), st.Trials[trial].NumResults, st.Trials[trial].NumFailures, st.Trials[trial].Status)
	}

	if its := s.iterations(); !cmp.Equal(its, []int{1, 2, 3, 4, 5}) {
		t.Errorf("result.json iterations %v, want one line per report: [1 2 3 4 5]", its)
	}

	b, err := s.dir().Read(trialD + "/progress.csv")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("progress.csv: %v", err)
	}
	if want := []string{"done", "eval/acc", "loss", "training_iteration"}; len(rows) == 0 || !cmp.Equal(rows[0], want) {
		t.Fatalf("progress.csv header %v, want %v (flattened, without config)", rows, want)
	}
	if len(rows) != 6 || !cmp.Equal(rows[5], []string{"false", "0.5", "0.2", "5"}) {
		t.Errorf("progress.csv rows %v, want a header and 5 rows ending with [false 0.5 0.2 5]", rows)
	}

	params, err := s.dir().Read(trialD + "/params.json")
	if err != nil {
		t.Fatal(err)
	}
	var gotParams map[string]any
	if err := json.Unmarshal(params, &gotParams); err != nil || !cmp.Equal(gotParams, config) {
		t.Errorf("params.json = %s (%v), want %v", params, err, config)
	}

	errTxt, err := s.dir().Read(trialD + "/error.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Failure # 1 (occurred at %s)\nValueError: boom\n  at train.py:12\n", failure.Time.Local().Format("2006-01-02_15-04-05"))
	if string(errTxt) != want {
		t.Errorf("error.txt = %q, want %q", errTxt, want)
	}

	if _, err := s.dir().Read(storage.MarkerFile); err != nil {
		t.Errorf("no %s: %v", storage.MarkerFile, err)
	}

	bustest.Eventually(t, wait, "sync.completed for the final state", func() bool {
		for _, ev := range bustest.Log(t, s.b, exp) {
			if p, ok := ev.Data.(*events.SyncCompleted); ok && p.Seq == st.LastSeq && p.Snapshot == storage.StateFileName(session) {
				return true
			}
		}
		return false
	})
}

func TestSyncerSkipsStaleReports(t *testing.T) {
	srv := bustest.Start(t)
	s := begin(t, srv)
	s.start(1)
	s.report(1, 1)
	s.start(2) // attempt 1's runner was presumed lost
	s.report(1, 2, 3)
	s.report(2, 2)
	s.end(2)
	runSyncer(t, srv)
	s.finalState()
	if its := s.iterations(); !cmp.Equal(its, []int{1, 2}) {
		t.Fatalf("result.json iterations %v, want [1 2]: attempt 1's reports after attempt 2 started are stale", its)
	}
	if rows := s.lines(trialD + "/progress.csv"); len(rows) != 3 {
		t.Fatalf("progress.csv has %d lines, want a header and 2 rows", len(rows))
	}
}

func TestSyncerRestartWritesEachResultOnce(t *testing.T) {
	srv := bustest.Start(t)
	s := begin(t, srv)
	s.start(1)
	s.report(1, 1, 2)
	s.fail(1, "boom")
	s.start(2)

	stop := runSyncer(t, srv)
	s.report(2, 3, 4)
	bustest.Eventually(t, wait, "the first syncer to write 4 results", func() bool {
		b, err := s.dir().Read(trialD + "/result.json")
		return err == nil && bytes.Count(b, []byte("\n")) == 4
	})
	stop()

	s.report(2, 5, 6, 7)
	s.end(2)
	runSyncer(t, srv)
	st, _ := s.finalState()
	if st.Trials[trial].NumResults != 7 {
		t.Fatalf("the state file has %d results, want 7", st.Trials[trial].NumResults)
	}
	if its := s.iterations(); !cmp.Equal(its, []int{1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("result.json iterations %v, want each of 1..7 exactly once", its)
	}
	rows := s.lines(trialD + "/progress.csv")
	if len(rows) != 8 || strings.Count(strings.Join(rows, "\n"), "training_iteration") != 1 {
		t.Errorf("progress.csv has %d lines, want one header and 7 rows:\n%s", len(rows), strings.Join(rows, "\n"))
	}
	errTxt, err := s.dir().Read(trialD + "/error.txt")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(errTxt), "Failure # "); n != 1 {
		t.Errorf("error.txt has %d failure entries, want 1:\n%s", n, errTxt)
	}
	s.checkTensorBoard([]int{1, 2, 3, 4, 5, 6, 7}, true)
	// Nothing but the layout's files: no temporary files.
	if names, want := s.trialDirNames(), []string{"error.txt", "events.out.tfevents.*", "params.json", "progress.csv", "result.json"}; !cmp.Equal(names, want) {
		t.Errorf("trial dir holds %v, want %v", names, want)
	}
}

// TestSyncerUploadsFinishedTrialsAtOnce: a trial's result files are final
// when it ends, so they reach storage then, not at the next periodic sync
// (an hour away here) nor only with the experiment's final sync; the
// final sync then writes each result once.
func TestSyncerUploadsFinishedTrialsAtOnce(t *testing.T) {
	srv := bustest.Start(t)
	runSyncerWith(t, srv, syncer.Config{Period: time.Hour})
	s := begin(t, srv)
	s.start(1)
	s.report(1, 1, 2, 3)
	s.add(events.WriterRunner, &events.TrialCompleted{TrialID: trial, Attempt: 1, Status: events.StatusTerminated, Reason: "finished"})
	bustest.Eventually(t, wait, "the finished trial's result files in storage", func() bool {
		b, err := s.dir().Read(trialD + "/result.json")
		if err != nil || bytes.Count(b, []byte("\n")) != 3 {
			return false
		}
		_, perr := s.dir().Read(trialD + "/params.json")
		csv, cerr := s.dir().Read(trialD + "/progress.csv")
		return perr == nil && cerr == nil && bytes.Count(csv, []byte("\n")) == 4
	})
	if _, err := s.dir().Read(storage.StateFileName(session)); err == nil {
		t.Fatalf("a state file before any sync: the test no longer shows that the files went ahead of the sync")
	}
	s.add(events.WriterController, &events.ExperimentCompleted{Reason: "finished"})
	st, _ := s.finalState()
	if st.Trials[trial].NumResults != 3 {
		t.Fatalf("the state file has %d results, want 3", st.Trials[trial].NumResults)
	}
	if its := s.iterations(); !cmp.Equal(its, []int{1, 2, 3}) {
		t.Errorf("result.json iterations %v, want [1 2 3]", its)
	}
	if rows := s.lines(trialD + "/progress.csv"); len(rows) != 4 {
		t.Errorf("progress.csv has %d lines, want a header and 3 rows", len(rows))
	}
}

// TestSyncerFollowsAgainWhenItsConsumerIsLost: a consumer can vanish under
// the syncer (deleted by an operator, lost with a node). The syncer
// follows the log again from what it folded, so the experiment still gets
// each result line exactly once and its final state.
func TestSyncerFollowsAgainWhenItsConsumerIsLost(t *testing.T) {
	srv := bustest.Start(t)
	s := begin(t, srv)
	s.start(1)
	runSyncer(t, srv)
	s.report(1, 1, 2, 3)
	js := srv.JetStream() // an operator's, behind the syncer's back
	bustest.CheckFor(t, wait, func() error {
		c, err := js.Consumer(t.Context(), bus.StreamName, "sync_"+exp)
		if err != nil {
			return err
		}
		info, err := c.Info(t.Context())
		if err == nil && info.Delivered.Stream < s.last {
			err = fmt.Errorf("the syncer's consumer read up to %d, want the reports up to %d", info.Delivered.Stream, s.last)
		}
		return err
	})
	if err := js.DeleteConsumer(t.Context(), bus.StreamName, "sync_"+exp); err != nil {
		t.Fatal(err)
	}
	s.report(1, 4, 5)
	s.end(1)
	st, _ := s.finalState()
	if st.Trials[trial].NumResults != 5 {
		t.Fatalf("the state file has %d results, want 5", st.Trials[trial].NumResults)
	}
	if its := s.iterations(); !cmp.Equal(its, []int{1, 2, 3, 4, 5}) {
		t.Errorf("result.json iterations %v, want each of 1..5 exactly once", its)
	}
}

// TestSyncerDoesNotTakeAMissingCopyForPersisted: reads of the Object Store
// may be answered by a NATS replica that has not applied a just-staged
// checkpoint yet. Not finding the staged copy is not having persisted it:
// the syncer tries again until the copy is there, and only then announces
// the checkpoint persisted.
func TestSyncerDoesNotTakeAMissingCopyForPersisted(t *testing.T) {
	srv := bustest.Start(t)
	s := begin(t, srv)
	s.start(1)
	ctx := t.Context()
	obs, err := s.b.Checkpoints(ctx, exp)
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "step"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The event names an object the store does not hold yet; the digest
	// is that of the archive staged later, learnt from a first staging
	// under another name.
	probe, err := ckpt.Stage(ctx, obs, "probe", src)
	if err != nil {
		t.Fatal(err)
	}
	name := ckpt.Name(1)
	object := ckpt.LegacyObjectName(trial, name)
	s.add(events.WriterRunner, &events.TrialCheckpointed{TrialID: trial, Attempt: 1, Checkpoint: events.CheckpointRef{
		Name: name, Index: 1, Object: object, Size: probe.Size, Digest: probe.Digest, Iteration: 1,
	}})
	runSyncerWith(t, srv, syncer.Config{Period: 20 * time.Millisecond, RetryBackoff: time.Millisecond})

	bustest.Eventually(t, wait, "the syncer to announce it could not persist the checkpoint", func() bool {
		return slices.ContainsFunc(bustest.Log(t, s.b, exp), func(ev *events.Event) bool {
			f, ok := ev.Data.(*events.SyncFailed)
			return ok && strings.Contains(f.Operation, name)
		})
	})
	for _, ev := range bustest.Log(t, s.b, exp) {
		if p, ok := ev.Data.(*events.CheckpointPersisted); ok {
			t.Fatalf("checkpoint %s announced persisted before its staged copy exists", p.Name)
		}
	}

	staged, err := ckpt.Stage(ctx, obs, object, src)
	if err != nil {
		t.Fatal(err)
	}
	if staged != probe {
		t.Fatalf("staging the same folder twice gave %+v and %+v", probe, staged)
	}
	bustest.Eventually(t, wait, "the checkpoint to be announced persisted", func() bool {
		return slices.ContainsFunc(bustest.Log(t, s.b, exp), func(ev *events.Event) bool {
			p, ok := ev.Data.(*events.CheckpointPersisted)
			return ok && p.Name == name
		})
	})
	b, err := os.ReadFile(filepath.Join(s.storage, exp, trialD, name, "step"))
	if err != nil || string(b) != "1" {
		t.Fatalf("%s/step in storage: %q, %v; want \"1\"", name, b, err)
	}
}

// TestSyncerWritesEachResultSentTogether: results a runner sent in one
// event are a line of result.json and a row of progress.csv each, and a
// batch repeating results already written adds only the new ones.
func TestSyncerWritesEachResultSentTogether(t *testing.T) {
	srv := bustest.Start(t)
	s := begin(t, srv)
	s.start(1)
	runSyncer(t, srv)
	res := func(it int) map[string]any {
		return map[string]any{"training_iteration": it, "loss": 1 / float64(it), "done": false}
	}
	s.report(1, 1)
	s.add(events.WriterRunner, &events.TrialReported{TrialID: trial, Attempt: 1, Earlier: []map[string]any{res(2), res(3)}, Result: res(4)})
	s.add(events.WriterRunner, &events.TrialReported{TrialID: trial, Attempt: 1, Earlier: []map[string]any{res(3), res(4)}, Result: res(5)})
	s.end(1)
	st, _ := s.finalState()
	if n := st.Trials[trial].NumResults; n != 5 {
		t.Errorf("the state file has %d results, want 5", n)
	}
	if its := s.iterations(); !cmp.Equal(its, []int{1, 2, 3, 4, 5}) {
		t.Errorf("result.json iterations %v, want each of 1..5 once", its)
	}
	if rows := s.lines(trialD + "/progress.csv"); len(rows) != 6 {
		t.Errorf("progress.csv has %d lines, want a header and 5 rows", len(rows))
	}
}
