package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/search"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/services/restorer"
	"github.com/tunejet/tunejet/tune"
)

// Restore sources of BenchmarkRestore.
const (
	// fromLog: the log holds the whole history; storage holds no snapshot.
	fromLog = "log"
	// fromSnapshotTail: the log holds the whole history and storage holds
	// a snapshot taken TUNEJET_BENCH_RESTORE_TAIL events before its end: a
	// restore needs to fold only the tail.
	fromSnapshotTail = "snapshot+tail"
	// fromSnapshot: the log lost the experiment (a new NATS store); storage
	// holds a snapshot of the whole history.
	fromSnapshot = "snapshot"
)

// BenchmarkRestore measures how long an interrupted experiment takes to
// come back: from the restore request (restorer.RestoreSubject, as `tunejet
// restore` and tune.Restore send it) to the first resumed trial running
// (its trial.started after experiment.restored), with a controller, a
// runner and the restorer running. Histories of 100 and 1,000 trials
// (10,000 with TUNEJET_BENCH_RESTORE_MAX_TRIALS=10000) with
// TUNEJET_BENCH_RESTORE_REPORTS (100) reports each are published directly
// to the log; the last 16 trials were running (with a checkpoint each) when
// the experiment was interrupted; the snapshot+tail source's snapshot is
// TUNEJET_BENCH_RESTORE_TAIL (1000) events older than the log's end.
// Target: ≤ 2 s for 10,000 trials /
// 1,000,000 events restored from a snapshot plus the log tail.
func BenchmarkRestore(b *testing.B) {
	maxTrials := envInt(b, "TUNEJET_BENCH_RESTORE_MAX_TRIALS", 1000, 100)
	for _, n := range []int{100, 1000, 10000} {
		if n > maxTrials {
			continue
		}
		for _, source := range []string{fromLog, fromSnapshotTail, fromSnapshot} {
			b.Run(fmt.Sprintf("trials=%d/%s", n, source), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					restoreRun(b, n, source)
				}
			})
		}
	}
}

// history is a synthetic experiment: what a controller, runners and a
// syncer would have written for n trials of the given number of reports,
// the last unfinished of them still running (each with one checkpoint)
// when the experiment was interrupted.
type history struct {
	exp                 string
	n, reports, running int
	spec                events.ExperimentSpec
	storagePath         string
	start               time.Time
	checkpoints         map[string]events.CheckpointRef // of the running trials
}

func (h *history) trialID(i int) string { return search.TrialID("abcde", i) }

func (h *history) dirName(i int) string {
	return search.TrialDirName("restoree_"+h.trialID(i), h.tag(i), h.start)
}

func (h *history) tag(i int) string { return fmt.Sprintf("%d_x=%.4f", i, h.x(i)) }

func (h *history) x(i int) float64 { return float64(i%997) / 997 }

// runningTrial reports whether trial i was running at the interruption.
func (h *history) runningTrial(i int) bool { return i >= h.n-h.running }

// stageCheckpoints stages one small checkpoint per running trial in the
// Object Store and writes the same files to storage, as the syncer would
// have persisted them.
func (h *history) stageCheckpoints(b *testing.B, js jetstream.JetStream) {
	b.Helper()
	ctx := context.Background()
	obs, err := ckpt.Store(ctx, js, h.exp)
	if err != nil {
		b.Fatal(err)
	}
	root, err := storage.LocalPath(h.storagePath)
	if err != nil {
		b.Fatal(err)
	}
	h.checkpoints = map[string]events.CheckpointRef{}
	for i := h.n - h.running; i < h.n; i++ {
		id, name := h.trialID(i), ckpt.Name(0)
		dir := filepath.Join(root, h.exp, h.dirName(i), name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "step"), []byte(strconv.Itoa(h.reports)), 0o644); err != nil {
			b.Fatal(err)
		}
		object := ckpt.LegacyObjectName(id, name)
		staged, err := ckpt.Stage(ctx, obs, object, dir)
		if err != nil {
			b.Fatal(err)
		}
		h.checkpoints[id] = events.CheckpointRef{Name: name, Index: 0, Object: object, Size: staged.Size, Digest: staged.Digest,
			Iteration: h.reports, Metrics: map[string]any{"loss": 0.5, "training_iteration": h.reports, "checkpoint_dir_name": name}}
	}
}

// dropStaged removes the running trials' staged checkpoints: the NATS store
// that held them is gone.
func (h *history) dropStaged(b *testing.B, js jetstream.JetStream) {
	b.Helper()
	ctx := context.Background()
	obs, err := ckpt.Store(ctx, js, h.exp)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range h.checkpoints {
		if err := obs.Delete(ctx, c.Object); err != nil {
			b.Fatal(err)
		}
	}
}

// generate calls emit with every event of the history, in log order.
func (h *history) generate(emit func(*events.Event)) {
	ev := func(w events.Writer, source string, p events.Payload) {
		emit(events.New(h.exp, w, source, p))
	}
	const (
		client, ctrl, run, sync = "bench/client", "tunejet/controller/bench", "tunejet/runner/bench", "tunejet/syncer/bench"
	)
	ev(events.WriterClient, client, &events.ExperimentSubmitted{Spec: h.spec})
	ev(events.WriterController, ctrl, &events.ExperimentStarted{Run: 1, Session: h.start.UTC().Format("2006-01-02_15-04-05"), Seed: 1,
		TrialIDPrefix: "abcde", NumTrials: h.n, StoragePath: h.spec.RunConfig.StoragePath})
	host, _ := os.Hostname()
	for i := 0; i < h.n; i++ {
		id, dir := h.trialID(i), h.dirName(i)
		config := map[string]any{"x": h.x(i)}
		ev(events.WriterController, ctrl, &events.TrialCreated{TrialID: id, Index: i, TrialName: "restoree_" + id, ExperimentTag: h.tag(i), DirName: dir, Config: config})
		ev(events.WriterController, ctrl, &events.TrialScheduled{TrialID: id, TrialName: "restoree_" + id, DirName: dir, Config: config,
			Trainable: h.spec.Trainable, HeartbeatTimeoutS: 3})
		ev(events.WriterRunner, run, &events.TrialStarted{TrialID: id, Attempt: 1, Runner: "r1", Hostname: host, PID: 4242})
		now := time.Now()
		for it := 1; it <= h.reports; it++ {
			ev(events.WriterRunner, run, &events.TrialReported{TrialID: id, Attempt: 1, Result: map[string]any{
				"loss": h.x(i) / float64(it), "step": it, "done": false,
				"training_iteration": it, "iterations_since_restore": it,
				"time_this_iter_s": 0.01, "time_total_s": 0.01 * float64(it), "time_since_restore": 0.01 * float64(it),
				"timestamp": now.Unix(), "date": now.Format("2006-01-02_15-04-05"),
				"trial_id": id, "hostname": host, "pid": 4242,
			}})
		}
		if c, ok := h.checkpoints[id]; ok && h.runningTrial(i) {
			ev(events.WriterRunner, run, &events.TrialCheckpointed{TrialID: id, Attempt: 1, Checkpoint: c})
			ev(events.WriterSyncer, sync, &events.CheckpointPersisted{TrialID: id, Name: c.Name, Size: c.Size, Digest: c.Digest,
				Path: storage.Join(h.storagePath, h.exp, dir, c.Name)})
			continue
		}
		ev(events.WriterRunner, run, &events.TrialCompleted{TrialID: id, Attempt: 1, Status: events.StatusTerminated, Reason: "finished"})
	}
	ev(events.WriterController, ctrl, &events.ExperimentInterrupted{Reason: "shutdown"})
}

func restoreRun(b *testing.B, n int, source string) {
	b.StopTimer()
	ctx := context.Background()
	reports := envInt(b, "TUNEJET_BENCH_RESTORE_REPORTS", 100, 5)
	tail := envInt(b, "TUNEJET_BENCH_RESTORE_TAIL", 1000, 50)
	exp := "restore"
	storagePath := b.TempDir()
	tuner, err := tune.NewTuner("restoree", tune.WithName(exp),
		tune.WithParamSpace(tune.ParamSpace{"x": tune.Uniform(0, 1)}),
		tune.WithTuneConfig(tune.TuneConfig{NumSamples: n}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: storagePath}))
	if err != nil {
		b.Fatal(err)
	}
	spec, err := tuner.Spec()
	if err != nil {
		b.Fatal(err)
	}
	h := &history{exp: exp, n: n, reports: reports, running: min(16, n), spec: spec, storagePath: storagePath, start: time.Now()}

	emb := startServer(b)
	defer emb.Shutdown()
	nc, err := nats.Connect(emb.URL(), nats.Name("bench-restore"))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	bs, err := bus.New(nc, "bench/restore", logger(b))
	if err != nil {
		b.Fatal(err)
	}
	if err := bs.Provision(ctx); err != nil {
		b.Fatal(err)
	}
	js, err := jetstream.New(nc) // history is published raw, asynchronously
	if err != nil {
		b.Fatal(err)
	}
	log, err := js.Stream(ctx, bus.StreamName) // read raw, behind the services
	if err != nil {
		b.Fatal(err)
	}
	h.stageCheckpoints(b, js)

	// The history: published to the log (log, snapshot+tail) and folded
	// into the snapshot (snapshot+tail, snapshot).
	total := 0
	h.generate(func(*events.Event) { total++ })
	cut := uint64(total) // the snapshot's last sequence
	if source == fromSnapshotTail {
		cut = uint64(max(0, total-tail))
	}
	st := state.New(exp)
	var snap []byte
	seq := uint64(0)
	publish := source != fromSnapshot
	fold := source != fromLog
	built := time.Now()
	var pubErr error
	h.generate(func(ev *events.Event) {
		seq++
		if publish && pubErr == nil {
			pubErr = publishAsync(js, ev)
		}
		if fold && seq <= cut {
			ev.Seq = seq
			st, _, _ = state.Fold(context.Background(), st, ev, nil)
			if seq == cut {
				if snap, err = st.Snapshot(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	if pubErr != nil {
		b.Fatalf("publish the history: %v", pubErr)
	}
	if publish {
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(10 * time.Minute):
			b.Fatalf("publish the history: %d acks outstanding after 10 minutes", js.PublishAsyncPending())
		}
		last, err := bs.LastSeq(ctx, events.ExperimentSubjects(exp))
		if err != nil || last != uint64(total) {
			b.Fatalf("the log holds the history up to %d (%v), want %d events", last, err, total)
		}
	} else {
		h.dropStaged(b, js)
	}
	buildTook := time.Since(built)
	if snap != nil {
		root, err := storage.OpenBucket(ctx, storagePath)
		if err != nil {
			b.Fatal(err)
		}
		key := storage.StateFileName(h.start.UTC().Format("2006-01-02_15-04-05"))
		if err := storage.WriteAtomic(ctx, storage.ExperimentBucket(root, exp), key, snap); err != nil {
			b.Fatal(err)
		}
		if err := root.Close(); err != nil {
			b.Fatal(err)
		}
	}

	// A deployment that was running before the request: the controller
	// follows the interrupted experiment (a cold start replays its log),
	// the runner waits for work.
	started := make(chan *events.TrialStarted, 64)
	sub, err := nc.Subscribe(events.TypeSubjects(exp, events.WriterRunner, events.TypeTrialStarted), func(m *nats.Msg) {
		ev, err := events.Decode(m.Subject, m.Header, m.Data)
		if p, ok := eventData[*events.TrialStarted](ev, err); ok {
			select {
			case started <- p:
			default: // more than the benchmark waits for
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	d := onServer(b, emb)
	defer d.close()
	trainable := func(ctx context.Context, config map[string]any) error {
		<-ctx.Done()
		return ctx.Err()
	}
	coldStart := time.Now()
	d.start("controller", 0, nil)
	d.start("runner", 16, map[string]tune.Trainable{"restoree": trainable})
	d.start("restorer", 0, nil)
	idleAt, ok := caughtUp(ctx, log, time.Duration(total/1000+60)*time.Second)
	if !ok {
		b.Fatalf("the services did not catch up with the log")
	}
	coldTook := idleAt.Sub(coldStart)
	if !waitUntil(ctx, 30*time.Second, func() bool {
		_, err := nc.Request("$SRV.PING.tunejet-restorer", nil, time.Second)
		return err == nil
	}) {
		b.Fatal("the restorer does not answer pings")
	}

	// The caller names the trainable, as a restore from a state file in
	// storage requires (code to run never comes from a file in storage).
	data, err := json.Marshal(restorer.Request{Path: storage.Join(storagePath, exp), Resume: restore.FromFlags(true, false, false),
		Trainable: &events.Trainable{Name: "restoree"}})
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	t0 := time.Now()
	m, err := nc.Request(restorer.RestoreSubject, data, 5*time.Minute)
	t1 := time.Now()
	if err != nil {
		dumpGoroutines(b)
		b.Fatalf("restore request: %v", err)
	}
	var rep restorer.Reply
	if err := json.Unmarshal(m.Data, &rep); err != nil || !rep.OK {
		b.Fatalf("restore: %s (%v)", m.Data, err)
	}
	var first *events.TrialStarted
	select {
	case first = <-started:
	case <-time.After(5 * time.Minute):
		dumpGoroutines(b)
		b.Fatal("no trial.started within 5 minutes of the restore")
	}
	t2 := time.Now()
	b.StopTimer()
	// Correctness: the restore saw the whole history and resumes exactly
	// the running trials, each from its checkpoint, on attempt 2.
	if rep.Counts[events.StatusTerminated] != n-h.running || rep.Counts[events.StatusRunning] != h.running {
		b.Fatalf("restored counts %v; want %d TERMINATED, %d RUNNING", rep.Counts, n-h.running, h.running)
	}
	all := []*events.TrialStarted{first}
	deadline := time.After(2 * time.Minute)
	for len(all) < h.running {
		select {
		case p := <-started:
			all = append(all, p)
		case <-deadline:
			b.Fatalf("%d of %d resumed trials started within 2 minutes", len(all), h.running)
		}
	}
	t3 := time.Now()
	for _, p := range all {
		if !h.runningTrial(indexOf(p.TrialID)) || p.Attempt != 2 || p.RestoredFrom != ckpt.Name(0) {
			b.Fatalf("trial.started %+v: want a trial that was running, attempt 2, restored from %s", p, ckpt.Name(0))
		}
	}

	// A controller started now (a standby, or the one `tunejet restore`
	// starts) folds from the restore on, not the whole history.
	coldAfter, ok := newControllerCatchUp(ctx, b, log, d, exp, time.Duration(total/1000+60)*time.Second)
	if !ok {
		b.Fatal("a controller started after the restore did not catch up with the log")
	}

	// The restorer read what the source offers: the whole log, the
	// snapshot and exactly the tail after it, or the snapshot alone.
	wantRead, wantFolded := map[string]string{fromLog: restorer.ReadLog, fromSnapshotTail: restorer.ReadSnapshotLog, fromSnapshot: restorer.ReadSnapshot}[source], 0
	switch source {
	case fromLog:
		wantFolded = total
	case fromSnapshotTail:
		wantFolded = total - int(cut)
	}
	if rep.Read != wantRead || rep.Folded != wantFolded {
		b.Fatalf("the restorer read %q from %q (seq %d) and folded %d events; want %q and %d", rep.Read, rep.ReadFrom, rep.ReadSeq, rep.Folded, wantRead, wantFolded)
	}

	b.ReportMetric(t2.Sub(t0).Seconds(), "restore_s")
	b.ReportMetric(t1.Sub(t0).Seconds(), "restorer_s")
	b.ReportMetric(t2.Sub(t1).Seconds(), "handoff_s")
	b.ReportMetric(float64(total), "events")
	b.ReportMetric(coldTook.Seconds(), "cold_catchup_s")
	b.ReportMetric(coldAfter.Seconds(), "cold_after_restore_s")
	tailNote := ""
	switch source {
	case fromSnapshotTail:
		tailNote = fmt.Sprintf("; snapshot of %.1f MB at seq %d, tail %d events", float64(len(snap))/1e6, cut, uint64(total)-cut)
	case fromSnapshot:
		tailNote = fmt.Sprintf("; the log lost the experiment, the snapshot of %.1f MB holds all of it", float64(len(snap))/1e6)
	}
	b.ReportMetric(float64(rep.Folded), "folded_events")
	readFrom := ""
	if rep.ReadFrom != "" {
		readFrom = fmt.Sprintf(" from %s at seq %d", rep.ReadFrom, rep.ReadSeq)
	}
	b.Logf("%d trials × %d reports = %d events (built in %v%s); source %q, the restorer read %q%s and folded %d events",
		n, reports, total, buildTook.Round(time.Millisecond), tailNote, rep.Source, rep.Read, readFrom, rep.Folded)
	b.Logf("restore request → first resumed trial.started %v (target ≤ 2s at 10,000 trials from snapshot+tail) = restorer reply %v + controller and runner %v; all %d resumed trials started after %v",
		t2.Sub(t0).Round(time.Millisecond), t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), h.running, t3.Sub(t0).Round(time.Millisecond))
	b.Logf("before the request, the freshly started controller and runner took %v to catch up with the log (what a restore with a cold controller adds)",
		coldTook.Round(time.Millisecond))
	b.Logf("after the restore, a freshly started controller took %v to catch up with the log (it folds from experiment.restored)",
		coldAfter.Round(time.Millisecond))
}

// newControllerCatchUp starts another controller and returns how long it
// took until every consumer it made on the event log, the experiment's
// watch among them, had delivered all its messages.
func newControllerCatchUp(ctx context.Context, b *testing.B, s jetstream.Stream, d *deployment, exp string, within time.Duration) (time.Duration, bool) {
	b.Helper()
	old := map[string]bool{}
	for name := range s.ConsumerNames(ctx).Name() {
		old[name] = true
	}
	filter := events.ExperimentSubjects(exp)
	start := time.Now()
	d.start("controller", 0, nil)
	deadline := start.Add(within)
	for time.Now().Before(deadline) {
		lister := s.ListConsumers(ctx)
		watching, pending := false, false
		for info := range lister.Info() {
			if old[info.Name] {
				continue
			}
			if info.Config.FilterSubject == filter || slices.Equal(info.Config.FilterSubjects, []string{filter}) {
				watching = true
			}
			pending = pending || info.NumPending > 0
		}
		if lister.Err() == nil && watching && !pending {
			return time.Since(start), true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0, false
}

// publishAsync publishes an event without waiting for its ack, waiting
// for the acks in flight first when too many are.
func publishAsync(js jetstream.JetStream, ev *events.Event) error {
	msg, err := bus.ToNATS(ev)
	if err != nil {
		return err
	}
	if js.PublishAsyncPending() >= 2048 {
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(time.Minute):
			return fmt.Errorf("%d acks outstanding after a minute", js.PublishAsyncPending())
		}
	}
	_, err = js.PublishMsgAsync(msg)
	return err
}

// dumpGoroutines writes every goroutine's stack to a file that outlives
// the benchmark, for a restore that hangs.
func dumpGoroutines(b *testing.B) {
	f, err := os.CreateTemp("", "tunejet-bench-restore-goroutines-*.txt")
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup("goroutine").WriteTo(f, 2)
	b.Logf("goroutine stacks: %s", f.Name())
}

// indexOf is the search index of a trial id "<prefix>_<index>".
func indexOf(id string) int {
	n, _ := strconv.Atoi(id[len(id)-5:])
	return n
}

// caughtUp waits until every consumer on the event log has delivered all
// its messages, and stays so for a moment (the services fold what they
// received). It returns when that first happened.
func caughtUp(ctx context.Context, s jetstream.Stream, within time.Duration) (time.Time, bool) {
	idle := func() bool {
		lister := s.ListConsumers(ctx)
		n := 0
		for info := range lister.Info() {
			n++
			if info.NumPending > 0 || info.NumAckPending > 0 {
				return false
			}
		}
		return lister.Err() == nil && n >= 2
	}
	// Poll every 50 ms: each consumer info makes the server count the
	// consumer's pending messages.
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if idle() {
			at := time.Now()
			time.Sleep(300 * time.Millisecond)
			if idle() {
				return at, true
			}
			continue
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Time{}, false
}
