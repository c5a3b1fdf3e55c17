package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gocloud.dev/blob"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/ckpt/direct"
	"github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/tune"
)

const mb = 1 << 20

// checkpointSizes are the checkpoint sizes of the checkpoint benchmarks:
// 1 MB, 100 MB and 1 GB, capped by TUNEJET_BENCH_CKPT_MAX_MB (default
// def).
func checkpointSizes(b *testing.B, def int) []int {
	maxMB := envInt(b, "TUNEJET_BENCH_CKPT_MAX_MB", def, 1)
	var out []int
	for _, n := range []int{1, 100, 1024} {
		if n <= maxMB {
			out = append(out, n*mb)
		}
	}
	return out
}

func sizeName(n int) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%dGB", n>>30)
	}
	return fmt.Sprintf("%dMB", n/mb)
}

// reps is how many times each side of a ratio is measured at a size
// (TUNEJET_BENCH_CKPT_REPS): 20 for 1 MB, whose times are short and noisy,
// else 5, so that each median is of at least five; 1 under -short.
func reps(b *testing.B, size int) int {
	def := 5
	if size <= mb {
		def = 20
	}
	return envInt(b, "TUNEJET_BENCH_CKPT_REPS", def, 1)
}

// interleave measures the two sides of a ratio n times each. A first
// round of each is a warm-up whose figures are dropped (keep false): after
// it both sides read the same source from the page cache, and first-use
// costs (a bucket, an Object Store, a code path's first run) fall
// outside. The n rounds that count alternate the order: the system first
// in even rounds, the baseline first in odd ones, so that neither side
// always runs right after the other's writes, and a load that rises or
// falls during the run favours neither. round is 0 for the warm-up, then
// 1…n.
func interleave(n int, system, baseline func(round int, keep bool)) {
	for round := 0; round <= n; round++ {
		keep := round > 0
		if round%2 == 0 {
			system(round, keep)
			baseline(round, keep)
		} else {
			baseline(round, keep)
			system(round, keep)
		}
	}
}

// spread is the range of a set of durations, "min–max", for a log line
// next to its median.
func spread(ds []time.Duration) string {
	d := newDistribution(ds)
	return fmt.Sprintf("%v–%v", short(d.min()), short(d.max()))
}

// ratioRange is the smallest and largest of the rounds' ratios
// baseline/system: how far one round's ratio may fall from the ratio of
// the medians.
func ratioRange(baseline, system []time.Duration) (lo, hi float64) {
	for i := range min(len(baseline), len(system)) {
		r := baseline[i].Seconds() / system[i].Seconds()
		if i == 0 || r < lo {
			lo = r
		}
		if i == 0 || r > hi {
			hi = r
		}
	}
	return lo, hi
}

// reportRatio records a ratio of medians, baseline/system, under unit, and
// the range of the rounds' ratios under unit+"_min" and unit+"_max".
func reportRatio(b *testing.B, unit string, baseline, system []time.Duration) (ratio, lo, hi float64) {
	ratio = median(baseline).Seconds() / median(system).Seconds()
	lo, hi = ratioRange(baseline, system)
	b.ReportMetric(ratio, unit)
	b.ReportMetric(lo, unit+"_min")
	b.ReportMetric(hi, unit+"_max")
	return ratio, lo, hi
}

// checkpointDir writes a checkpoint directory holding one file of size
// random (incompressible) bytes, and returns the directory and the file.
func checkpointDir(b *testing.B, size int) (dir, file string) {
	b.Helper()
	dir = filepath.Join(b.TempDir(), "checkpoint")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	file = filepath.Join(dir, "model.bin")
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.NewChaCha8([32]byte{1, 2, 3})
	if _, err := io.CopyN(f, rng, int64(size)); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return dir, file
}

// copyFile is the baseline: io.Copy of a file to a new file.
func copyFile(src, dst string) error { return copyTo(src, dst, false) }

// copyTo copies src to a new file dst, with fsync before close if durable.
func copyTo(src, dst string, durable bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if durable {
		if err := out.Sync(); err != nil {
			_ = out.Close()
			return err
		}
	}
	return out.Close()
}

func mbps(size int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(size) / mb / d.Seconds()
}

// median of durations.
func median(ds []time.Duration) time.Duration { return newDistribution(ds).median() }

// BenchmarkCheckpointStaging measures how fast a checkpoint directory
// travels through the experiment's JetStream Object Store — ckpt.Stage (a
// runner's tune.Report with a checkpoint) then ckpt.Fetch (the next
// attempt's copy) — against a plain file copy (io.Copy to a new file) of
// the same bytes, measured in the same run after a warm-up of each, in
// alternating order (see interleave). Sizes: 1 MB, 100 MB and 1 GB
// (TUNEJET_BENCH_CKPT_MAX_MB caps them), medians of
// TUNEJET_BENCH_CKPT_REPS repetitions of each side (20, 5, 5), with the
// range of the rounds' ratios beside the ratio of medians. It runs over TCP
// (a deployment's runner) and in process (the embedded default). Target:
// ≥ 0.5 of the copy's throughput.
func BenchmarkCheckpointStaging(b *testing.B) {
	for _, size := range checkpointSizes(b, 1024) {
		for _, inProcess := range []bool{false, true} {
			transport := "tcp"
			if inProcess {
				transport = "inprocess"
			}
			b.Run(sizeName(size)+"/"+transport, func(b *testing.B) { staging(b, size, inProcess) })
		}
	}
}

func staging(b *testing.B, size int, inProcess bool) {
	b.StopTimer()
	ctx := context.Background()
	emb := startServer(b)
	defer emb.Shutdown()
	var nc *nats.Conn
	var err error
	if inProcess {
		nc, err = nats.Connect("", nats.InProcessServer(emb.Server), nats.Name("bench-staging"))
	} else {
		nc, err = nats.Connect(emb.URL(), nats.Name("bench-staging"))
	}
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	obs, err := ckpt.Store(ctx, js, "staging")
	if err != nil {
		b.Fatal(err)
	}
	src, file := checkpointDir(b, size)
	work := b.TempDir()
	n := reps(b, size)
	var copies, synced, raws, stages, fetches, rounds []time.Duration
	var copyCPU, rawCPU, roundCPU []time.Duration // CPU time, less sensitive to a busy machine
	for i := 0; i < b.N; i++ {
		copies, synced, raws, stages, fetches, rounds = nil, nil, nil, nil, nil, nil
		copyCPU, rawCPU, roundCPU = nil, nil, nil
		baseline := func(r int, keep bool) {
			// The baseline (and, for reference, the same copy made durable
			// with fsync, and the bare Object Store).
			dst := filepath.Join(work, fmt.Sprintf("copy-%d", r), "model.bin")
			settle()
			cpu := cpuTime()
			start := time.Now()
			if err := copyFile(file, dst); err != nil {
				b.Fatal(err)
			}
			took, tookCPU := time.Since(start), cpuTime()-cpu
			if err := os.RemoveAll(filepath.Dir(dst)); err != nil {
				b.Fatal(err)
			}
			settle()
			start = time.Now()
			if err := copyFileSync(file, dst); err != nil {
				b.Fatal(err)
			}
			tookSync := time.Since(start)
			if err := os.RemoveAll(filepath.Dir(dst)); err != nil {
				b.Fatal(err)
			}
			settle()
			raw, rcpu, err := rawObjectRoundTrip(ctx, obs, fmt.Sprintf("raw_%d_%d", i, r), file, dst)
			if err != nil {
				b.Fatalf("bare Object Store round trip: %v", err)
			}
			if err := os.RemoveAll(filepath.Dir(dst)); err != nil {
				b.Fatal(err)
			}
			if keep {
				copies, copyCPU = append(copies, took), append(copyCPU, tookCPU)
				synced = append(synced, tookSync)
				raws, rawCPU = append(raws, raw), append(rawCPU, rcpu)
			}
		}
		system := func(r int, keep bool) {
			name := fmt.Sprintf("t_%d/checkpoint_%06d", i, r)
			fetched := filepath.Join(work, fmt.Sprintf("fetch-%d", r))
			settle()
			b.StartTimer()
			cpu := cpuTime()
			start := time.Now()
			staged, err := ckpt.Stage(ctx, obs, name, src)
			mid := time.Now()
			if err == nil {
				err = ckpt.Fetch(ctx, obs, name, staged.Digest, fetched)
			}
			end := time.Now()
			tookCPU := cpuTime() - cpu
			b.StopTimer()
			if err != nil {
				b.Fatalf("Stage + Fetch: %v", err)
			}
			// Correctness: the same bytes came back (Fetch checked the digest).
			if fi, err := os.Stat(filepath.Join(fetched, "model.bin")); err != nil || fi.Size() != int64(size) || staged.Size != int64(size) {
				b.Fatalf("fetched %v (%v), staged %d bytes; want %d", fi, err, staged.Size, size)
			}
			if keep {
				stages, fetches, rounds = append(stages, mid.Sub(start)), append(fetches, end.Sub(mid)), append(rounds, end.Sub(start))
				roundCPU = append(roundCPU, tookCPU)
			}
			if err := os.RemoveAll(fetched); err != nil {
				b.Fatal(err)
			}
			if err := obs.Delete(ctx, name); err != nil {
				b.Fatal(err)
			}
		}
		interleave(n, system, baseline)
	}
	cp, cs, rw, st, fe, rt := median(copies), median(synced), median(raws), median(stages), median(fetches), median(rounds)
	b.SetBytes(int64(size))
	b.ReportMetric(mbps(size, cp), "copy_MB/s")
	b.ReportMetric(mbps(size, cs), "copy_fsync_MB/s")
	b.ReportMetric(mbps(size, st), "stage_MB/s")
	b.ReportMetric(mbps(size, fe), "fetch_MB/s")
	b.ReportMetric(cp.Seconds()/st.Seconds(), "stage/copy")
	b.ReportMetric(cp.Seconds()/fe.Seconds(), "fetch/copy")
	_, lo, hi := reportRatio(b, "roundtrip/copy", copies, rounds)
	b.ReportMetric(cp.Seconds()/rw.Seconds(), "raw_obs_roundtrip/copy")
	b.Logf("%s checkpoint, medians of %d after a warm-up of each, in alternating order: plain copy %v (%.0f MB/s; range %s); Stage %v (%.0f MB/s, %.2f of copy); Fetch %v (%.0f MB/s, %.2f of copy); Stage+Fetch %v (range %s; %.2f of one copy, rounds %.2f–%.2f; target ≥ 0.5)",
		sizeName(size), n, cp.Round(time.Microsecond), mbps(size, cp), spread(copies), st.Round(time.Microsecond), mbps(size, st), cp.Seconds()/st.Seconds(),
		fe.Round(time.Microsecond), mbps(size, fe), cp.Seconds()/fe.Seconds(), rt.Round(time.Microsecond), spread(rounds), cp.Seconds()/rt.Seconds(), lo, hi)
	b.Logf("references: the copy with fsync %v (%.0f MB/s, Stage+Fetch %.2f of it); a bare Object Store Put+Get of the file %v (%.2f of the copy)",
		cs.Round(time.Microsecond), mbps(size, cs), cs.Seconds()/rt.Seconds(), rw.Round(time.Microsecond), cp.Seconds()/rw.Seconds())
	cc, rc, sc := median(copyCPU), median(rawCPU), median(roundCPU)
	b.ReportMetric(float64(sc.Microseconds())/1000, "roundtrip_cpu_ms")
	b.ReportMetric(float64(rc.Microseconds())/1000, "raw_obs_roundtrip_cpu_ms")
	b.Logf("CPU time of the process (client and nats-server), medians: plain copy %v; Stage+Fetch %v; bare Put+Get %v",
		short(cc), short(sc), short(rc))
}

// cpuTime is the CPU time (user + system) the process has used so far: the
// benchmark, its client and its in-process nats-server together. Linux
// accounts it in scheduler ticks, so it is coarse for a 1 MB checkpoint.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// short rounds a duration for a log line: to the microsecond below 10 ms.
func short(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// settle writes dirty pages out (sync(2)) before a timed copy, so that no
// copy pays for the writeback of the one before it: every timed copy
// starts from the same page cache state and lands in it.
func settle() { syscall.Sync() }

// copyFileSync is copyFile made durable: fsync before close.
func copyFileSync(src, dst string) error { return copyTo(src, dst, true) }

// rawObjectRoundTrip puts a file into the Object Store as one object with
// nats.go's Put (its default 128 KB chunks: with larger ones its window of
// 4,000 chunks overruns the server's 128 MB ingest queue on a 1 GB file)
// and gets it back into dst with nats.go's Get: no archive and no digest
// of our own, the bare Object Store.
func rawObjectRoundTrip(ctx context.Context, obs jetstream.ObjectStore, name, src, dst string) (took, cpu time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Hour) // as ckpt: no 5 s default per read
	defer cancel()
	cpu0 := cpuTime()
	start := time.Now()
	in, err := os.Open(src)
	if err != nil {
		return 0, 0, err
	}
	_, err = obs.Put(ctx, jetstream.ObjectMeta{Name: name}, in)
	_ = in.Close()
	if err != nil {
		return 0, 0, err
	}
	r, err := obs.Get(ctx, name)
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, 0, err
	}
	out, err := os.Create(dst)
	if err != nil {
		return 0, 0, err
	}
	if _, err := io.Copy(out, r); err != nil {
		_ = out.Close()
		return 0, 0, err
	}
	if err := out.Close(); err != nil {
		return 0, 0, err
	}
	took, cpu = time.Since(start), cpuTime()-cpu0
	return took, cpu, obs.Delete(ctx, name)
}

// BenchmarkCheckpointPersistence measures how long a checkpoint takes from
// tune.Report(..., tune.WithCheckpoint(dir)) in a trainable to durable in
// storage, on a deployment (the controller, a runner and the syncer on
// their own connections), on both routes: "direct" (checkpoint_config.route
// auto with a runner that reaches the storage: the runner writes the
// folder itself and it is durable with its trial.checkpointed, which is
// stored before Report returns) and "object_store" (staged in the Object
// Store, durable at the syncer's checkpoint.persisted event), for
// 1 MB and 100 MB (1 GB with TUNEJET_BENCH_CKPT_MAX_MB=1024; medians of
// TUNEJET_BENCH_CKPT_REPS repetitions of each side, 20 and 5), on a
// file:// temp dir and on S3 (gofakes3 on loopback in its own process,
// bench/fakes3, through the AWS SDK). The baseline is a plain copy of the
// same bytes to the same place: io.Copy to a new file in the same
// directory tree, or one blob.Bucket.Upload to the same bucket, measured
// in the same run after a warm-up checkpoint and a warm-up copy, in
// alternating order (see interleave). persist/baseline is the ratio of the
// medians; persist/baseline_min and _max the range of the rounds' ratios.
// Target: ≥ 0.5 of the baseline's throughput.
func BenchmarkCheckpointPersistence(b *testing.B) {
	for _, size := range checkpointSizes(b, 100) {
		for _, route := range []string{"direct", events.RouteObjectStore} {
			b.Run(sizeName(size)+"/file/"+route, func(b *testing.B) { persistence(b, size, "file", route) })
			b.Run(sizeName(size)+"/s3/"+route, func(b *testing.B) { persistence(b, size, "s3", route) })
		}
	}
}

// routeKey is checkpoint_config.route for a benchmark's route: "direct"
// is auto with a runner that reaches the storage.
func routeKey(route string) string {
	if route == "direct" {
		return events.RouteAuto
	}
	return route
}

// persisted is what the log says about one checkpoint, by receipt time.
type persistedCkpt struct {
	checkpointed, persisted time.Time
	persistedCPU            time.Duration // the process's CPU time then
}

func persistence(b *testing.B, size int, backend, route string) {
	b.StopTimer()
	ctx := context.Background()
	var storagePath string
	switch backend {
	case "file":
		storagePath = "file://" + b.TempDir()
	case "s3":
		storagePath = startFakeS3(b)
	}
	bkt, err := storage.OpenBucket(ctx, storagePath)
	if err != nil {
		b.Fatal(err)
	}
	defer bkt.Close()
	src, file := checkpointDir(b, size)
	n := reps(b, size)
	settle()

	// The trainable reports n checkpoints and a warm-up one first, each
	// when the benchmark says so (it alternates them with the baseline
	// copies, see interleave) and the one before is persisted.
	type call struct {
		start, end time.Time
		startCPU   time.Duration
		err        error
	}
	calls := make(chan call, 1)
	next := make(chan struct{})
	fn := func(ctx context.Context, config map[string]any) error {
		for r := 0; r <= n; r++ {
			select {
			case <-next:
			case <-ctx.Done():
				return ctx.Err()
			}
			startCPU, start := cpuTime(), time.Now()
			err := tune.Report(ctx, map[string]any{"rep": r}, tune.WithCheckpoint(src))
			calls <- call{start, time.Now(), startCPU, err}
			if err != nil {
				return err
			}
		}
		return nil
	}
	const exp = "persistence"
	d := startDeployment(b, 1, map[string]tune.Trainable{"checkpointer": fn})
	defer d.close()
	b.StartTimer()

	var mu sync.Mutex
	seen := map[string]*persistedCkpt{}
	got := make(chan string, 16)
	nc := d.conn("bench-persistence-watch")
	sub, err := nc.Subscribe(events.Prefix+"."+exp+".>", func(m *nats.Msg) {
		at := time.Now()
		ev, err := events.Decode(m.Subject, m.Header, m.Data)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch p := ev.Data.(type) {
		case *events.TrialCheckpointed:
			c := seen[p.Checkpoint.Name]
			if c == nil {
				c = &persistedCkpt{}
				seen[p.Checkpoint.Name] = c
			}
			c.checkpointed = at
			if p.Checkpoint.Location != "" && c.persisted.IsZero() { // in storage, complete, durable with this event
				c.persisted, c.persistedCPU = at, cpuTime()
				got <- p.Checkpoint.Name
			}
		case *events.CheckpointPersisted:
			c := seen[p.Name]
			if c == nil {
				c = &persistedCkpt{}
				seen[p.Name] = c
			}
			if c.persisted.IsZero() {
				c.persisted, c.persistedCPU = at, cpuTime()
				got <- p.Name
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()

	type fitResult struct {
		g   *tune.ResultGrid
		err error
	}
	fitDone := make(chan fitResult, 1)
	go func() {
		g, _, err := d.tryFit(30*time.Minute, "checkpointer",
			tune.WithName(exp),
			tune.WithParamSpace(tune.ParamSpace{"x": 1}),
			tune.WithRunConfig(tune.RunConfig{StoragePath: storagePath, CheckpointConfig: tune.CheckpointConfig{Route: routeKey(route)}}))
		fitDone <- fitResult{g: g, err: err}
	}()

	var totals, stagesD, persistsD, baselines, syncedBaselines, cpus, baselineCPUs []time.Duration
	system := func(r int, keep bool) {
		settle()
		select {
		case next <- struct{}{}:
		case res := <-fitDone: // the trial ended before its next checkpoint
			errs := ""
			if res.g != nil && res.g.Len() > 0 {
				errs = fmt.Sprint(res.g.Errors())
			}
			b.Fatalf("before checkpoint %d: Fit returned (%v) with the trial's error %q", r, res.err, errs)
		}
		var c call
		select {
		case c = <-calls:
			if c.err != nil {
				b.Fatalf("checkpoint %d: tune.Report after %v: %v", r, c.end.Sub(c.start), c.err)
			}
		case res := <-fitDone:
			b.Fatalf("checkpoint %d: Fit returned first: %v", r, res.err)
		case <-time.After(10 * time.Minute):
			b.Fatalf("checkpoint %d: tune.Report did not return within 10 minutes", r)
		}
		name := ckpt.Name(r)
		select {
		case g := <-got:
			if g != name {
				b.Fatalf("persisted %s, want %s", g, name)
			}
		case <-time.After(10 * time.Minute):
			b.Fatalf("%s: no checkpoint.persisted within 10 minutes", name)
		}
		if !keep {
			return
		}
		mu.Lock()
		pc := *seen[name]
		mu.Unlock()
		totals = append(totals, pc.persisted.Sub(c.start))
		stagesD = append(stagesD, c.end.Sub(c.start))
		persistsD = append(persistsD, pc.persisted.Sub(c.end))
		cpus = append(cpus, pc.persistedCPU-c.startCPU)
	}
	baseline := func(r int, keep bool) {
		// The same bytes to the same place, one plain copy.
		key := fmt.Sprintf("baseline/copy_%06d/model.bin", r)
		settle()
		cpu, start := cpuTime(), time.Now()
		if err := baselineCopy(ctx, bkt, storagePath, file, key); err != nil {
			b.Fatal(err)
		}
		took, tookCPU := time.Since(start), cpuTime()-cpu
		if err := bkt.Delete(ctx, key); err != nil {
			b.Fatal(err)
		}
		if keep {
			baselines, baselineCPUs = append(baselines, took), append(baselineCPUs, tookCPU)
		}
		if dir, err := storage.LocalPath(storagePath); err == nil && dir != "" {
			// For reference: the same copy made durable (fsync), what a
			// checkpoint that survives a power loss would cost.
			settle()
			start = time.Now()
			if err := copyFileSync(file, filepath.Join(dir, filepath.FromSlash(key))); err != nil {
				b.Fatal(err)
			}
			if keep {
				syncedBaselines = append(syncedBaselines, time.Since(start))
			}
			if err := bkt.Delete(ctx, key); err != nil {
				b.Fatal(err)
			}
		}
	}
	interleave(n, system, baseline)
	var res fitResult
	select {
	case res = <-fitDone:
	case <-time.After(10 * time.Minute):
		b.Fatal("Fit did not return")
	}
	if res.err != nil {
		b.Fatal(res.err)
	}
	if res.g.NumTerminated() != 1 {
		b.Fatalf("the trial did not end TERMINATED")
	}
	// Correctness: every checkpoint is in storage, whole.
	rel := lastElem(res.g.Get(0).Path)
	for r := 0; r <= n; r++ {
		key := exp + "/" + rel + "/" + ckpt.Name(r) + "/model.bin"
		attrs, err := bkt.Attributes(ctx, key)
		if err != nil || attrs.Size != int64(size) {
			b.Fatalf("%s in storage: %v, %v; want %d bytes", key, attrs, err, size)
		}
	}
	if size <= 100*mb {
		key := exp + "/" + rel + "/" + ckpt.Name(n) + "/model.bin"
		data, err := bkt.ReadAll(ctx, key)
		want, _ := os.ReadFile(file)
		if err != nil || !bytes.Equal(data, want) {
			b.Fatalf("%s in storage differs from the checkpoint (%v)", key, err)
		}
	}
	tot, st, pe, bl := median(totals), median(stagesD), median(persistsD), median(baselines)
	b.SetBytes(int64(size))
	b.ReportMetric(mbps(size, bl), "baseline_MB/s")
	b.ReportMetric(mbps(size, tot), "persisted_MB/s")
	_, lo, hi := reportRatio(b, "persist/baseline", baselines, totals)
	b.ReportMetric(tot.Seconds(), "report_to_persisted_s")
	b.ReportMetric(st.Seconds()/bl.Seconds(), "report_blocks/baseline")
	b.Logf("%s checkpoint to %s, route %s, medians of %d after a warm-up of each, in alternating order: Report → durable in storage %v (%.0f MB/s; range %s) = Report blocking %v (%.2f× the plain copy) + the syncer persisting it after %v; plain copy to the same place %v (%.0f MB/s; range %s); ratio %.2f, rounds %.2f–%.2f",
		sizeName(size), backend, route, n, short(tot), mbps(size, tot), spread(totals), short(st), st.Seconds()/bl.Seconds(), short(pe), short(bl), mbps(size, bl), spread(baselines), bl.Seconds()/tot.Seconds(), lo, hi)
	if len(syncedBaselines) > 0 {
		bs := median(syncedBaselines)
		b.ReportMetric(bs.Seconds()/tot.Seconds(), "persist/baseline_fsync")
		b.Logf("reference: the plain copy with fsync %v (%.0f MB/s); ratio against it %.2f", short(bs), mbps(size, bs), bs.Seconds()/tot.Seconds())
	}
	cc, bc := median(cpus), median(baselineCPUs)
	b.ReportMetric(float64(cc.Microseconds())/1000, "report_to_persisted_cpu_ms")
	b.Logf("CPU time of the process (every service and the in-process nats-server; not the S3 server, which runs apart), medians: Report → persisted %v; plain copy %v",
		short(cc), short(bc))
}

// baselineCopy writes a file's bytes to storage the plain way: io.Copy to a
// new file for a local storage path, one Upload for a bucket.
func baselineCopy(ctx context.Context, bkt *blob.Bucket, storagePath, file, key string) error {
	if dir, err := storage.LocalPath(storagePath); err == nil && dir != "" {
		return copyFile(file, filepath.Join(dir, filepath.FromSlash(key)))
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return bkt.Upload(ctx, key, f, &blob.WriterOptions{ContentType: "application/octet-stream"})
}

// lastElem is the last element of a path or of a URL's path.
func lastElem(p string) string {
	if u, err := url.Parse(p); err == nil && storage.IsURL(p) {
		p = u.Path
	}
	return path.Base(filepath.ToSlash(p))
}

// BenchmarkCheckpointDirect measures the direct path's copies on their
// own, against the plain ones in the same run, for 1 MB, 100 MB and 1 GB
// (TUNEJET_BENCH_CKPT_MAX_MB caps them; medians of TUNEJET_BENCH_CKPT_REPS):
//
//   - write, file: direct.FileSystem.Write (temporary folder, manifest,
//     rename; no fsync) with the CRC-32C read back after a kernel copy and with the
//     CRC-32C computed while copying through user space, against io.Copy to
//     a new file, with and without fsync;
//   - resume, file: direct.FileSystem.Read (what a runner that reaches the
//     storage does before the trainable starts: the latest checkpoint on
//     its disk, every file checked) against io.Copy from storage;
//   - write and resume, S3 (bench/fakes3 in its own process):
//     direct.BlobStore.Write and direct.ReadBucket against one Upload and one
//     Download of the same file with the same SDK.
func BenchmarkCheckpointDirect(b *testing.B) {
	for _, size := range checkpointSizes(b, 100) {
		b.Run(sizeName(size)+"/file", func(b *testing.B) { directFile(b, size) })
		b.Run(sizeName(size)+"/s3", func(b *testing.B) { directS3(b, size) })
	}
}

func directFile(b *testing.B, size int) {
	b.StopTimer()
	ctx := context.Background()
	src, file := checkpointDir(b, size)
	root := b.TempDir()
	local := b.TempDir()
	n := reps(b, size)
	var plain, plainSync, readBack, onCopy, resume, resumeOnCopy, plainResume []time.Duration
	for i := 0; i < b.N; i++ {
		baseline := func(r int, keep bool) {
			dst := filepath.Join(root, fmt.Sprintf("plain-%d", r), "model.bin")
			settle()
			start := time.Now()
			if err := copyFile(file, dst); err != nil {
				b.Fatal(err)
			}
			took := time.Since(start)
			settle()
			start = time.Now()
			if err := copyFile(dst, filepath.Join(local, "plain-restore", "model.bin")); err != nil {
				b.Fatal(err)
			}
			back := time.Since(start)
			for _, p := range []string{filepath.Dir(dst), filepath.Join(local, "plain-restore")} {
				if err := os.RemoveAll(p); err != nil {
					b.Fatal(err)
				}
			}
			settle()
			start = time.Now()
			if err := copyFileSync(file, dst); err != nil {
				b.Fatal(err)
			}
			tookSync := time.Since(start)
			if err := os.RemoveAll(filepath.Dir(dst)); err != nil {
				b.Fatal(err)
			}
			if keep {
				plain, plainResume, plainSync = append(plain, took), append(plainResume, back), append(plainSync, tookSync)
			}
		}
		system := func(r int, keep bool) {
			for _, whileCopying := range []bool{false, true} {
				d := &direct.FileSystem{Root: root, ChecksumWhileCopying: whileCopying}
				rel := fmt.Sprintf("trial/checkpoint_%06d", r)
				settle()
				b.StartTimer()
				start := time.Now()
				m, err := d.Write(ctx, src, rel, 1)
				took := time.Since(start)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				restored := filepath.Join(local, "restore")
				settle()
				start = time.Now()
				err = d.Read(ctx, rel, m.Digest(), restored)
				back := time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				switch {
				case !keep:
				case whileCopying:
					onCopy, resumeOnCopy = append(onCopy, took), append(resumeOnCopy, back)
				default:
					readBack, resume = append(readBack, took), append(resume, back)
				}
				for _, p := range []string{d.Where(rel), restored} {
					if err := os.RemoveAll(p); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		interleave(n, system, baseline)
	}
	pl, ps, rb, oc, rs, rsc, pr := median(plain), median(plainSync), median(readBack), median(onCopy), median(resume), median(resumeOnCopy), median(plainResume)
	b.SetBytes(int64(size))
	_, wlo, whi := reportRatio(b, "write/copy", plain, readBack)
	b.ReportMetric(ps.Seconds()/rb.Seconds(), "write/copy_fsync")
	b.ReportMetric(pl.Seconds()/oc.Seconds(), "write_crc_on_copy/copy")
	_, rlo, rhi := reportRatio(b, "resume/copy", plainResume, resume)
	b.Logf("%s checkpoint to a folder, medians of %d after a warm-up of each, in alternating order: plain copy %v (%.0f MB/s; range %s), with fsync %v; direct write, CRC read back after a kernel copy %v (range %s; %.2f of the copy, rounds %.2f–%.2f; %.2f of the copy with fsync), CRC while copying %v (%.2f of the copy)",
		sizeName(size), len(plain), short(pl), mbps(size, pl), spread(plain), short(ps), short(rb), spread(readBack), pl.Seconds()/rb.Seconds(), wlo, whi, ps.Seconds()/rb.Seconds(), short(oc), pl.Seconds()/oc.Seconds())
	b.Logf("resume: plain copy from storage %v (%.0f MB/s; range %s); direct read, checked, kernel copy + CRC read back %v (range %s; %.2f of the copy, rounds %.2f–%.2f), CRC while copying %v (%.2f of the copy)",
		short(pr), mbps(size, pr), spread(plainResume), short(rs), spread(resume), pr.Seconds()/rs.Seconds(), rlo, rhi, short(rsc), pr.Seconds()/rsc.Seconds())
}

func directS3(b *testing.B, size int) {
	b.StopTimer()
	ctx := context.Background()
	url := startFakeS3(b)
	bkt, err := storage.OpenBucket(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer bkt.Close()
	d := &direct.BlobStore{B: storage.ExperimentBucket(bkt, "exp"), URL: url}
	src, file := checkpointDir(b, size)
	local := b.TempDir()
	n := reps(b, size)
	var uploads, writes, downloads, reads []time.Duration
	for i := 0; i < b.N; i++ {
		baseline := func(r int, keep bool) {
			key := fmt.Sprintf("baseline/%d/model.bin", r)
			start := time.Now()
			if err := baselineCopy(ctx, bkt, url, file, key); err != nil {
				b.Fatal(err)
			}
			up := time.Since(start)
			dst := filepath.Join(local, "plain", "model.bin")
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				b.Fatal(err)
			}
			start = time.Now()
			f, err := os.Create(dst)
			if err == nil {
				err = bkt.Download(ctx, key, f, nil)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			down := time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			if err := os.RemoveAll(filepath.Dir(dst)); err != nil {
				b.Fatal(err)
			}
			if err := bkt.Delete(ctx, key); err != nil {
				b.Fatal(err)
			}
			if keep {
				uploads, downloads = append(uploads, up), append(downloads, down)
			}
		}
		system := func(r int, keep bool) {
			rel := fmt.Sprintf("trial/checkpoint_%06d", r)
			b.StartTimer()
			start := time.Now()
			m, err := d.Write(ctx, src, rel, 1)
			wrote := time.Since(start)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			restored := filepath.Join(local, "restore")
			start = time.Now()
			if err := d.Read(ctx, rel, m.Digest(), restored); err != nil {
				b.Fatal(err)
			}
			read := time.Since(start)
			if err := os.RemoveAll(restored); err != nil {
				b.Fatal(err)
			}
			if keep {
				writes, reads = append(writes, wrote), append(reads, read)
			}
		}
		interleave(n, system, baseline)
	}
	up, wr, dl, rd := median(uploads), median(writes), median(downloads), median(reads)
	b.SetBytes(int64(size))
	_, wlo, whi := reportRatio(b, "write/upload", uploads, writes)
	_, rlo, rhi := reportRatio(b, "resume/download", downloads, reads)
	b.Logf("%s checkpoint to S3 (fake S3 in its own process), medians of %d after a warm-up of each, in alternating order: plain Upload %v (%.0f MB/s; range %s), direct write (files, then the manifest) %v (range %s; %.2f of the upload, rounds %.2f–%.2f); plain Download %v (range %s), direct read, checked %v (range %s; %.2f of the download, rounds %.2f–%.2f)",
		sizeName(size), len(uploads), short(up), mbps(size, up), spread(uploads), short(wr), spread(writes), up.Seconds()/wr.Seconds(), wlo, whi,
		short(dl), spread(downloads), short(rd), spread(reads), dl.Seconds()/rd.Seconds(), rlo, rhi)
}
