package syncer_test

import (
	"bytes"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
	"github.com/tunejet/tunejet/internal/tboard/tboardtest"
	"github.com/tunejet/tunejet/services/syncer"
)

// lineCount is how many lines the trial's file rel has, -1 while it is
// missing.
func (s *script) lineCount(rel string) int {
	s.t.Helper()
	b, err := s.dir().Read(trialD + "/" + rel)
	if errors.Is(err, fs.ErrNotExist) {
		return -1
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// waitLines waits until each of the trial's files has the lines want
// gives it.
func (s *script) waitLines(what string, want map[string]int) {
	s.t.Helper()
	bustest.Eventually(s.t, wait, what, func() bool {
		for name, n := range want {
			if s.lineCount(name) != n {
				return false
			}
		}
		return true
	})
}

// storedResults is how many results of the trial the newest state file
// counts, -1 when there is none.
func (s *script) storedResults() int {
	s.t.Helper()
	raw, err := s.dir().Read(storage.StateFileName(session))
	if errors.Is(err, fs.ErrNotExist) {
		return -1
	}
	if err != nil {
		s.t.Fatal(err)
	}
	st, err := state.Load(raw)
	if err != nil {
		s.t.Fatalf("the state file does not load: %v", err)
	}
	if t := st.Trials[trial]; t != nil {
		return t.NumResults
	}
	return 0
}

// TestSyncerWritesResultsAsTheyArriveOnADirectory: on a storage path that
// is a directory (a path or a file:// URL), result.json lines,
// progress.csv rows, error.txt entries and params.json reach the trial's
// folder as the events arrive, while the experiment runs, not at the next
// sync 300 s away; the final sync then leaves each line once.
func TestSyncerWritesResultsAsTheyArriveOnADirectory(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(dir string) string
	}{
		{"path", func(dir string) string { return dir }},
		{"file URL", func(dir string) string { return "file://" + dir }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := bustest.Start(t)
			runSyncerWith(t, srv, syncer.Config{}) // the experiment's sync_period: 300 s
			s := beginAt(t, srv, tc.path(t.TempDir()))
			s.start(1)
			s.report(1, 1, 2)
			s.waitLines("the first two results in result.json and progress.csv",
				map[string]int{storage.ResultFile: 2, storage.ProgressFile: 3})
			s.fail(1, "boom")
			s.start(2)
			s.report(2, 3)
			s.waitLines("the failure in error.txt and the third result",
				map[string]int{storage.ResultFile: 3, storage.ProgressFile: 4, storage.ErrorFile: 2})
			s.waitTensorBoard("the third result in the event file", 3)
			s.checkTensorBoard([]int{1, 2, 3}, false)
			if s.lineCount(storage.ParamsFile) < 0 {
				t.Error("no params.json while the trial runs")
			}
			if n := s.storedResults(); n >= 0 {
				t.Fatalf("a state file counting %d results while the trial runs: a sync ran, so the test does not show the rows going ahead of it", n)
			}

			s.end(2)
			s.finalState()
			if its := s.iterations(); !cmp.Equal(its, []int{1, 2, 3}) {
				t.Errorf("result.json iterations %v, want [1 2 3]", its)
			}
			if rows := s.lines(trialD + "/" + storage.ProgressFile); len(rows) != 4 {
				t.Errorf("progress.csv has %d lines, want a header and 3 rows", len(rows))
			}
			s.checkTensorBoard([]int{1, 2, 3}, true)
			if names, want := s.trialDirNames(), []string{"error.txt", "events.out.tfevents.*", "params.json", "progress.csv", "result.json"}; !cmp.Equal(names, want) {
				t.Errorf("trial dir holds %v, want %v", names, want)
			}
		})
	}
}

// syncerProcessEnv passes the NATS URL to the syncer process
// TestKilledSyncerWritesEachResultOnce starts; syncerWorkDirEnv its work
// directory.
const (
	syncerProcessEnv = "TUNEJET_TEST_SYNCER_NATS"
	syncerWorkDirEnv = "TUNEJET_TEST_SYNCER_WORKDIR"
)

// TestSyncerProcess is the syncer process that
// TestKilledSyncerWritesEachResultOnce kills; it runs only as its child.
func TestSyncerProcess(t *testing.T) {
	url := os.Getenv(syncerProcessEnv)
	if url == "" {
		t.Skip("runs only as the syncer process of TestKilledSyncerWritesEachResultOnce")
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, err := bus.New(nc, "syncer", zerolog.New(os.Stderr).Level(zerolog.InfoLevel))
	if err != nil {
		t.Fatal(err)
	}
	if err := syncer.New(b, syncer.Config{WorkDir: os.Getenv(syncerWorkDirEnv)}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// startSyncerProcess runs a syncer in a process of its own, with the
// experiment's sync_period, until it is killed.
func startSyncerProcess(t *testing.T, srv *bustest.Server) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSyncerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), syncerProcessEnv+"="+srv.URL(), syncerWorkDirEnv+"="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("the syncer process:\n%s", out.String())
		}
	})
	return cmd
}

// TestKilledSyncerWritesEachResultOnce: a syncer process writes result
// lines, progress.csv rows and an error.txt entry to a directory ahead of
// its newest snapshot, and is killed with SIGKILL before any sync. The
// syncer that takes over folds those events again from the snapshot and
// leaves every line in storage exactly once.
func TestKilledSyncerWritesEachResultOnce(t *testing.T) {
	srv := bustest.Start(t)
	s := begin(t, srv)
	s.start(1)
	s.report(1, 1, 2, 3)
	stop := runSyncer(t, srv)
	bustest.Eventually(t, wait, "a snapshot counting the first three results", func() bool { return s.storedResults() == 3 })
	stop()

	killed := startSyncerProcess(t, srv)
	s.fail(1, "boom")
	s.start(2)
	s.report(2, 4, 5)
	s.waitLines("the killed syncer's rows and failure",
		map[string]int{storage.ResultFile: 5, storage.ProgressFile: 6, storage.ErrorFile: 2})
	s.waitTensorBoard("the killed syncer's results in the event file", 5)
	if n := s.storedResults(); n != 3 {
		t.Fatalf("the newest state file counts %d results, want 3: the rows must be ahead of it when the syncer is killed", n)
	}
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()

	s.report(2, 6)
	s.end(2)
	runSyncer(t, srv)
	st, _ := s.finalState()
	if n := st.Trials[trial].NumResults; n != 6 {
		t.Fatalf("the state file has %d results, want 6", n)
	}
	if its := s.iterations(); !cmp.Equal(its, []int{1, 2, 3, 4, 5, 6}) {
		t.Errorf("result.json iterations %v, want each of 1..6 exactly once", its)
	}
	rows := s.lines(trialD + "/" + storage.ProgressFile)
	if len(rows) != 7 || strings.Count(strings.Join(rows, "\n"), "training_iteration") != 1 {
		t.Errorf("progress.csv has %d lines, want one header and 6 rows:\n%s", len(rows), strings.Join(rows, "\n"))
	}
	errTxt, err := s.dir().Read(trialD + "/" + storage.ErrorFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(errTxt), "Failure # "); n != 1 {
		t.Errorf("error.txt has %d failure entries, want 1:\n%s", n, errTxt)
	}
	s.checkTensorBoard([]int{1, 2, 3, 4, 5, 6}, true)
}

// TestSyncerWritesResultsToABucketOnTheSyncPeriod: a bucket gets a
// trial's result files whole, with a sync (or when the trial ends), not an
// object per result: results staged before a checkpoint that storage
// already holds are not in the bucket yet.
func TestSyncerWritesResultsToABucketOnTheSyncPeriod(t *testing.T) {
	srv := bustest.Start(t)
	base := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = base.Close() })
	counted, counter := storagetest.Counting(base)
	sp := registerMem(t, counted)
	runSyncerWith(t, srv, syncer.Config{}) // the experiment's sync_period: 300 s
	s := beginAt(t, srv, sp)
	obs, err := s.b.Checkpoints(t.Context(), exp)
	if err != nil {
		t.Fatal(err)
	}
	object := ckpt.LegacyObjectName(trial, ckpt.Name(1))
	staged, err := ckpt.Stage(t.Context(), obs, object, folder(t, "2"))
	if err != nil {
		t.Fatal(err)
	}
	s.start(1)
	s.report(1, 1, 2)
	s.checkpointed(1, object, staged)
	s.announced("checkpoint_000001 persisted", persistedEvent(ckpt.Name(1)))
	for _, name := range storage.ResultFiles {
		key := exp + "/" + trialD + "/" + name
		if n := counter.Writes(key); n != 0 {
			t.Errorf("%s written %d times before any sync, want 0: a bucket gets result files with the sync", key, n)
		}
	}

	s.report(1, 3)
	s.end(1)
	bustest.Eventually(t, wait, "the final state file in the bucket", func() bool {
		raw, err := storage.ReadAll(t.Context(), base, exp+"/"+storage.StateFileName(session))
		if err != nil {
			return false
		}
		st, err := state.Load(raw)
		return err == nil && st.Done()
	})
	b, err := storage.ReadAll(t.Context(), base, exp+"/"+trialD+"/"+storage.ResultFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != 3 {
		t.Errorf("result.json in the bucket has %d lines, want 3:\n%s", n, b)
	}
	var keys []string
	for obj, err := range storage.Objects(t.Context(), base, &blob.ListOptions{Prefix: exp + "/" + trialD + "/events.out.tfevents."}) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, obj.Key)
	}
	if len(keys) != 1 {
		t.Fatalf("event files in the bucket %v, want one", keys)
	}
	data, err := storage.ReadAll(t.Context(), base, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	s.checkEvents(tboardtest.ReadData(t, data), []int{1, 2, 3}, true)
}

// TestSyncerKeepsItsFilesOverArtifactsOfTheSameName: a trainable's
// artifact named like one of the trial's own files (result.json here)
// does not replace the file the syncer writes in place: the other
// artifacts are copied, and every result still reaches result.json.
func TestSyncerKeepsItsFilesOverArtifactsOfTheSameName(t *testing.T) {
	srv := bustest.Start(t)
	runSyncerWith(t, srv, syncer.Config{}) // the experiment's sync_period: 300 s
	s := begin(t, srv)
	obs, err := s.b.Checkpoints(t.Context(), exp)
	if err != nil {
		t.Fatal(err)
	}
	src := folder(t, "1")
	for name, content := range map[string]string{storage.ResultFile: "not a result\n", "notes.txt": "hello\n"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	object := "artifacts/" + trial + "/1"
	staged, err := ckpt.Stage(t.Context(), obs, object, src)
	if err != nil {
		t.Fatal(err)
	}
	s.start(1)
	s.report(1, 1)
	s.waitLines("the first result", map[string]int{storage.ResultFile: 1})
	s.add(events.WriterRunner, &events.TrialArtifacts{TrialID: trial, Attempt: 1, Object: object, Files: 3, Size: staged.Size, Digest: staged.Digest})
	s.waitLines("the artifacts", map[string]int{"notes.txt": 1})
	s.report(1, 2)
	s.waitLines("the second result", map[string]int{storage.ResultFile: 2})
	if its := s.iterations(); !cmp.Equal(its, []int{1, 2}) {
		t.Errorf("result.json iterations %v, want [1 2]", its)
	}
	s.end(1)
	s.finalState()
	if its := s.iterations(); !cmp.Equal(its, []int{1, 2}) {
		t.Errorf("result.json iterations %v after the final sync, want [1 2]", its)
	}
}

// registerMem serves b at a fresh mem:// URL and returns the URL.
func registerMem(t *testing.T, b *blob.Bucket) string {
	t.Helper()
	u := storagetest.Mem(t)
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	storage.RegisterMem(parsed.Host, b)
	return u
}

// BenchmarkResultRowInPlace measures, on a directory storage path with
// sync_period 300 s, how soon a result reaches progress.csv in storage:
// "latency" publishes one trial.reported at a time and waits for its row
// (ns/op is publish to readable row); "burst" publishes b.N reports and
// waits for the last row (ns/op per row).
func BenchmarkResultRowInPlace(b *testing.B) {
	srv := bustest.Start(b)
	runSyncerWith(b, srv, syncer.Config{}) // the experiment's sync_period: 300 s
	s := begin(b, srv)
	s.start(1)
	it := 1
	s.report(1, it)
	progress := filepath.Join(s.dir().Root, trialD, storage.ProgressFile)
	size := func() int64 {
		info, err := os.Stat(progress)
		if err != nil {
			return 0
		}
		return info.Size()
	}
	// grown waits until progress.csv is larger than from.
	grown := func(from int64) {
		deadline := time.Now().Add(wait)
		for size() <= from {
			if time.Now().After(deadline) {
				b.Fatalf("progress.csv did not grow past %d bytes within %v", from, wait)
			}
			runtime.Gosched()
		}
	}
	grown(0)
	b.Run("latency", func(b *testing.B) {
		for b.Loop() {
			from := size()
			it++
			s.report(1, it)
			grown(from)
		}
	})
	b.Run("burst", func(b *testing.B) {
		// Timed to the last row in storage, not only the publishing.
		first := it + 1
		b.ResetTimer()
		for range b.N {
			it++
			s.report(1, it)
		}
		deadline := time.Now().Add(wait)
		for s.lineCount(storage.ProgressFile) < it+1 { // a header and a row per report
			if time.Now().After(deadline) {
				b.Fatalf("the burst's rows did not reach progress.csv within %v", wait)
			}
			runtime.Gosched()
		}
		b.StopTimer()
		b.ReportMetric(float64(it-first+1)/b.Elapsed().Seconds(), "rows/s")
	})
}
