package tune_test

// Checkpoints straight to storage (checkpoint_config.route): end to end
// with a real nats-server, controller, syncer, restorer and runners that
// can or cannot reach the storage.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"gocloud.dev/blob/memblob"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/ckpt/direct"
	"github.com/tunejet/tunejet/internal/session"
	store "github.com/tunejet/tunejet/internal/storage"
	"github.com/tunejet/tunejet/internal/storage/storagetest"
	"github.com/tunejet/tunejet/services/controller"
	"github.com/tunejet/tunejet/services/restorer"
	"github.com/tunejet/tunejet/services/runner"
	"github.com/tunejet/tunejet/services/syncer"
	"github.com/tunejet/tunejet/tune"
)

// routeDeployment is a deployment whose runners the test starts and stops
// itself.
type routeDeployment struct {
	*deployment
	fns map[string]tune.Trainable
	t   *testing.T
}

func startRouteDeployment(t *testing.T, fns map[string]tune.Trainable) *routeDeployment {
	t.Helper()
	srv := bustest.Start(t)
	d := &routeDeployment{deployment: &deployment{srv: srv, bus: srv.Bus("test")}, fns: fns, t: t}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, f := range []func(context.Context) error{
		controller.New(srv.Bus("controller"), controller.Config{}).Run,
		syncer.New(srv.Bus("syncer"), syncer.Config{WorkDir: t.TempDir()}).Run,
		restorer.New(srv.Bus("restorer"), restorer.Config{}).Run,
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("service: %v", err)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return d
}

// blind is a runner's ReachStorage on a host that does not see the
// storage.
func blind(_ context.Context, storagePath, _ string) error {
	return fmt.Errorf("%w: storage_path %q is not visible on this host", store.ErrNotShared, storagePath)
}

// startRunner starts a runner; stop stops it and waits for it to hand its
// trials back.
func (d *routeDeployment) startRunner(name string, reach func(context.Context, string, string) error) (stop func()) {
	reg := map[string]session.Func{}
	for k, v := range d.fns {
		reg[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := runner.New(d.srv.Bus(name), runner.Config{Name: name, CPUs: 2, Trainables: reg, WorkDir: d.t.TempDir(), ReachStorage: reach})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			d.t.Errorf("runner %s: %v", name, err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	d.t.Cleanup(stop)
	return stop
}

// checkpointsOf are the trial.checkpointed events of an experiment's log.
func checkpointsOf(evs []*events.Event) []*events.TrialCheckpointed {
	var out []*events.TrialCheckpointed
	for _, ev := range evs {
		if p, ok := ev.Data.(*events.TrialCheckpointed); ok {
			out = append(out, p)
		}
	}
	return out
}

// stagedObjects lists the experiment's Object Store objects.
func stagedObjects(t *testing.T, d *deployment, exp string) []string {
	t.Helper()
	obs, err := d.srv.JetStream().ObjectStore(t.Context(), ckpt.Bucket(exp))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(t.Context())
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range infos {
		out = append(out, i.Name)
	}
	slices.Sort(out)
	return out
}

// resumer reports iterations 1..4 with a checkpoint each (the checkpoint
// of iteration i holds checkpointTree(trial, i)). The first attempt fails
// after the checkpoint of iteration 2 (with config "damage" set, after it
// changed a file of that checkpoint in storage), or, with config "hold"
// set, waits there until its runner stops. A resumed attempt checks the
// checkpoint it got, and records it in "resumed_from".
func resumer(ctx context.Context, config map[string]any) error {
	info, err := tune.GetTrialInfo(ctx)
	if err != nil {
		return err
	}
	start, resumed := 1, 0
	if dir, _ := tune.GetCheckpoint(ctx); dir != "" {
		got := readTreeErr(dir)
		for i := 1; i <= 4; i++ {
			if sameTree(got, checkpointTree(info.TrialID, i)) {
				resumed = i
			}
		}
		if resumed == 0 {
			return fmt.Errorf("resumed from a checkpoint holding %v, none the trial wrote", treeNames(got))
		}
		start = resumed + 1
	}
	for i := start; i <= 4; i++ {
		dir, err := writeTree(checkpointTree(info.TrialID, i))
		if err != nil {
			return err
		}
		err = tune.Report(ctx, map[string]any{"resumed_from": resumed, "attempt": info.Attempt}, tune.WithCheckpoint(dir))
		os.RemoveAll(dir)
		if err != nil {
			return err
		}
		if sp, _ := config["storage"].(string); sp != "" && config["direct"] == true {
			// Report returned: the folder is complete in storage.
			folder := filepath.Join(sp, "route", filepath.Base(info.TrialDir), events.CheckpointName(i-1))
			if _, err := os.Stat(filepath.Join(folder, direct.ManifestFile)); err != nil {
				return fmt.Errorf("Report returned before its checkpoint was complete in storage: %w", err)
			}
			if config["damage"] == true && info.Attempt == 1 && i == 2 {
				if err := os.WriteFile(filepath.Join(folder, "iteration.txt"), []byte("99"), 0o644); err != nil {
					return err
				}
			}
		}
		if info.Attempt == 1 && i == 2 {
			if config["hold"] == true {
				<-ctx.Done()
				return ctx.Err()
			}
			return errors.New("the first attempt fails after its second checkpoint")
		}
	}
	return nil
}

// readTreeErr is readTree for a trainable (no *testing.T).
func readTreeErr(dir string) map[string][]byte {
	out := map[string][]byte{}
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	})
	return out
}

// routeRows are the training_iteration values of the trial's result.json rows
// and the resumed_from of the last row.
func routeRows(t *testing.T, sp, exp string, g *tune.ResultGrid) (iterations []float64, resumedFrom float64) {
	t.Helper()
	b := openStorage(t, sp)
	r := g.Get(0)
	rows := resultRows(t, readKey(t, b, exp+"/"+trialDirOf(r)+"/result.json"))
	for _, row := range rows {
		it, _ := row["training_iteration"].(float64)
		iterations = append(iterations, it)
	}
	rf, _ := r.Metrics["resumed_from"].(float64)
	return iterations, rf
}

// trialDirOf is the trial's folder name in storage.
func trialDirOf(r *tune.Result) string {
	p := r.Path
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	return p[strings.LastIndexByte(p, '/')+1:]
}

func TestCheckpointsGoStraightToStorage(t *testing.T) {
	for name, path := range map[string]func(t *testing.T) string{
		"folder": func(t *testing.T) string { return t.TempDir() },
		"s3":     func(t *testing.T) string { return storagetest.S3(t) },
	} {
		t.Run(name, func(t *testing.T) {
			sp := path(t)
			d := startRouteDeployment(t, map[string]tune.Trainable{"resumer": resumer})
			var probes atomic.Int32
			d.startRunner("r1", func(ctx context.Context, sp, exp string) error {
				probes.Add(1)
				return store.Reach(ctx, sp, exp)
			})
			g := d.fit(t, "resumer", tune.WithName("route"),
				tune.WithRunConfig(tune.RunConfig{StoragePath: sp, FailureConfig: tune.FailureConfig{MaxFailures: 1},
					CheckpointConfig: tune.CheckpointConfig{NumToKeep: 2}, SyncConfig: tune.SyncConfig{SyncPeriodS: 0.2}}),
				tune.WithParamSpace(tune.ParamSpace{"storage": sp, "direct": !store.IsURL(sp)}))
			if g.Len() != 1 || g.NumTerminated() != 1 {
				t.Fatalf("%d trials, %d TERMINATED", g.Len(), g.NumTerminated())
			}
			if n := probes.Load(); n != 1 {
				t.Errorf("the runner probed the storage %d times over two attempts, want once", n)
			}
			// The retry resumed from the checkpoint of iteration 2, read
			// from storage; every iteration is in result.json once.
			its, rf := routeRows(t, sp, "route", g)
			if !slices.Equal(its, []float64{1, 2, 3, 4}) || rf != 2 {
				t.Errorf("result.json iterations %v, resumed from %v; want 1..4 once, resumed from 2", its, rf)
			}
			evs := d.events(t, "route")
			cps := checkpointsOf(evs)
			if len(cps) != 4 {
				t.Fatalf("%d checkpoints in the log, want 4", len(cps))
			}
			for _, c := range cps {
				ref := c.Checkpoint
				if ref.Object != "" || ref.Location != trialDirOf(g.Get(0))+"/"+ref.Name || len(ref.Files) != len(checkpointTree(c.TrialID, 1)) || !strings.HasPrefix(ref.Digest, "crc32c:") {
					t.Errorf("checkpoint %s: object %q location %q files %v digest %s; want its folder in storage and its manifest",
						ref.Name, ref.Object, ref.Location, ref.Files, ref.Digest)
				}
			}
			for _, ev := range evs {
				if _, ok := ev.Data.(*events.CheckpointPersisted); ok {
					t.Errorf("the syncer copied a checkpoint already in storage: %+v", ev.Data)
				}
			}
			if objs := stagedObjects(t, d.deployment, "route"); len(objs) != 0 {
				t.Errorf("the Object Store holds %v; want nothing", objs)
			}
			// Retention: the latest two are kept, and come back byte for byte.
			r := g.Get(0)
			b := openStorage(t, sp)
			prefix := "route/" + trialDirOf(r) + "/"
			bustest.Eventually(t, storageWait, "retention to delete the older checkpoints", func() bool {
				return slices.Equal(checkpointsIn(t, b, prefix), []string{"checkpoint_000002", "checkpoint_000003"})
			})
			if r.Checkpoint == nil || r.Checkpoint.Name != "checkpoint_000003" {
				t.Fatalf("latest checkpoint %+v", r.Checkpoint)
			}
			local := filepath.Join(t.TempDir(), "best")
			if err := r.Checkpoint.Download(t.Context(), local); err != nil {
				t.Fatal(err)
			}
			if got := readTree(t, local); !sameTree(got, checkpointTree(r.TrialID, 4)) {
				t.Errorf("downloaded %v", treeNames(got))
			}
		})
	}
}

// routeRun runs resumer once on a folder storage with the route given and
// the runners given (name → ReachStorage), and returns the grid and log.
func routeRun(t *testing.T, route string, config tune.ParamSpace, runners map[string]func(context.Context, string, string) error) (*routeDeployment, string, *tune.ResultGrid, []*events.Event) {
	t.Helper()
	sp := t.TempDir()
	d := startRouteDeployment(t, map[string]tune.Trainable{"resumer": resumer})
	for name, reach := range runners {
		d.startRunner(name, reach)
	}
	space := tune.ParamSpace{"storage": sp}
	for k, v := range config {
		space[k] = v
	}
	tuner, err := tune.NewTuner("resumer", tune.WithName("route"), d.nats(),
		tune.WithRunConfig(tune.RunConfig{StoragePath: sp, FailureConfig: tune.FailureConfig{MaxFailures: 1},
			CheckpointConfig: tune.CheckpointConfig{Route: route}, SyncConfig: tune.SyncConfig{SyncPeriodS: 0.2}}),
		tune.WithParamSpace(space))
	if err != nil {
		t.Fatal(err)
	}
	g, err := tuner.Fit(t.Context())
	if err != nil {
		t.Fatalf("Fit: %v", err)
	}
	return d, sp, g, d.events(t, "route")
}

// staged reports whether every checkpoint of the log went through the
// Object Store and was persisted by the syncer.
func allStaged(t *testing.T, evs []*events.Event) {
	t.Helper()
	persisted := 0
	for _, ev := range evs {
		if _, ok := ev.Data.(*events.CheckpointPersisted); ok {
			persisted++
		}
	}
	cps := checkpointsOf(evs)
	for _, c := range cps {
		if c.Checkpoint.Location != "" || c.Checkpoint.Object == "" {
			t.Errorf("checkpoint %s: location %q object %q; want a staged copy", c.Checkpoint.Name, c.Checkpoint.Location, c.Checkpoint.Object)
		}
	}
	if len(cps) == 0 || persisted < len(cps)-1 { // the fold keeps what the retry resumed after
		t.Errorf("%d checkpoints, %d persisted by the syncer", len(cps), persisted)
	}
}

func TestRouteObjectStoreStagesEveryCheckpoint(t *testing.T) {
	_, sp, g, evs := routeRun(t, events.RouteObjectStore, nil, map[string]func(context.Context, string, string) error{"r1": nil})
	if g.NumTerminated() != 1 {
		t.Fatalf("%d of %d trials TERMINATED", g.NumTerminated(), g.Len())
	}
	allStaged(t, evs)
	if its, rf := routeRows(t, sp, "route", g); !slices.Equal(its, []float64{1, 2, 3, 4}) || rf != 2 {
		t.Errorf("result.json iterations %v, resumed from %v", its, rf)
	}
}

func TestRouteAutoFallsBackToTheObjectStore(t *testing.T) {
	_, sp, g, evs := routeRun(t, "", nil, map[string]func(context.Context, string, string) error{"blind": blind})
	if g.NumTerminated() != 1 {
		t.Fatalf("%d of %d trials TERMINATED", g.NumTerminated(), g.Len())
	}
	allStaged(t, evs)
	if its, rf := routeRows(t, sp, "route", g); !slices.Equal(its, []float64{1, 2, 3, 4}) || rf != 2 {
		t.Errorf("result.json iterations %v, resumed from %v", its, rf)
	}
}

func TestRouteStorageFailsOnARunnerThatCannotReachIt(t *testing.T) {
	_, sp, g, evs := routeRun(t, events.RouteStorage, nil, map[string]func(context.Context, string, string) error{"blind": blind})
	if g.NumErrors() != 1 {
		t.Fatalf("%d of %d trials ERROR, want the trial to fail", g.NumErrors(), g.Len())
	}
	msg := g.Errors()[0].Error()
	for _, want := range []string{`route is "storage"`, "runner blind", sp} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error %q does not name %q", msg, want)
		}
	}
	if cps := checkpointsOf(evs); len(cps) != 0 {
		t.Errorf("%d checkpoints in the log, want none", len(cps))
	}
}

// A runner that cannot read storage resumes from a checkpoint another
// runner wrote there: the syncer stages it in the Object Store on request.
func TestBlindRunnerResumesFromStorageThroughTheObjectStore(t *testing.T) {
	sp := t.TempDir()
	d := startRouteDeployment(t, map[string]tune.Trainable{"resumer": resumer})
	stopSeeing := d.startRunner("seeing", nil)
	done := fitAsync(t, d.deployment, "resumer", tune.WithName("route"),
		tune.WithRunConfig(tune.RunConfig{StoragePath: sp, SyncConfig: tune.SyncConfig{SyncPeriodS: 0.2}}),
		tune.WithParamSpace(tune.ParamSpace{"storage": sp, "hold": true}))
	waitLog(t, d.deployment, "route", "the second checkpoint", func(lg *trialsLog) bool {
		return len(checkpointsOf(d.events(t, "route"))) >= 2
	})
	stopSeeing() // the trial is handed back
	d.startRunner("blind", blind)
	waitFit(t, done)
	g, err := tune.LoadResults(t.Context(), store.Join(sp, "route"))
	if err != nil {
		t.Fatal(err)
	}
	if its, rf := routeRows(t, sp, "route", g); !slices.Equal(its, []float64{1, 2, 3, 4}) || rf != 2 {
		t.Errorf("result.json iterations %v, resumed from %v; want 1..4 once, resumed from 2", its, rf)
	}
	evs := d.events(t, "route")
	var asked bool
	for _, ev := range evs {
		if p, ok := ev.Data.(*events.TrialStarted); ok && p.Runner == "blind" {
			asked = p.StageRestore && p.RestoredFrom == "checkpoint_000001"
		}
	}
	if !asked {
		t.Error("the blind runner's trial.started does not ask for checkpoint_000001 to be staged")
	}
	cps := checkpointsOf(evs)
	for _, c := range cps {
		if c.Attempt == 1 && c.Checkpoint.Location == "" || c.Attempt > 1 && c.Checkpoint.Object == "" {
			t.Errorf("attempt %d's %s: location %q object %q", c.Attempt, c.Checkpoint.Name, c.Checkpoint.Location, c.Checkpoint.Object)
		}
	}
	var copies []string
	for _, o := range stagedObjects(t, d.deployment, "route") {
		if strings.Contains(o, "/storage-") {
			copies = append(copies, o)
		}
	}
	if len(copies) != 1 || !strings.Contains(copies[0], "checkpoint_000001/storage-") {
		t.Errorf("the Object Store holds staged copies from storage %v, want checkpoint_000001's alone", copies)
	}
}

// A checkpoint in storage changed after its event is caught on resume:
// the retry resumes from the one before, and every iteration still
// counts once.
func TestDamagedCheckpointInStorageFallsBackToTheOneBefore(t *testing.T) {
	_, sp, g, evs := routeRun(t, "", tune.ParamSpace{"damage": true, "direct": true}, map[string]func(context.Context, string, string) error{"r1": nil})
	if g.NumTerminated() != 1 {
		t.Fatalf("%d of %d trials TERMINATED", g.NumTerminated(), g.Len())
	}
	if its, rf := routeRows(t, sp, "route", g); !slices.Equal(its, []float64{1, 2, 3, 4}) || rf != 1 {
		t.Errorf("result.json iterations %v, resumed from %v; want 1..4 once, resumed from 1", its, rf)
	}
	var restored string
	for _, ev := range evs {
		if p, ok := ev.Data.(*events.TrialStarted); ok && p.Attempt == 2 {
			restored = p.RestoredFrom
		}
	}
	if restored != "checkpoint_000000" {
		t.Errorf("the retry restored from %q, want checkpoint_000000", restored)
	}
}

// With route auto, storage that hangs does not hang Report: a direct
// write that outlasts sync_timeout goes to the Object Store instead.
func TestHungStorageSendsCheckpointsThroughTheObjectStore(t *testing.T) {
	const exp = "hungdirect"
	base := memblob.OpenBucket(nil)
	t.Cleanup(func() { base.Close() })
	faulty, faults := storagetest.Faulty(base)
	sp := registerMem(t, faulty)
	release := make(chan struct{})
	d := startSyncDeployment(t, 1, map[string]tune.Trainable{"gated": gated(release)}, syncer.Config{RetryBackoff: 20 * time.Millisecond})
	done := fitAsync(t, d, "gated", tune.WithSyncWait(100*time.Millisecond), tune.WithName(exp), tune.WithParamSpace(tune.ParamSpace{"x": 1}),
		tune.WithRunConfig(tune.RunConfig{StoragePath: sp, SyncConfig: tune.SyncConfig{SyncPeriodS: 0.2, SyncTimeoutS: 0.3}}))
	bustest.Eventually(t, storageWait, "a checkpoint written straight to storage", func() bool {
		for _, c := range checkpointsOf(d.events(t, exp)) {
			if c.Checkpoint.Location != "" {
				return true
			}
		}
		return false
	})
	faults.HangWrites(true)
	bustest.Eventually(t, storageWait, "a checkpoint staged in the Object Store", func() bool {
		for _, c := range checkpointsOf(d.events(t, exp)) {
			if c.Checkpoint.Object != "" {
				return true
			}
		}
		return false
	})
	close(release)
	waitFit(t, done)
}
