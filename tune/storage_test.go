package tune_test

// End-to-end storage tests: real nats-server, controller, runner and
// syncer, against every storage backend (local path, file://, mem://, S3
// through gofakes3, GCS through fake-gcs-server) and against counting,
// hanging and failing buckets.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/session"
	"github.com/tunejet/tunejet/internal/state"
	store "github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
	"github.com/tunejet/tunejet/services/controller"
	"github.com/tunejet/tunejet/services/restorer"
	"github.com/tunejet/tunejet/services/runner"
	"github.com/tunejet/tunejet/services/syncer"
	"github.com/tunejet/tunejet/tune"
)

// storageWait bounds every poll of these tests.
const storageWait = 15 * time.Second

// startSyncDeployment is startDeployment (harness_test.go) with the
// syncer's Config given, for short retry backoffs; the syncer stages in
// the test's own directory.
func startSyncDeployment(t *testing.T, slots int, fns map[string]tune.Trainable, sc syncer.Config) *deployment {
	t.Helper()
	srv := bustest.Start(t)
	d := &deployment{srv: srv, bus: srv.Bus("test")}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	reg := map[string]session.Func{}
	for k, v := range fns {
		reg[k] = v
	}
	run := func(f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("service: %v", err)
			}
		}()
	}
	if sc.WorkDir == "" {
		sc.WorkDir = t.TempDir()
	}
	run(controller.New(srv.Bus("controller"), controller.Config{}).Run)
	run(runner.New(srv.Bus("runner"), runner.Config{Slots: slots, Trainables: reg, WorkDir: t.TempDir()}).Run)
	run(syncer.New(srv.Bus("syncer"), sc).Run)
	run(restorer.New(srv.Bus("restorer"), restorer.Config{}).Run)
	t.Cleanup(func() { cancel(); wg.Wait() })
	return d
}

// --- what a trainable leaves behind, and how to read it back ---

// checkpointTree is the checkpoint a trial writes at an iteration: a
// nested folder, an empty file and files that name the iteration.
func checkpointTree(trialID string, iteration int) map[string][]byte {
	weights := make([]byte, 3000)
	for i := range weights {
		weights[i] = byte(i*7 + iteration*13 + len(trialID))
	}
	return map[string][]byte{
		"empty":                     {},
		"iteration.txt":             []byte(strconv.Itoa(iteration) + "\n"),
		"nested/deeper/weights.bin": weights,
		"nested/trial.txt":          []byte(trialID),
	}
}

// writeTree writes files under a new temporary directory and returns it.
func writeTree(files map[string][]byte) (string, error) {
	dir, err := os.MkdirTemp("", "tunejet-ckpt-")
	if err != nil {
		return "", err
	}
	for rel, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// readTree reads every regular file under dir, by slash-separated path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(got, want map[string][]byte) bool {
	if len(got) != len(want) {
		return false
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || !bytes.Equal(g, w) {
			return false
		}
	}
	return true
}

func treeNames(m map[string][]byte) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s (%d bytes)", k, len(v)))
	}
	sort.Strings(out)
	return out
}

func artifactText(trialID string) string { return "artifact of " + trialID + "\n" }

// openStorage opens a storage path as the syncer does, for the test to
// read what is stored.
func openStorage(t *testing.T, storagePath string) *blob.Bucket {
	t.Helper()
	b, err := store.OpenBucket(t.Context(), storagePath)
	if err != nil {
		t.Fatalf("OpenBucket(%q): %v", storagePath, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// keysUnder lists every key under prefix, recursively, sorted.
func keysUnder(t *testing.T, b *blob.Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(t.Context())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("list %q: %v", prefix, err)
		}
		if !obj.IsDir {
			keys = append(keys, obj.Key)
		}
	}
	sort.Strings(keys)
	return keys
}

// checkpointsIn returns the checkpoint folders that hold files under a
// trial's key prefix ("exp/dir/").
func checkpointsIn(t *testing.T, b *blob.Bucket, trialPrefix string) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, k := range keysUnder(t, b, trialPrefix+"checkpoint_") {
		seen[strings.SplitN(strings.TrimPrefix(k, trialPrefix), "/", 2)[0]] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// checkpointDirsOnDisk lists the checkpoint_* folders of a trial
// directory when the storage is a filesystem (ok false otherwise).
func checkpointDirsOnDisk(t *testing.T, storagePath, exp, dir string) (names []string, ok bool) {
	t.Helper()
	root, err := store.LocalPath(storagePath)
	if err != nil {
		return nil, false
	}
	entries, err := os.ReadDir(filepath.Join(root, exp, dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "checkpoint_") {
			names = append(names, e.Name())
		}
	}
	return names, true
}

// resultRows parses result.json (one JSON object per line).
func resultRows(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var rows []map[string]any
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		t.Errorf("result.json does not end with a newline: %q", data)
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("result.json line %d: %v: %q", i+1, err, line)
		}
		rows = append(rows, row)
	}
	return rows
}

func readKey(t *testing.T, b *blob.Bucket, key string) []byte {
	t.Helper()
	data, err := store.ReadAll(t.Context(), b, key)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return data
}

func ckptName(index int) string { return fmt.Sprintf("checkpoint_%06d", index) }

// expectedKept is Ray's retention over a trial's checkpoints, given each
// one's score in reporting order (nil scores: no score attribute), derived
// from §1.F-48/49 rather than replayed: the top k checkpoints by score
// (ties: the newer one ranks better; without scores, the newest k) plus
// the latest, which is never deleted. best is Ray's best_checkpoints:
// the top k, worst to best.
func expectedKept(scores []float64, n, k int) (kept, best []string) {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	if scores != nil {
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(scores[a], scores[b]) })
	}
	top := idx[max(0, n-k):]
	for _, i := range top {
		best = append(best, ckptName(i))
	}
	keep := map[int]bool{n - 1: true}
	for _, i := range top {
		keep[i] = true
	}
	for i := 0; i < n; i++ {
		if keep[i] {
			kept = append(kept, ckptName(i))
		}
	}
	return kept, best
}

func checkpointNames(cs []tune.Checkpoint) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// trialsLog is what the log says about an experiment's trials.
type trialsLog struct {
	dirs        map[string]string                 // by trial id
	reports     map[string][]map[string]any       // current attempt's, in order
	checkpoints map[string][]events.CheckpointRef // current attempt's, in order
	completed   map[string]*events.TrialCompleted // the last completion
	syncFailed  []*events.SyncFailed              // every sync.failed
	attempt     map[string]int                    // the latest attempt started
	deleted     map[string]map[string]bool        // checkpoint.deleted names
	expDone     bool                              // experiment.completed
}

func readTrialsLog(evs []*events.Event) *trialsLog {
	l := &trialsLog{
		dirs: map[string]string{}, reports: map[string][]map[string]any{}, checkpoints: map[string][]events.CheckpointRef{},
		completed: map[string]*events.TrialCompleted{}, attempt: map[string]int{},
		deleted: map[string]map[string]bool{},
	}
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.TrialCreated:
			l.dirs[p.TrialID] = p.DirName
		case *events.TrialStarted:
			if p.Attempt > l.attempt[p.TrialID] {
				l.attempt[p.TrialID] = p.Attempt
				l.reports[p.TrialID] = nil
			}
		case *events.TrialReported:
			if p.Attempt == l.attempt[p.TrialID] {
				l.reports[p.TrialID] = append(l.reports[p.TrialID], p.Results()...)
			}
		case *events.TrialCheckpointed:
			if p.Attempt == l.attempt[p.TrialID] {
				l.checkpoints[p.TrialID] = append(l.checkpoints[p.TrialID], p.Checkpoint)
			}
		case *events.TrialCompleted:
			l.completed[p.TrialID] = p
		case *events.CheckpointDeleted:
			if l.deleted[p.TrialID] == nil {
				l.deleted[p.TrialID] = map[string]bool{}
			}
			l.deleted[p.TrialID][p.Name] = true
		case *events.SyncFailed:
			l.syncFailed = append(l.syncFailed, p)
		case *events.ExperimentCompleted:
			l.expDone = true
		}
	}
	return l
}

// failedOps counts the sync.failed events whose operation starts with op
// and whose error contains text.
func (l *trialsLog) failedOps(op, text string) int {
	n := 0
	for _, f := range l.syncFailed {
		if strings.HasPrefix(f.Operation, op) && strings.Contains(f.Error, text) {
			n++
		}
	}
	return n
}

// --- 1. every backend, end to end ---

// backendScores are the score sequences of the backend suite's trials:
// non-monotonic, so retention keeps something other than the last two,
// with ties (b) where the newer checkpoint ranks better, and chosen so
// that each GetBestResult scope picks a different trial: "all" (best
// single value) a, "last" b, "avg" c.
var backendScores = map[string][]float64{
	"a": {9, 1, 1, 1, 1, 2}, // max 9, last 2, avg 2.5
	"b": {3, 4, 3, 4, 3, 5}, // max 5, last 5, avg 3.67
	"c": {4, 5, 4, 6, 4, 3}, // max 6, last 3, avg 4.33
}

// scoredTrainable reports its sequence's scores with a checkpoint each,
// after writing an artifact into its trial directory.
func scoredTrainable(ctx context.Context, config map[string]any) error {
	info, err := tune.GetTrialInfo(ctx)
	if err != nil {
		return err
	}
	scores, ok := backendScores[fmt.Sprint(config["seq"])]
	if !ok {
		return fmt.Errorf("unknown seq %v", config["seq"])
	}
	if err := os.WriteFile(filepath.Join(info.TrialDir, "artifact.txt"), []byte(artifactText(info.TrialID)), 0o644); err != nil {
		return err
	}
	for i, s := range scores {
		dir, err := writeTree(checkpointTree(info.TrialID, i+1))
		if err != nil {
			return err
		}
		err = tune.Report(ctx, map[string]any{"score": s}, tune.WithCheckpoint(dir))
		os.RemoveAll(dir) // the trainable may delete it as soon as Report returns
		if err != nil {
			return err
		}
	}
	return nil
}

// TestStorageBackends runs one experiment per backend (a local path,
// file://, mem://, S3 through gofakes3, GCS through fake-gcs-server) and
// reads back through the storage URL what Ray's layout promises: the
// results, params, artifacts, exactly the checkpoints retention keeps
// (byte for byte), the marker, one state file, and the best trial by
// each scope.
func TestStorageBackends(t *testing.T) {
	backends := []struct {
		name string
		path func(t *testing.T) string
	}{
		{"local path", func(t *testing.T) string { return t.TempDir() }},
		{"file URL", func(t *testing.T) string { return "file://" + t.TempDir() }},
		{"mem", func(t *testing.T) string { return storagetest.Mem(t) }},
		{"s3", func(t *testing.T) string { return storagetest.S3(t) }},
		{"gcs", func(t *testing.T) string { return storagetest.GCS(t) }},
	}
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			const name = "backends"
			const iterations = 6
			sp := bk.path(t)
			cc := tune.CheckpointConfig{NumToKeep: 2, ScoreAttribute: "score", ScoreOrder: "max"}
			d := startDeployment(t, 3, map[string]tune.Trainable{"scored": scoredTrainable})
			d.fit(t, "scored", tune.WithName(name),
				tune.WithRunConfig(tune.RunConfig{StoragePath: sp, CheckpointConfig: cc,
					SyncConfig: tune.SyncConfig{SyncPeriodS: 0.2, SyncArtifacts: true}}),
				tune.WithParamSpace(tune.ParamSpace{"seq": tune.GridSearch("a", "b", "c")}),
				tune.WithTuneConfig(tune.TuneConfig{Metric: "score", Mode: "max"}))

			ctx := t.Context()
			expPath := store.Join(sp, name)
			g, err := tune.LoadResults(ctx, expPath)
			if err != nil {
				t.Fatalf("LoadResults(%q): %v", expPath, err)
			}
			if g.ExperimentPath != expPath {
				t.Errorf("ExperimentPath = %q, want %q", g.ExperimentPath, expPath)
			}
			if g.Len() != 3 || g.NumTerminated() != 3 || g.NumErrors() != 0 {
				t.Fatalf("loaded %d trials, %d TERMINATED, %d ERROR; want 3, 3, 0", g.Len(), g.NumTerminated(), g.NumErrors())
			}
			lg := readTrialsLog(d.events(t, name))
			// The runner writes the storage itself (route auto), artifacts
			// too: none is staged for the syncer to copy.
			for _, ev := range d.events(t, name) {
				if p, ok := ev.Data.(*events.TrialArtifacts); ok {
					t.Errorf("trial %s staged artifacts (%s) although its runner writes the storage", p.TrialID, p.Object)
				}
			}
			b := openStorage(t, sp)
			exp := name + "/"

			var top []string
			for _, k := range keysUnder(t, b, exp) {
				if !strings.Contains(strings.TrimPrefix(k, exp), "/") {
					top = append(top, strings.TrimPrefix(k, exp))
				}
			}
			var states []string
			hasMarker := false
			for _, k := range top {
				if strings.HasPrefix(k, "experiment_state-") && strings.HasSuffix(k, ".json") {
					states = append(states, k)
				}
				hasMarker = hasMarker || k == store.MarkerFile
			}
			if len(states) != 1 || !hasMarker {
				t.Errorf("the experiment folder holds %v; want %s and exactly one experiment_state-*.json", top, store.MarkerFile)
			}

			for _, r := range g.Results() {
				seq := fmt.Sprint(r.Config["seq"])
				scores := backendScores[seq]
				dir := lg.dirs[r.TrialID]
				if dir == "" {
					t.Fatalf("trial %s is not in the log", r.TrialID)
				}
				prefix := exp + dir + "/"
				if want := store.Join(expPath, dir); r.Path != want {
					t.Errorf("trial %s: Path %q, want %q", r.TrialID, r.Path, want)
				}
				if r.Status != events.StatusTerminated || r.Metrics["training_iteration"] != float64(iterations) {
					t.Errorf("trial %s (%s): %s at iteration %v; want TERMINATED at %d", r.TrialID, seq, r.Status, r.Metrics["training_iteration"], iterations)
				}

				// result.json: every report once, in order.
				rows := resultRows(t, readKey(t, b, prefix+"result.json"))
				if len(rows) != iterations {
					t.Errorf("trial %s: result.json has %d lines, want %d", r.TrialID, len(rows), iterations)
				}
				for i, row := range rows {
					if i < len(scores) && (row["training_iteration"] != float64(i+1) || row["score"] != scores[i] || row["trial_id"] != r.TrialID) {
						t.Errorf("trial %s: result.json line %d: iteration %v score %v trial %v; want %d, %v, %s",
							r.TrialID, i+1, row["training_iteration"], row["score"], row["trial_id"], i+1, scores[i], r.TrialID)
					}
				}
				// progress.csv: a header and one row per report.
				recs, err := csv.NewReader(bytes.NewReader(readKey(t, b, prefix+"progress.csv"))).ReadAll()
				if err != nil {
					t.Errorf("trial %s: progress.csv: %v", r.TrialID, err)
				} else if len(recs) != iterations+1 {
					t.Errorf("trial %s: progress.csv has %d records, want a header and %d rows", r.TrialID, len(recs), iterations)
				} else if col := slices.Index(recs[0], "score"); col < 0 {
					t.Errorf("trial %s: progress.csv header %v has no score column", r.TrialID, recs[0])
				} else {
					for i, rec := range recs[1:] {
						if rec[col] != strconv.FormatFloat(scores[i], 'f', -1, 64) {
							t.Errorf("trial %s: progress.csv row %d has score %q, want %v", r.TrialID, i+1, rec[col], scores[i])
						}
					}
				}
				// params.json: the trial's config.
				var params map[string]any
				if err := json.Unmarshal(readKey(t, b, prefix+"params.json"), &params); err != nil || params["seq"] != seq || len(params) != 1 {
					t.Errorf("trial %s: params.json = %v (%v), want {seq: %s}", r.TrialID, params, err, seq)
				}
				// The artifact the trainable wrote into its trial directory.
				if got, err := store.ReadAll(ctx, b, prefix+"artifact.txt"); err != nil || string(got) != artifactText(r.TrialID) {
					t.Errorf("trial %s: artifact.txt = %q (%v), want %q", r.TrialID, got, err, artifactText(r.TrialID))
				}
				// Nothing else at the top of the trial folder.
				var entries []string
				for _, k := range keysUnder(t, b, prefix) {
					e := strings.SplitN(strings.TrimPrefix(k, prefix), "/", 2)[0]
					if strings.HasPrefix(e, "events.out.tfevents.") {
						e = "events.out.tfevents.*" // the TensorBoard event file
					}
					if !strings.HasPrefix(e, "checkpoint_") && !slices.Contains(entries, e) {
						entries = append(entries, e)
					}
				}
				if want := []string{"artifact.txt", "events.out.tfevents.*", "params.json", "progress.csv", "result.json"}; !slices.Equal(entries, want) {
					t.Errorf("trial %s: the trial folder holds %v besides checkpoints, want %v", r.TrialID, entries, want)
				}

				// Retention: exactly the kept checkpoints are in storage.
				kept, best := expectedKept(scores, iterations, cc.NumToKeep)
				if got := checkpointsIn(t, b, prefix); !slices.Equal(got, kept) {
					t.Errorf("trial %s (%s, scores %v): storage holds %v, want %v (top %d by score plus the latest)",
						r.TrialID, seq, scores, got, kept, cc.NumToKeep)
				}
				// On a filesystem the dropped folders are gone too, as Ray's
				// _delete_fs_path removes them: no empty checkpoint_* left.
				if got, ok := checkpointDirsOnDisk(t, sp, name, dir); ok && !slices.Equal(got, kept) {
					t.Errorf("trial %s: the trial directory on disk holds checkpoint folders %v, want %v", r.TrialID, got, kept)
				}
				if r.Checkpoint == nil || r.Checkpoint.Name != ckptName(iterations-1) {
					t.Errorf("trial %s: Checkpoint %+v, want the latest, %s", r.TrialID, r.Checkpoint, ckptName(iterations-1))
				}
				if got := checkpointNames(r.BestCheckpoints); !slices.Equal(got, best) {
					t.Errorf("trial %s: BestCheckpoints %v, want %v (worst to best)", r.TrialID, got, best)
				}
				// Each kept checkpoint comes back byte for byte.
				downloads := slices.Clone(r.BestCheckpoints)
				if r.Checkpoint != nil {
					downloads = append(downloads, *r.Checkpoint)
				}
				for _, c := range downloads {
					if want := store.Join(r.Path, c.Name); c.Path != want {
						t.Errorf("trial %s: %s has Path %q, want %q", r.TrialID, c.Name, c.Path, want)
					}
					local := filepath.Join(t.TempDir(), c.Name)
					if err := c.Download(ctx, local); err != nil {
						t.Errorf("trial %s: Download %s: %v", r.TrialID, c.Name, err)
						continue
					}
					index, _ := strconv.Atoi(strings.TrimPrefix(c.Name, "checkpoint_"))
					want := checkpointTree(r.TrialID, index+1)
					if got := readTree(t, local); !sameTree(got, want) {
						t.Errorf("trial %s: %s downloaded as %v, want %v", r.TrialID, c.Name, treeNames(got), treeNames(want))
					}
				}
			}

			// Each scope picks its own trial.
			for scope, seq := range map[string]string{"all": "a", "last": "b", "avg": "c"} {
				best, err := g.GetBestResult("", "", scope)
				if err != nil {
					t.Errorf("GetBestResult(scope %s): %v", scope, err)
				} else if best.Config["seq"] != seq {
					t.Errorf("GetBestResult(scope %s) = trial with seq %v, want %s", scope, best.Config["seq"], seq)
				}
			}
		})
	}
}

// --- 2. Ray's retention numbers ---

func fiveCheckpoints(ctx context.Context, config map[string]any) error {
	info, err := tune.GetTrialInfo(ctx)
	if err != nil {
		return err
	}
	for i := 1; i <= 5; i++ {
		dir, err := writeTree(checkpointTree(info.TrialID, i))
		if err != nil {
			return err
		}
		err = tune.Report(ctx, map[string]any{"i": i}, tune.WithCheckpoint(dir))
		os.RemoveAll(dir)
		if err != nil {
			return err
		}
	}
	return nil
}

// TestNumToKeepOverUnscoredCheckpoints: num_to_keep 2 over 5 checkpoints
// without a score attribute leaves the newest two in storage, and the
// log says the others were deleted.
func TestNumToKeepOverUnscoredCheckpoints(t *testing.T) {
	d := startDeployment(t, 1, map[string]tune.Trainable{"five": fiveCheckpoints})
	sp := t.TempDir()
	g := d.fit(t, "five", tune.WithName("keep2"), tune.WithParamSpace(tune.ParamSpace{"x": 1}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: sp, CheckpointConfig: tune.CheckpointConfig{NumToKeep: 2}}))
	r := g.Get(0)
	lg := readTrialsLog(d.events(t, "keep2"))
	b := openStorage(t, sp)
	prefix := "keep2/" + lg.dirs[r.TrialID] + "/"
	want := []string{"checkpoint_000003", "checkpoint_000004"}
	if got := checkpointsIn(t, b, prefix); !slices.Equal(got, want) {
		t.Errorf("storage holds %v, want %v", got, want)
	}
	if got, _ := checkpointDirsOnDisk(t, sp, "keep2", lg.dirs[r.TrialID]); !slices.Equal(got, want) {
		t.Errorf("the trial directory holds checkpoint folders %v, want %v", got, want)
	}
	if kept, _ := expectedKept(nil, 5, 2); !slices.Equal(kept, want) {
		t.Fatalf("the test's own retention rule gives %v, want %v", kept, want)
	}
	if got := checkpointNames(r.BestCheckpoints); !slices.Equal(got, want) {
		t.Errorf("BestCheckpoints %v, want %v", got, want)
	}
	if r.Checkpoint == nil || r.Checkpoint.Name != "checkpoint_000004" {
		t.Errorf("Checkpoint %+v, want checkpoint_000004", r.Checkpoint)
	}
	for i := 0; i < 3; i++ {
		if !lg.deleted[r.TrialID][ckptName(i)] {
			t.Errorf("the log has no checkpoint.deleted for %s", ckptName(i))
		}
	}
	for _, c := range r.BestCheckpoints {
		if lg.deleted[r.TrialID][c.Name] {
			t.Errorf("the log says the kept %s was deleted", c.Name)
		}
		local := t.TempDir()
		if err := c.Download(t.Context(), local); err != nil {
			t.Fatal(err)
		}
		index, _ := strconv.Atoi(strings.TrimPrefix(c.Name, "checkpoint_"))
		if got := readTree(t, local); !sameTree(got, checkpointTree(r.TrialID, index+1)) {
			t.Errorf("%s downloaded as %v", c.Name, treeNames(got))
		}
	}
}

// --- 3. batching ---

// chattyReports is how many results chatty reports, every 10 ms, with a
// checkpoint every 50th.
const chattyReports = 300

func chatty(ctx context.Context, config map[string]any) error {
	info, err := tune.GetTrialInfo(ctx)
	if err != nil {
		return err
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 1; i <= chattyReports; i++ {
		var opts []tune.ReportOption
		dir := ""
		if i%50 == 0 {
			if dir, err = writeTree(checkpointTree(info.TrialID, i)); err != nil {
				return err
			}
			opts = append(opts, tune.WithCheckpoint(dir))
		}
		err := tune.Report(ctx, map[string]any{"i": i}, opts...)
		if dir != "" {
			os.RemoveAll(dir)
		}
		if err != nil {
			return err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// registerMem serves b at a fresh mem:// URL and returns the URL.
func registerMem(t *testing.T, b *blob.Bucket) string {
	t.Helper()
	u := storagetest.Mem(t)
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	store.RegisterMem(parsed.Host, b)
	return u
}

// TestSyncBatchesWrites: a trial reporting 300 times, every 10 ms, with a
// sync_period far longer than the run: no file in storage is written more
// often than once per checkpoint plus a few times for the start and the
// final sync — a count that does not depend on how fast the machine is —
// and result.json still holds every report exactly once.
func TestSyncBatchesWrites(t *testing.T) {
	const period = 3600 // seconds: no sync comes from the period during the run
	base := memblob.OpenBucket(nil)
	t.Cleanup(func() { base.Close() })
	counted, counter := storagetest.Counting(base)
	sp := registerMem(t, counted)

	d := startDeployment(t, 1, map[string]tune.Trainable{"chatty": chatty})
	d.fit(t, "chatty", tune.WithName("batching"), tune.WithParamSpace(tune.ParamSpace{"x": 1}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: sp, SyncConfig: tune.SyncConfig{SyncPeriodS: period}}))
	writes := counter.All()

	lg := readTrialsLog(d.events(t, "batching"))
	if len(lg.reports) != 1 {
		t.Fatalf("the log has %d trials, want 1", len(lg.reports))
	}
	var id string
	for k := range lg.reports {
		id = k
	}
	reports, checkpoints := len(lg.reports[id]), len(lg.checkpoints[id])
	if reports != chattyReports || checkpoints != chattyReports/50 {
		t.Fatalf("the log has %d reports and %d checkpoints, want %d and %d", reports, checkpoints, chattyReports, chattyReports/50)
	}
	const extra = 4 // the first sync, the marker's write, the final sync, an interrupt's
	bound := checkpoints + extra
	t.Logf("%d reports, %d checkpoints: at most %d writes per file; result.json written %d times, the state file %d",
		reports, checkpoints, bound, writes["batching/"+lg.dirs[id]+"/result.json"], writes["batching/"+storageStateKey(writes)])
	resultKey := "batching/" + lg.dirs[id] + "/result.json"
	if writes[resultKey] == 0 {
		t.Errorf("no write of %s counted: %v", resultKey, writes)
	}
	for key, n := range writes {
		if n > bound {
			t.Errorf("%s was written %d times for %d reports, more than %d (%d checkpoints + %d)",
				key, n, reports, bound, checkpoints, extra)
		}
	}
	rows := resultRows(t, readKey(t, base, resultKey))
	if len(rows) != reports {
		t.Errorf("result.json has %d lines, the log %d reports", len(rows), reports)
	}
	for i, row := range rows {
		if i < reports && (row["i"] != lg.reports[id][i]["i"] || row["training_iteration"] != float64(i+1)) {
			t.Errorf("result.json line %d: i %v iteration %v; want the log's report %d (i %v)", i+1, row["i"], row["training_iteration"], i+1, lg.reports[id][i]["i"])
			break
		}
	}
}

// storageStateKey finds the experiment_state-*.json among counted keys.
func storageStateKey(writes map[string]int) string {
	for k := range writes {
		if rel, ok := strings.CutPrefix(k, "batching/"); ok && strings.HasPrefix(rel, "experiment_state-") {
			return rel
		}
	}
	return ""
}

// --- 4. faults ---

// gated reports with a checkpoint every 20 ms until release is closed,
// then reports three more times and returns; "i" numbers the reports.
func gated(release <-chan struct{}) tune.Trainable {
	return func(ctx context.Context, config map[string]any) error {
		info, err := tune.GetTrialInfo(ctx)
		if err != nil {
			return err
		}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		after := -1
		for i := 1; after != 0; i++ {
			if after < 0 {
				select {
				case <-release:
					after = 3
				default:
				}
			}
			if after > 0 {
				after--
			}
			dir, err := writeTree(checkpointTree(info.TrialID, i))
			if err != nil {
				return err
			}
			err = tune.Report(ctx, map[string]any{"i": i}, tune.WithCheckpoint(dir))
			os.RemoveAll(dir)
			if err != nil {
				return err
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
}

// fitAsync runs Fit on the deployment in the background.
func fitAsync(t *testing.T, d *deployment, trainable any, opts ...tune.Option) <-chan error {
	t.Helper()
	tuner, err := tune.NewTuner(trainable, append(opts, d.nats())...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		g, err := tuner.Fit(t.Context())
		if err == nil && g.NumTerminated() != g.Len() {
			err = fmt.Errorf("Fit: %d of %d trials TERMINATED", g.NumTerminated(), g.Len())
		}
		done <- err
	}()
	return done
}

func waitFit(t *testing.T, done <-chan error) {
	t.Helper()
	timer := time.NewTimer(2 * time.Minute)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Fit: %v", err)
		}
	case <-timer.C:
		t.Fatal("Fit did not return within 2 minutes")
	}
}

// waitMarker polls storage until the experiment exp has its marker.
func waitMarker(t *testing.T, base *blob.Bucket, exp string) {
	t.Helper()
	bustest.CheckFor(t, storageWait, func() error {
		ok, err := base.Exists(t.Context(), exp+"/"+store.MarkerFile)
		if err == nil && !ok {
			err = fmt.Errorf("no %s in %s yet", store.MarkerFile, exp)
		}
		return err
	})
}

// waitLog polls the log until cond holds.
func waitLog(t *testing.T, d *deployment, exp, what string, cond func(*trialsLog) bool) *trialsLog {
	t.Helper()
	var lg *trialsLog
	bustest.Eventually(t, storageWait, what, func() bool {
		lg = readTrialsLog(d.events(t, exp))
		return cond(lg)
	})
	return lg
}

// storedEverything reports what storage (read through b) lacks of what
// the log says: every result line of every trial's current attempt, in
// order, and the files of every checkpoint the final state keeps. "" means
// nothing is missing.
func storedEverything(t *testing.T, b *blob.Bucket, exp string, lg *trialsLog) string {
	t.Helper()
	ctx := t.Context()
	key, err := store.NewestStateKey(ctx, store.ExperimentBucket(b, exp))
	if err != nil {
		return "no experiment state: " + err.Error()
	}
	data, err := store.ReadAll(ctx, b, exp+"/"+key)
	if err != nil {
		return err.Error()
	}
	st, err := state.Load(data)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	if !st.Done() {
		return key + " does not show the experiment completed"
	}
	var missing []string
	for id, reports := range lg.reports {
		prefix := exp + "/" + lg.dirs[id] + "/"
		data, err := store.ReadAll(ctx, b, prefix+"result.json")
		if err != nil {
			missing = append(missing, fmt.Sprintf("trial %s: %v", id, err))
			continue
		}
		rows := resultRows(t, data)
		if len(rows) != len(reports) {
			missing = append(missing, fmt.Sprintf("trial %s: result.json has %d lines, the log %d reports", id, len(rows), len(reports)))
			continue
		}
		for i, row := range rows {
			if row["i"] != reports[i]["i"] || row["training_iteration"] != reports[i]["training_iteration"] {
				missing = append(missing, fmt.Sprintf("trial %s: result.json line %d is %v, the log's report %v", id, i+1, row["i"], reports[i]["i"]))
				break
			}
		}
		csvData, err := store.ReadAll(ctx, b, prefix+"progress.csv")
		if err != nil {
			missing = append(missing, fmt.Sprintf("trial %s: %v", id, err))
			continue
		}
		recs, err := csv.NewReader(bytes.NewReader(csvData)).ReadAll()
		if err != nil || len(recs) != len(reports)+1 {
			missing = append(missing, fmt.Sprintf("trial %s: progress.csv has %d records (%v), want %d", id, len(recs), err, len(reports)+1))
		}
		tr := st.Trials[id]
		if tr == nil || len(tr.Checkpoints) == 0 {
			missing = append(missing, fmt.Sprintf("trial %s: no kept checkpoints in %s", id, key))
			continue
		}
		for _, c := range tr.Checkpoints {
			tree := checkpointTree(id, c.Iteration)
			for rel, want := range tree {
				got, err := store.ReadAll(ctx, b, prefix+c.Name+"/"+rel)
				if err != nil || !bytes.Equal(got, want) {
					missing = append(missing, fmt.Sprintf("trial %s: %s/%s (%v)", id, c.Name, rel, err))
				}
			}
		}
	}
	sort.Strings(missing)
	return strings.Join(missing, "\n")
}

// TestHungStorageDoesNotStopTheExperiment: storage that stops answering
// mid-experiment (sync_timeout 0.2 s): syncs fail with Ray's timeout
// message, the trials run on and complete, and once storage answers
// again it gets every result line and every checkpoint.
func TestHungStorageDoesNotStopTheExperiment(t *testing.T) {
	const exp = "hung"
	base := memblob.OpenBucket(nil)
	t.Cleanup(func() { base.Close() })
	faulty, faults := storagetest.Faulty(base)
	sp := registerMem(t, faulty)
	release := make(chan struct{})
	d := startSyncDeployment(t, 2, map[string]tune.Trainable{"gated": gated(release)}, syncer.Config{RetryBackoff: 20 * time.Millisecond})
	// Fit returns without the final sync.
	done := fitAsync(t, d, "gated", tune.WithSyncWait(100*time.Millisecond), tune.WithName(exp), tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1, 2)}),
		// The syncer's persistence of staged checkpoints is what hangs.
		tune.WithRunConfig(tune.RunConfig{StoragePath: sp, SyncConfig: tune.SyncConfig{SyncPeriodS: 0.2, SyncTimeoutS: 0.2},
			CheckpointConfig: tune.CheckpointConfig{Route: events.RouteObjectStore}}))

	waitMarker(t, base, exp)
	faults.HangWrites(true)
	const timeoutText = "did not finish running within the timeout of"
	waitLog(t, d, exp, "syncs of the state and of checkpoints to time out", func(lg *trialsLog) bool {
		return lg.failedOps("sync up experiment", timeoutText) > 0 && lg.failedOps("persist", timeoutText) > 0
	})
	if faults.Hanging() == 0 && len(faults.Released()) == 0 {
		t.Fatal("no write ever hung")
	}
	close(release)
	waitFit(t, done)

	evs := d.events(t, exp)
	lg := readTrialsLog(evs)
	// The trials reported on after storage first failed them.
	var firstFailure uint64
	reportsAfter := 0
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.SyncFailed:
			if firstFailure == 0 {
				firstFailure = ev.Seq
			}
		case *events.TrialReported:
			if firstFailure != 0 {
				reportsAfter += len(p.Results())
			}
		}
	}
	if reportsAfter < 2*3 {
		t.Errorf("%d reports after the first sync.failed, want at least the 3 per trial after the release", reportsAfter)
	}
	if !lg.expDone || len(lg.completed) != 2 {
		t.Fatalf("the log has experiment.completed=%v and %d trial.completed, want true and 2", lg.expDone, len(lg.completed))
	}
	for id, c := range lg.completed {
		if c.Status != events.StatusTerminated {
			t.Errorf("trial %s completed %s, want TERMINATED", id, c.Status)
		}
		if len(lg.reports[id]) < 4 {
			t.Errorf("trial %s reported %d times, want at least 4", id, len(lg.reports[id]))
		}
	}
	// The hang held: storage does not have it all yet.
	if miss := storedEverything(t, base, exp, lg); miss == "" {
		t.Fatal("storage has everything while every write hangs: the hang was not in effect")
	}

	faults.HangWrites(false)
	untilNothingMissing(t, d, exp, "storage to receive everything once it answers again", func() string { return storedEverything(t, base, exp, lg) })
}

// TestFailingStorageLosesNothing: storage that fails writes for a while
// and then recovers: every result line and checkpoint ends up stored.
func TestFailingStorageLosesNothing(t *testing.T) {
	unavailable := errors.New("storage unavailable (injected)")
	t.Run("as the experiment starts", func(t *testing.T) {
		// The first 5 writes fail: every attempt at the marker, and more.
		failingStorage(t, "failstart", func(f *storagetest.Faults) { f.FailWrites(5, unavailable) }, nil)
	})
	t.Run("mid-experiment", func(t *testing.T) {
		// Once the marker is written, writes fail until both a state sync
		// and a checkpoint have failed after all their retries.
		failingStorage(t, "failmid", nil, func(faults *storagetest.Faults, base *blob.Bucket, d *deployment) {
			waitMarker(t, base, "failmid")
			faults.FailWrites(math.MaxInt32, unavailable)
			waitLog(t, d, "failmid", "a state sync and a checkpoint to fail after their retries", func(lg *trialsLog) bool {
				return lg.failedOps("sync up experiment", unavailable.Error()) > 0 && lg.failedOps("persist", unavailable.Error()) > 0
			})
			faults.FailWrites(0, nil)
		})
	})
}

// failingStorage runs two gated trials on a faulty mem:// bucket: before
// (if set) injects faults before Fit; during (if set) runs while the
// trials report. Then the trials end, and storage must come to hold
// everything the log holds.
func failingStorage(t *testing.T, exp string, before func(*storagetest.Faults), during func(*storagetest.Faults, *blob.Bucket, *deployment)) {
	base := memblob.OpenBucket(nil)
	t.Cleanup(func() { base.Close() })
	faulty, faults := storagetest.Faulty(base)
	sp := registerMem(t, faulty)
	if before != nil {
		before(faults)
	}
	release := make(chan struct{})
	d := startSyncDeployment(t, 2, map[string]tune.Trainable{"gated": gated(release)}, syncer.Config{RetryBackoff: 20 * time.Millisecond})
	// Fit does not wait long for the final sync; the test polls storage.
	done := fitAsync(t, d, "gated", tune.WithSyncWait(100*time.Millisecond), tune.WithName(exp), tune.WithParamSpace(tune.ParamSpace{"x": tune.GridSearch(1, 2)}),
		// The syncer's persistence of staged checkpoints is what fails.
		tune.WithRunConfig(tune.RunConfig{StoragePath: sp, SyncConfig: tune.SyncConfig{SyncPeriodS: 0.2, SyncTimeoutS: 5},
			CheckpointConfig: tune.CheckpointConfig{Route: events.RouteObjectStore}}))
	waitLog(t, d, exp, "both trials to report", func(lg *trialsLog) bool {
		n := 0
		for _, r := range lg.reports {
			if len(r) > 0 {
				n++
			}
		}
		return n == 2
	})
	if during != nil {
		during(faults, base, d)
	}
	close(release)
	waitFit(t, done)
	lg := readTrialsLog(d.events(t, exp))
	if len(lg.completed) != 2 {
		t.Fatalf("%d trials completed, want 2", len(lg.completed))
	}
	if len(lg.syncFailed) == 0 {
		t.Errorf("no sync.failed in the log: the injected failures went unnoticed")
	}
	untilNothingMissing(t, d, exp, "storage to hold what the log holds", func() string { return storedEverything(t, base, exp, lg) })
}

// untilNothingMissing polls missing until it returns "", failing the test
// with its last answer and the log's sync failures after storageWait.
func untilNothingMissing(t *testing.T, d *deployment, exp, what string, missing func() string) {
	t.Helper()
	deadline := time.Now().Add(storageWait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		miss := missing()
		if miss == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %v; missing:\n%s\nsync.failed events: %s", what, storageWait, miss, describeFailures(readTrialsLog(d.events(t, exp))))
		}
		<-tick.C
	}
}

// describeFailures summarizes the log's sync.failed events: each distinct
// operation and error once, with a count.
func describeFailures(lg *trialsLog) string {
	counts := map[string]int{}
	for _, f := range lg.syncFailed {
		counts[f.Operation+": "+f.Error]++
	}
	var out []string
	for k, n := range counts {
		out = append(out, fmt.Sprintf("\n  %d× %s", n, k))
	}
	sort.Strings(out)
	return fmt.Sprintf("%d%s", len(lg.syncFailed), strings.Join(out, ""))
}

// TestArtifactsThroughTheObjectStore: with route object_store the runner
// stages artifacts in the Object Store (trial.artifacts) and the syncer
// copies them into the trial's folder, as a runner that cannot write the
// storage does.
func TestArtifactsThroughTheObjectStore(t *testing.T) {
	const name = "staged_artifacts"
	sp := t.TempDir()
	d := startDeployment(t, 3, map[string]tune.Trainable{"scored": scoredTrainable})
	g := d.fit(t, "scored", tune.WithName(name),
		tune.WithRunConfig(tune.RunConfig{StoragePath: sp, CheckpointConfig: tune.CheckpointConfig{Route: events.RouteObjectStore},
			SyncConfig: tune.SyncConfig{SyncPeriodS: 0.2, SyncArtifacts: true}}),
		tune.WithParamSpace(tune.ParamSpace{"seq": tune.GridSearch("a", "b")}))
	staged := map[string]bool{}
	for _, ev := range d.events(t, name) {
		if p, ok := ev.Data.(*events.TrialArtifacts); ok {
			staged[p.TrialID] = true
		}
	}
	for _, r := range g.Results() {
		if !staged[r.TrialID] {
			t.Errorf("trial %s staged no artifacts", r.TrialID)
		}
		got, err := os.ReadFile(filepath.Join(r.Path, "artifact.txt"))
		if err != nil || string(got) != artifactText(r.TrialID) {
			t.Errorf("trial %s: artifact.txt = %q (%v), want %q", r.TrialID, got, err, artifactText(r.TrialID))
		}
	}
}
