package main_test

// The chaos soak: real tunejet processes on real nats-server processes,
// killed at random while experiments run, and the invariants that must
// hold whatever was killed when.
//
// Two scenarios run side by side:
//
//   - deployment: nats-server (one, or a 3-node R3 cluster), runners,
//     controllers, a syncer and a restorer as processes, and `tunejet run
//     --nats` submitting experiments of a Python command trainable. A kill
//     loop SIGKILLs a service at random and starts it again at once, kills
//     a NATS node (or the single server) and starts it 1–4 s later, and
//     SIGSTOPs a runner past the heartbeat timeout before it resumes it.
//   - embedded: `tunejet run FILE` on the embedded stack, SIGKILLed with its
//     trainables (as a crash of its host would) once two trials have
//     finished, then `tunejet restore PATH`, itself killed at random
//     moments and restored again, until the experiment completes.
//
// After each experiment: every trial TERMINATED at its last iteration; its
// result.json holds training_iteration 1..N once each, in order; the newest
// checkpoint in storage holds the last iteration's state; the stored state
// agrees with the log's; the fold took no result of an attempt that a
// later attempt had already superseded; a trial that had finished before a
// kill never ran again; no process exited on its own.
//
// Environment:
//
//	(nothing)                  TestChaosShort runs in make test (about a minute; -short skips it)
//	TUNEJET_SOAK=10m           run TestChaosSoak for that long (make soak)
//	TUNEJET_CHAOS_SEED=N       replay a run's choices (the seed is logged)
//	TUNEJET_CHAOS_INTERVAL=0.3s-1.1s  the soak's time between two faults

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/state"
)

// chaosScript is the Python trainable: it reports $STEPS times,
// $STEP_SLEEP seconds apart, each with a checkpoint holding the iteration
// it reports, and resumes from the checkpoint it is given. Each start
// appends "<trial> <attempt> <fresh|resumed>" to $MARK_DIR/starts and
// leaves its pid in $MARK_DIR/pid-<trial>-<attempt>. The experiments run
// it as a fork server (fork_server: true): each attempt is forked from
// the runner's warm worker of the script.
const chaosScript = `import json, os, sys, tempfile, time
import tunejet


def trial():
    marks = os.environ["MARK_DIR"]
    trial, attempt = tunejet.get_trial_id(), tunejet.get_attempt()
    pid_file = "pid-%s-%d" % (trial, attempt)
    with open(os.path.join(marks, "." + pid_file), "w") as f:  # renamed whole: never seen empty
        f.write("%d\n" % os.getpid())
    os.rename(os.path.join(marks, "." + pid_file), os.path.join(marks, pid_file))
    steps, pause = int(os.environ["STEPS"]), float(os.environ["STEP_SLEEP"])
    it, how = 0, "fresh"
    resume = tunejet.get_checkpoint()
    if resume:
        with open(os.path.join(resume, "state.json")) as f:
            it, how = json.load(f)["iteration"], "resumed"
    with open(os.path.join(marks, "starts"), "a") as f:
        f.write("%s %d %s\n" % (trial, attempt, how))
    while it < steps:
        time.sleep(pause)
        it += 1
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"trial_id": trial, "iteration": it}, f)
            tunejet.report({"step": it}, checkpoint_dir=d)


tunejet.run_trials(trial)
`

// chaosDeploymentExperiment: a grid over id, retried without limit.
const chaosDeploymentExperiment = `name: %s
trainable:
  command: ["python3", %q]
  fork_server: true
param_space:
  id: {grid_search: %s}
run_config:
  storage_path: %s
  failure_config: {max_failures: -1, heartbeat_timeout_s: %d}
  checkpoint_config: {num_to_keep: 3}
  sync_config: {sync_period: 0.5}
`

// chaosEmbeddedExperiment: 8 trials, 4 at once, max_failures 0.
const chaosEmbeddedExperiment = `name: %s
trainable:
  command: ["python3", %q]
  fork_server: true
param_space:
  id: {grid_search: [0, 1, 2, 3, 4, 5, 6, 7]}
tune_config:
  max_concurrent_trials: 4
run_config:
  sync_config: {sync_period: 0.2}
`

const (
	chaosEmbeddedTrials = 8
	chaosEmbeddedSteps  = 6
	chaosEmbeddedSleep  = "0.4"
)

// chaosScale sizes the deployment scenario.
type chaosScale struct {
	nodes, runners, slots, controllers int
	trials, steps                      int
	stepSleep                          string
	heartbeat                          int // seconds
	// interval bounds the time between two faults.
	minGap, maxGap time.Duration
	// plan, when set, is the faults to inject, in order, once each; else
	// faults are drawn at random until the soak's time is up.
	plan []string
}

// Fault kinds.
const (
	killRunner     = "runner"
	killController = "controller"
	killSyncer     = "syncer"
	killRestorer   = "restorer"
	killNATS       = "nats"
	killEmbedded   = "embedded"
	stopRunner     = "sigstop"
)

// TestChaosShort is the soak in about a minute: a single nats-server
// process with every service as a process, each kind of service killed,
// the server killed and restarted, a runner frozen past the heartbeat
// timeout, and one embedded run killed and restored.
func TestChaosShort(t *testing.T) {
	t.Parallel()
	skipShortChaos(t)
	plan := []string{killRunner, killController, killSyncer, killRestorer, killNATS, stopRunner,
		killRunner, killController, killSyncer, killRestorer}
	runChaos(t, 0, chaosScale{
		nodes: 1, runners: 2, slots: 2, controllers: 2,
		trials: 8, steps: 20, stepSleep: "0.2", heartbeat: 2,
		minGap: time.Second, maxGap: 2 * time.Second, plan: plan,
	})
}

// TestChaosClusterShort is TestChaosShort on a 3-node NATS cluster, with
// three of its faults the SIGKILL of a NATS node: the stream's leader or a
// follower, restarted one to four seconds later.
func TestChaosClusterShort(t *testing.T) {
	t.Parallel()
	skipShortChaos(t)
	plan := []string{killNATS, killRunner, killController, killNATS, killSyncer, stopRunner,
		killRestorer, killNATS, killRunner, killController}
	runChaos(t, 0, chaosScale{
		nodes: 3, runners: 2, slots: 2, controllers: 2,
		trials: 8, steps: 20, stepSleep: "0.2", heartbeat: 3,
		minGap: time.Second, maxGap: 2 * time.Second, plan: plan,
	})
}

// skipShortChaos skips a short chaos run under -short, or when
// TUNEJET_SOAK runs the long one instead.
func skipShortChaos(t *testing.T) {
	t.Helper()
	if os.Getenv("TUNEJET_SOAK") != "" {
		t.Skip("TUNEJET_SOAK is set: TestChaosSoak runs instead")
	}
	if testing.Short() {
		t.Skip("about half a minute of faults: skipped with -short")
	}
}

// TestChaosSoak runs both scenarios for $TUNEJET_SOAK on a 3-node cluster:
// experiments of 40 trials × 30 reports back to back, a fault every
// TUNEJET_CHAOS_INTERVAL (0.3–1.1 s by default, enough for 100 kills of
// each service kind in 10 minutes), a NATS node about one fault in five.
func TestChaosSoak(t *testing.T) {
	t.Parallel()
	d := os.Getenv("TUNEJET_SOAK")
	if d == "" {
		t.Skip("set TUNEJET_SOAK=10m (make soak) to run the chaos soak")
	}
	dur, err := time.ParseDuration(d)
	if err != nil {
		t.Fatalf("TUNEJET_SOAK=%q: %v", d, err)
	}
	sc := chaosScale{
		nodes: 3, runners: 3, slots: 2, controllers: 2,
		trials: 40, steps: 30, stepSleep: "0.2", heartbeat: 3,
		minGap: 300 * time.Millisecond, maxGap: 1100 * time.Millisecond,
	}
	if v := os.Getenv("TUNEJET_CHAOS_INTERVAL"); v != "" {
		lo, hi, ok := strings.Cut(v, "-")
		a, err1 := time.ParseDuration(lo)
		b, err2 := time.ParseDuration(hi)
		if !ok || err1 != nil || err2 != nil || a <= 0 || b < a {
			t.Fatalf("TUNEJET_CHAOS_INTERVAL=%q: want MIN-MAX durations, e.g. 1.5s-3.5s", v)
		}
		sc.minGap, sc.maxGap = a, b
	}
	runChaos(t, dur, sc)
}

// runChaos runs the two scenarios side by side and prints the figures.
func runChaos(t *testing.T, dur time.Duration, sc chaosScale) {
	seed := chaosSeed(t)
	fig := &chaosFigures{seed: seed, kills: map[string]int{}, experiments: map[string]int{}, start: time.Now()}
	t.Cleanup(func() { t.Log(fig.String()) })
	until := time.Now().Add(dur)
	t.Run("scenarios", func(t *testing.T) {
		t.Run("deployment", func(t *testing.T) {
			t.Parallel()
			newChaosDeployment(t, sc, rand.New(rand.NewPCG(seed, 1)), fig).soak(until)
		})
		t.Run("embedded", func(t *testing.T) {
			t.Parallel()
			chaosEmbedded(t, rand.New(rand.NewPCG(seed, 2)), fig, until, dur > 0)
		})
	})
	fig.done = time.Now()
}

func chaosSeed(t *testing.T) uint64 {
	t.Helper()
	if v := os.Getenv("TUNEJET_CHAOS_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("TUNEJET_CHAOS_SEED=%q: %v", v, err)
		}
		t.Logf("chaos seed %d (from TUNEJET_CHAOS_SEED)", seed)
		return seed
	}
	seed := rand.Uint64()
	t.Logf("chaos seed %d (replay with TUNEJET_CHAOS_SEED=%d)", seed, seed)
	return seed
}

// chaosFigures are what the soak survived and what it found.
type chaosFigures struct {
	mu          sync.Mutex
	seed        uint64
	start, done time.Time
	kills       map[string]int // SIGKILLs by kind
	sigstops    int
	restores    int
	experiments map[string]int
	trials      int
	// Reports: expected (trials × iterations), stored (result.json lines),
	// lost (iterations missing from result.json), duplicated (extra lines).
	expected, stored, lost, duplicated int
	violations                         int
	stuck                              int // experiments whose log stood still
}

func (f *chaosFigures) add(fn func(f *chaosFigures)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *chaosFigures) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := f.done
	if end.IsZero() {
		end = time.Now()
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "chaos figures (seed %d, %s):\n", f.seed, end.Sub(f.start).Round(time.Second))
	fmt.Fprintf(&sb, "  SIGKILLs survived: runner %d, controller %d, syncer %d, restorer %d, embedded tunejet run/restore %d\n",
		f.kills[killRunner], f.kills[killController], f.kills[killSyncer], f.kills[killRestorer], f.kills[killEmbedded])
	fmt.Fprintf(&sb, "  NATS node kills: %d\n", f.kills[killNATS])
	fmt.Fprintf(&sb, "  SIGSTOPs past the heartbeat timeout: %d\n", f.sigstops)
	fmt.Fprintf(&sb, "  restores: %d\n", f.restores)
	fmt.Fprintf(&sb, "  experiments checked: deployment %d, embedded %d; trials %d; stuck %d\n", f.experiments["deployment"], f.experiments["embedded"], f.trials, f.stuck)
	fmt.Fprintf(&sb, "  reports: expected %d, stored %d, lost %d, duplicated %d\n", f.expected, f.stored, f.lost, f.duplicated)
	fmt.Fprintf(&sb, "  invariant violations: %d", f.violations)
	return sb.String()
}

// chaosComp is one service process the kill loop may kill and restart.
type chaosComp struct {
	kind, name string
	args       []string
	p          *proc
	frozen     bool
}

// chaosDeployment is the deployment scenario: NATS, the services, and the
// kill loop, which runs on the test's goroutine between polls.
type chaosDeployment struct {
	t     *testing.T
	sc    chaosScale
	rng   *rand.Rand
	fig   *chaosFigures
	cl    *natsCluster
	js    jetstream.JetStream // the test's reads, behind the services' backs
	env   []string
	comps []*chaosComp
	dir   string // the trainable script and experiment files
	marks string
	begin time.Time

	// Pending fault ends: a NATS node to start again, a runner to resume.
	down      *natsNode
	upAt      time.Time
	unhealthy *natsNode // started again, not yet healthy
	checkedAt time.Time
	frozen    *chaosComp
	thawAt    time.Time
	plan      []string
	next      time.Time
	exp       string // the experiment running
}

func newChaosDeployment(t *testing.T, sc chaosScale, rng *rand.Rand, fig *chaosFigures) *chaosDeployment {
	d := &chaosDeployment{t: t, sc: sc, rng: rng, fig: fig, dir: t.TempDir(), marks: t.TempDir(), begin: time.Now(), plan: sc.plan}
	d.cl = startCluster(t, buildNatsServer(t), sc.nodes)
	d.js = d.cl.js(t)
	writeFile(t, d.dir, "chaos.py", chaosScript)
	d.env = baseEnv("MARK_DIR="+d.marks, "STEPS="+strconv.Itoa(sc.steps), "STEP_SLEEP="+sc.stepSleep,
		"PYTHONPATH="+filepath.Join(moduleRoot, "sdk", "python"), "PYTHONDONTWRITEBYTECODE=1",
		"TUNEJET_LOG_FORMAT=json", "TUNEJET_LOG_LEVEL=warn")
	add := func(kind, name string, args ...string) {
		d.comps = append(d.comps, &chaosComp{kind: kind, name: name, args: args})
	}
	for i := range sc.runners {
		name := fmt.Sprintf("r%d", i+1)
		add(killRunner, name, "runner", "--slots", strconv.Itoa(sc.slots), "--name", name, "--work-dir", t.TempDir())
	}
	for i := range sc.controllers {
		add(killController, fmt.Sprintf("c%d", i+1), "controller")
	}
	add(killSyncer, "syncer", "syncer")
	add(killRestorer, "restorer", "restorer")
	for _, c := range d.comps {
		d.start(c)
	}
	return d
}

func (d *chaosDeployment) logf(format string, args ...any) {
	d.t.Helper()
	d.t.Logf("%7.2fs "+format, append([]any{time.Since(d.begin).Seconds()}, args...)...)
}

func (d *chaosDeployment) start(c *chaosComp) {
	args := append(slices.Clone(c.args), "--nats", d.cl.urls(), "--replicas", strconv.Itoa(d.sc.nodes))
	c.p = startTunejet(d.t, "", d.env, args...)
}

// soak runs experiments one after another under faults until the time is
// up and the plan done (at least one), and checks each.
func (d *chaosDeployment) soak(until time.Time) {
	t := d.t
	d.waitRunners()
	for i := 1; ; i++ {
		exp := fmt.Sprintf("chaos%d", i)
		completed := d.runExperiment(exp, until)
		d.settle()
		if completed {
			d.check(exp)
		}
		// A soak goes on after a violation, to count what else it finds.
		if time.Now().After(until) && len(d.plan) == 0 || len(d.sc.plan) > 0 && t.Failed() {
			return
		}
	}
}

// waitRunners waits until every runner has registered: the deployment is up.
func (d *chaosDeployment) waitRunners() {
	t := d.t
	deadline := time.Now().Add(time.Minute)
	for {
		d.checkAlive()
		if n, err := d.liveRunners(); err == nil && n == d.sc.runners {
			d.logf("deployment up: %d nats node(s), %d services", d.sc.nodes, len(d.comps))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %d runners did not register within a minute", d.sc.runners)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (d *chaosDeployment) liveRunners() (int, error) {
	ctx, cancel := context.WithTimeout(d.t.Context(), 2*time.Second)
	defer cancel()
	rs, err := liveRunners(ctx, d.js)
	return len(rs), err
}

// chaosStall is how long the log of a running experiment may stay still
// before the experiment is taken for stuck: far longer than any recovery
// (a heartbeat timeout, a lease, a NATS election) takes.
const chaosStall = 90 * time.Second

// runExperiment submits exp and injects faults until it completes; false
// if it got stuck instead (recorded as a violation, and left behind).
func (d *chaosDeployment) runExperiment(exp string, until time.Time) bool {
	t := d.t
	ids := make([]string, d.sc.trials)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	file := writeFile(t, d.dir, exp+".yaml", fmt.Sprintf(chaosDeploymentExperiment, exp, filepath.Join(d.dir, "chaos.py"),
		"["+strings.Join(ids, ", ")+"]", filepath.Join(d.dir, "storage"), d.sc.heartbeat))
	run := startTunejet(t, "", baseEnv(), "run", "--nats", d.cl.urls(), file)
	d.exp = exp
	d.logf("%s submitted", exp)
	var lastSeq uint64
	moved, polled := time.Now(), time.Now()
	d.next = time.Now().Add(d.gap())
	for !run.exited() {
		d.checkAlive()
		d.endFaults(false)
		if time.Since(polled) > 5*time.Second {
			polled = time.Now()
			if seq := d.lastSeq(); seq > lastSeq {
				lastSeq, moved = seq, time.Now()
			}
		}
		if time.Since(moved) > chaosStall {
			d.stuck(exp, run)
			return false
		}
		if time.Now().After(d.next) && (len(d.sc.plan) > 0 && len(d.plan) > 0 || len(d.sc.plan) == 0 && time.Now().Before(until)) {
			d.fault()
			d.next = time.Now().Add(d.gap())
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := run.wait(t)
	want := fmt.Sprintf("%d TERMINATED, 0 ERROR", d.sc.trials)
	if r.code != 0 || !strings.Contains(r.stdout, want) {
		d.fig.add(func(f *chaosFigures) { f.violations++ })
		t.Errorf("%s: tunejet run --nats: want exit 0 with %s:\n%s", exp, want, r)
	}
	d.logf("%s ended: exit %d", exp, r.code)
	return true
}

// lastSeq is the event log's last sequence, 0 when it cannot be read now.
func (d *chaosDeployment) lastSeq() uint64 {
	ctx, cancel := context.WithTimeout(d.t.Context(), 2*time.Second)
	defer cancel()
	s, err := d.js.Stream(ctx, bus.StreamName)
	if err != nil {
		return 0
	}
	return s.CachedInfo().State.LastSeq
}

func (d *chaosDeployment) gap() time.Duration {
	return d.sc.minGap + time.Duration(d.rng.Int64N(int64(d.sc.maxGap-d.sc.minGap)+1))
}

// stuck records an experiment whose log stood still, with the timelines
// of its unfinished trials, and stops watching it.
func (d *chaosDeployment) stuck(exp string, run *proc) {
	t := d.t
	d.settle()
	evs := replayCluster(t, d.js, exp)
	fold := foldEvents(t, evs, exp)
	d.fig.add(func(f *chaosFigures) { f.violations++; f.stuck++ })
	for _, tr := range fold.TrialList() {
		if !tr.Finished() {
			t.Errorf("%s (seed %d): stuck: trial %s is %s at iteration %d, the log still for %v; its timeline:\n%s",
				exp, d.fig.seed, tr.ID, tr.Status, tr.Iteration, chaosStall, timeline(trialEvents(evs, tr.ID)))
		}
	}
	t.Logf("consumers:\n%s", consumers(d.js))
	run.kill()
}

// checkAlive fails the test if a service exited without being killed.
func (d *chaosDeployment) checkAlive() {
	d.t.Helper()
	for _, c := range d.comps {
		if c.p.exited() {
			d.fig.add(func(f *chaosFigures) { f.violations++ })
			d.t.Fatalf("%s %s exited on its own (seed %d):\n%s", c.kind, c.name, d.fig.seed, tail(c.p.stderr.String(), 8<<10))
		}
	}
}

// fault injects the next fault of the plan, or one drawn at random.
func (d *chaosDeployment) fault() {
	var kind string
	if len(d.sc.plan) > 0 {
		kind = d.plan[0]
		if (kind == killNATS && !d.natsCalm()) || (kind == stopRunner && d.frozen != nil) {
			return // wait for the last one to end
		}
		d.plan = d.plan[1:]
	} else {
		switch n := d.rng.IntN(20); {
		case n < 4 && d.natsCalm():
			kind = killNATS
		case n == 4 && d.frozen == nil:
			kind = stopRunner
		default:
			kind = []string{killRunner, killController, killSyncer, killRestorer}[d.rng.IntN(4)]
		}
	}
	switch kind {
	case killNATS:
		d.down = d.cl.nodes[d.rng.IntN(len(d.cl.nodes))]
		d.down.kill()
		d.upAt = time.Now().Add(time.Second + time.Duration(d.rng.Int64N(int64(3*time.Second))))
		d.fig.add(func(f *chaosFigures) { f.kills[killNATS]++ })
		d.logf("SIGKILL nats node %s (back in %.1fs)", d.down.name, time.Until(d.upAt).Seconds())
	case stopRunner:
		c := d.pick(killRunner)
		if err := c.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			d.t.Fatal(err)
		}
		c.frozen, d.frozen = true, c
		d.thawAt = time.Now().Add(time.Duration(d.sc.heartbeat)*time.Second + time.Second + time.Duration(d.rng.Int64N(int64(time.Second))))
		d.fig.add(func(f *chaosFigures) { f.sigstops++ })
		d.logf("SIGSTOP runner %s (for %.1fs)", c.name, time.Until(d.thawAt).Seconds())
	default:
		c := d.pick(kind)
		if kind == killController && (len(d.sc.plan) > 0 || d.rng.IntN(2) == 0) {
			c = d.leaseHolder(c)
		}
		c.p.kill()
		d.start(c)
		d.fig.add(func(f *chaosFigures) { f.kills[kind]++ })
		d.logf("SIGKILL %s %s, started again", kind, c.name)
	}
}

// pick draws a component of a kind that is not frozen.
func (d *chaosDeployment) pick(kind string) *chaosComp {
	var cs []*chaosComp
	for _, c := range d.comps {
		if c.kind == kind && !c.frozen {
			cs = append(cs, c)
		}
	}
	return cs[d.rng.IntN(len(cs))]
}

// leaseHolder returns the controller that holds the running experiment's
// lease, or c when that cannot be read at once.
func (d *chaosDeployment) leaseHolder(c *chaosComp) *chaosComp {
	ctx, cancel := context.WithTimeout(d.t.Context(), time.Second)
	defer cancel()
	kv, err := d.js.KeyValue(ctx, bus.LeaseBucket)
	if err != nil {
		return c
	}
	e, err := kv.Get(ctx, d.exp)
	if err != nil {
		return c
	}
	for _, x := range d.comps {
		if x.kind == killController && strings.HasSuffix(string(e.Value()), "-"+strconv.Itoa(x.p.cmd.Process.Pid)) {
			return x
		}
	}
	return c
}

// natsCalm reports whether every NATS node is up and healthy, so that
// another may be killed.
func (d *chaosDeployment) natsCalm() bool { return d.down == nil && d.unhealthy == nil }

// endFaults starts again a NATS node whose time has come and resumes a
// frozen runner whose time has come (all of them at once when now), and
// follows a restarted node until it is healthy.
func (d *chaosDeployment) endFaults(now bool) {
	if d.down != nil && (now || time.Now().After(d.upAt)) {
		d.down.start(d.t)
		d.logf("nats node %s started again", d.down.name)
		d.unhealthy, d.down = d.down, nil
	}
	if d.frozen != nil && (now || time.Now().After(d.thawAt)) {
		if err := d.frozen.p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			d.t.Fatal(err)
		}
		d.logf("SIGCONT runner %s", d.frozen.name)
		d.frozen.frozen, d.frozen = false, nil
	}
	if d.unhealthy != nil && time.Since(d.checkedAt) > 200*time.Millisecond {
		d.checkedAt = time.Now()
		if d.unhealthy.healthy() {
			d.logf("nats node %s healthy", d.unhealthy.name)
			d.unhealthy = nil
		}
	}
}

// settle ends the faults still in progress and waits until NATS is whole,
// so that the checks read a log that every node has.
func (d *chaosDeployment) settle() {
	d.endFaults(true)
	if d.unhealthy != nil {
		d.unhealthy.waitHealthy(d.t, time.Minute)
		d.unhealthy = nil
	}
}

// check checks the invariants of a completed experiment of the deployment
// scenario against its log and storage.
func (d *chaosDeployment) check(exp string) {
	t := d.t
	evs := replayCluster(t, d.js, exp)
	expDir := filepath.Join(d.dir, "storage", exp)
	stored := loadState(t, expDir)
	c := chaosCheck{t: t, fig: d.fig, scenario: "deployment", exp: exp, expDir: expDir, steps: d.sc.steps, evs: evs}
	fold := c.logInvariants()
	c.stateInvariants(stored, d.sc.trials)
	// The stored state is the log's final state.
	for _, lt := range fold.TrialList() {
		st := stored.Trials[lt.ID]
		if st == nil {
			c.fail(lt.ID, "is in the log but not in the stored state")
			continue
		}
		if st.Status != lt.Status || st.Iteration != lt.Iteration || st.NumResults != lt.NumResults || st.Attempt != lt.Attempt ||
			ckptName(st.LatestCheckpoint()) != ckptName(lt.LatestCheckpoint()) {
			c.fail(lt.ID, fmt.Sprintf("stored state %s iteration %d, %d results, attempt %d, latest %s; the log's fold %s iteration %d, %d results, attempt %d, latest %s",
				st.Status, st.Iteration, st.NumResults, st.Attempt, ckptName(st.LatestCheckpoint()),
				lt.Status, lt.Iteration, lt.NumResults, lt.Attempt, ckptName(lt.LatestCheckpoint())))
		}
	}
	d.fig.add(func(f *chaosFigures) { f.experiments["deployment"]++ })
	d.logf("%s checked", exp)
}

func ckptName(c *events.CheckpointRef) string {
	if c == nil {
		return "none"
	}
	return c.Name
}

// chaosCheck checks one completed experiment and adds to the figures.
type chaosCheck struct {
	t        *testing.T
	fig      *chaosFigures
	scenario string
	exp      string
	expDir   string
	steps    int
	evs      []*events.Event // the experiment's log
	failed   int
}

// fail records a violation by a trial, with its timeline for the first
// few.
func (c *chaosCheck) fail(trial, what string) {
	c.t.Helper()
	c.failed++
	c.fig.add(func(f *chaosFigures) { f.violations++ })
	msg := fmt.Sprintf("%s %s (seed %d): trial %s %s", c.scenario, c.exp, c.fig.seed, trial, what)
	if c.failed <= 3 {
		msg += "\ntimeline of trial " + trial + ":\n" + timeline(trialEvents(c.evs, trial))
	}
	c.t.Error(msg)
}

// trialEvents keeps the events of one trial and of the experiment itself.
func trialEvents(evs []*events.Event, trial string) []*events.Event {
	var out []*events.Event
	for _, ev := range evs {
		if id := events.TrialOf(ev.Data); id == "" || id == trial {
			out = append(out, ev)
		}
	}
	return out
}

// logInvariants folds a log that holds no restore and checks it: each
// report stored once per attempt, and no result taken by the fold from an
// attempt a later one had superseded: an attempt that resumed from a
// checkpoint at iteration k repeats every iteration after k, so a result
// after k that the fold took from an earlier attempt is a fenced
// attempt's.
func (c *chaosCheck) logInvariants() *state.Experiment {
	fold := state.New(c.exp)
	type taken struct{ attempt, iteration int }
	accepted := map[string][]taken{}
	stored := map[string]map[taken]int{}
	ckptIter := map[string]map[string]int{} // trial → checkpoint name → iteration
	resumedAt := map[string]map[int]int{}   // trial → attempt → iteration it resumed after
	for _, ev := range c.evs {
		for _, one := range events.Split(ev) {
			// The check folds the whole history across restores: an
			// experiment.restored (no loader here) changes nothing.
			var changed bool
			fold, changed, _ = state.Fold(c.t.Context(), fold, one, nil)
			switch p := one.Data.(type) {
			case *events.TrialCheckpointed:
				if ckptIter[p.TrialID] == nil {
					ckptIter[p.TrialID] = map[string]int{}
				}
				ckptIter[p.TrialID][p.Checkpoint.Name] = p.Checkpoint.Iteration
			case *events.TrialStarted:
				if resumedAt[p.TrialID] == nil {
					resumedAt[p.TrialID] = map[int]int{}
				}
				resumedAt[p.TrialID][p.Attempt] = ckptIter[p.TrialID][p.RestoredFrom]
			case *events.TrialReported:
				f, _ := p.Result["training_iteration"].(float64)
				k := taken{p.Attempt, int(f)}
				if stored[p.TrialID] == nil {
					stored[p.TrialID] = map[taken]int{}
				}
				stored[p.TrialID][k]++
				if changed {
					accepted[p.TrialID] = append(accepted[p.TrialID], k)
				}
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(stored)) {
		for k, n := range stored[id] {
			if n > 1 {
				c.fail(id, fmt.Sprintf("has attempt %d's report of iteration %d stored %d times in the log", k.attempt, k.iteration, n))
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(accepted)) {
		for _, a := range accepted[id] {
			for later, from := range resumedAt[id] {
				if later > a.attempt && a.iteration > from {
					c.fail(id, fmt.Sprintf("the fold took attempt %d's result of iteration %d, but attempt %d resumed after iteration %d: a result of a fenced attempt", a.attempt, a.iteration, later, from))
				}
			}
		}
	}
	return fold
}

// stateInvariants checks the stored state and the trials' files: every
// trial TERMINATED at the last iteration, result.json holding iterations
// 1..steps once each and in order, and the newest checkpoint in storage
// holding the last iteration's state.
func (c *chaosCheck) stateInvariants(st *state.Experiment, trials int) {
	t := c.t
	if len(st.Trials) != trials {
		c.fail("(all)", fmt.Sprintf("the stored state has %d trials, want %d", len(st.Trials), trials))
	}
	// A trial missing from storage lost all its reports.
	absent := max(0, trials-len(st.Trials))
	expected, lines, lost, dup := absent*c.steps, 0, absent*c.steps, 0
	for _, tr := range st.TrialList() {
		expected += c.steps
		if tr.Status != events.StatusTerminated || tr.Iteration != c.steps {
			c.fail(tr.ID, fmt.Sprintf("ended %s at iteration %d, want TERMINATED at %d (last error %q)", tr.Status, tr.Iteration, c.steps, tail(tr.LastError, 300)))
		}
		file := filepath.Join(c.expDir, tr.DirName, "result.json")
		if _, err := os.Stat(file); err != nil {
			lost += c.steps
			c.fail(tr.ID, fmt.Sprintf("has no result.json: %v", err))
			continue
		}
		rows := resultLines(t, file)
		lines += len(rows)
		seen := map[int]int{}
		var its []int
		for _, row := range rows {
			f, _ := row["training_iteration"].(float64)
			its = append(its, int(f))
			seen[int(f)]++
			if row["step"] != f || row["trial_id"] != tr.ID {
				c.fail(tr.ID, fmt.Sprintf("result.json has a row of iteration %v with step %v, trial %v", f, row["step"], row["trial_id"]))
			}
		}
		var missing []int
		for i := 1; i <= c.steps; i++ {
			if seen[i] == 0 {
				missing = append(missing, i)
			}
		}
		extra := len(rows) - len(seen)
		for it := range seen {
			if it < 1 || it > c.steps {
				extra++
			}
		}
		lost += len(missing)
		dup += extra
		if len(missing) > 0 || extra > 0 || !slices.IsSorted(its) {
			c.fail(tr.ID, fmt.Sprintf("result.json holds iterations %v: missing %v, %d extra; want 1..%d once each, in order", its, missing, extra, c.steps))
		}
		c.newestCheckpoint(tr)
	}
	c.fig.add(func(f *chaosFigures) {
		f.trials += len(st.Trials) + absent
		f.expected += expected
		f.stored += lines
		f.lost += lost
		f.duplicated += dup
	})
}

// newestCheckpoint checks that a trial's newest checkpoint is in storage
// and holds the last iteration's state.
func (c *chaosCheck) newestCheckpoint(tr *state.Trial) {
	latest := tr.LatestCheckpoint()
	if latest == nil {
		c.fail(tr.ID, "has no checkpoint")
		return
	}
	b, err := os.ReadFile(filepath.Join(c.expDir, tr.DirName, latest.Name, "state.json"))
	if err != nil {
		c.fail(tr.ID, fmt.Sprintf("newest checkpoint %s is not in storage: %v", latest.Name, err))
		return
	}
	var held struct {
		TrialID   string `json:"trial_id"`
		Iteration int    `json:"iteration"`
	}
	if err := json.Unmarshal(b, &held); err != nil || latest.Iteration != c.steps || held.Iteration != c.steps || held.TrialID != tr.ID {
		c.fail(tr.ID, fmt.Sprintf("newest checkpoint %s (iteration %d) holds %s; want the state of iteration %d", latest.Name, latest.Iteration, b, c.steps))
	}
}

// chaosEmbedded runs the embedded scenario: experiments one after another
// until the time is up (one when not soaking), each killed once two trials
// have finished and restored, and in the soak its restores killed at
// random moments too, up to 6 kills an experiment.
func chaosEmbedded(t *testing.T, rng *rand.Rand, fig *chaosFigures, until time.Time, soak bool) {
	dir := t.TempDir()
	script := writeFile(t, dir, "chaos.py", chaosScript)
	begin := time.Now()
	for i := 1; ; i++ {
		e := &chaosEmbed{t: t, rng: rng, fig: fig, begin: begin, script: script, exp: fmt.Sprintf("embedded%d", i),
			store: t.TempDir(), storage: t.TempDir(), marks: t.TempDir()}
		e.file = writeFile(t, dir, e.exp+".yaml", fmt.Sprintf(chaosEmbeddedExperiment, e.exp, script))
		e.env = embeddedEnv(t, "MARK_DIR="+e.marks, "STEPS="+strconv.Itoa(chaosEmbeddedSteps), "STEP_SLEEP="+chaosEmbeddedSleep,
			"PYTHONPATH="+filepath.Join(moduleRoot, "sdk", "python"), "PYTHONDONTWRITEBYTECODE=1")
		kills := 1
		if soak {
			kills = 1 + rng.IntN(6)
		}
		e.run(kills)
		if !soak || time.Now().After(until) {
			return
		}
	}
}

// chaosEmbed is one experiment of the embedded scenario.
type chaosEmbed struct {
	t                     *testing.T
	rng                   *rand.Rand
	fig                   *chaosFigures
	begin                 time.Time
	exp, file, script     string
	store, storage, marks string
	env                   []string
	crashes               []embedCrash
}

// embedCrash is what the log held when a kill struck: the trials that had
// finished, and how many times each had started.
type embedCrash struct {
	seq      uint64
	finished map[string]int // trial → trainable starts so far
}

func (e *chaosEmbed) logf(format string, args ...any) {
	e.t.Helper()
	e.t.Logf("%7.2fs %s: "+format, append([]any{time.Since(e.begin).Seconds(), e.exp}, args...)...)
}

func (e *chaosEmbed) expDir() string { return filepath.Join(e.storage, e.exp) }

// run runs the experiment to its end through kills and restores.
func (e *chaosEmbed) run(kills int) {
	t := e.t
	p := startTunejet(t, "", e.env, "run", e.file, "--store-dir", e.store, "--storage-path", e.storage, "--slots", "4")
	e.waitFinished(p, 2)
	for k := range kills {
		if k > 0 && !e.randomMoment(p) {
			break // it completed first
		}
		e.crash(p)
		p = startTunejet(t, "", e.env, "restore", e.expDir(), "--store-dir", e.store, "--slots", "4")
		e.fig.add(func(f *chaosFigures) { f.restores++ })
	}
	r := p.wait(t)
	e.logf("%s exited %d", p.name, r.code)
	e.check(r)
}

// waitFinished waits until storage shows n trials TERMINATED.
func (e *chaosEmbed) waitFinished(p *proc, n int) {
	t := e.t
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if p.exited() {
			t.Fatalf("%s: tunejet %s exited before %d trials had finished:\n%s", e.exp, p.name, n, p.wait(t))
		}
		if st, ok := snapshotIn(t, e.expDir()); ok && st.Counts()[events.StatusTerminated] >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d trials did not finish within 2 minutes", e.exp, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// randomMoment waits 0.2–3 s; false if p exits first.
func (e *chaosEmbed) randomMoment(p *proc) bool {
	at := time.Now().Add(200*time.Millisecond + time.Duration(e.rng.Int64N(int64(2800*time.Millisecond))))
	for time.Now().Before(at) {
		if p.exited() {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return !p.exited()
}

// crash SIGKILLs p and its trainables, as a crash of their host would, and
// notes what the log held.
func (e *chaosEmbed) crash(p *proc) {
	p.kill()
	killTrainablesOf(e.t, e.marks, e.script)
	e.fig.add(func(f *chaosFigures) { f.kills[killEmbedded]++ })
	evs := storeLog(e.t, e.store, e.exp)
	c := embedCrash{finished: map[string]int{}}
	starts := (&heldSetup{marks: e.marks}).starts(e.t)
	for _, ev := range evs {
		c.seq = ev.Seq
		if p, ok := ev.Data.(*events.TrialCompleted); ok {
			c.finished[p.TrialID] = len(starts[p.TrialID])
		}
	}
	e.crashes = append(e.crashes, c)
	e.logf("SIGKILL tunejet %s with %d trials finished", strings.Fields(p.name)[0], len(c.finished))
}

// killTrainablesOf SIGKILLs the process groups of the trainables running
// script whose pid files are in marks, and removes the files: pids are
// reused, so a pid is killed only while its command line is the script's.
func killTrainablesOf(t *testing.T, marks, script string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(marks, "pid-*"))
	var killed []int
	for _, file := range files {
		pid := readPid(t, file)
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(cmdline), script) && alive(pid) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			killed = append(killed, pid)
		}
		_ = os.Remove(file)
	}
	deadline := time.Now().Add(time.Minute)
	for _, pid := range killed {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("trainable %d did not end after SIGKILL", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// check checks the invariants of the experiment after its last restore.
func (e *chaosEmbed) check(r result) {
	t := e.t
	want := fmt.Sprintf("Experiment finished: %d trials, %d TERMINATED, 0 ERROR.", chaosEmbeddedTrials, chaosEmbeddedTrials)
	evs := storeLog(t, e.store, e.exp)
	c := chaosCheck{t: t, fig: e.fig, scenario: "embedded", exp: e.exp, expDir: e.expDir(), steps: chaosEmbeddedSteps, evs: evs}
	if r.code != 0 || !strings.Contains(r.stdout, want) {
		c.fail("(all)", fmt.Sprintf("the last restore: want exit 0 and %q:\n%s\nthe log:\n%s", want, r, timeline(evs)))
		return
	}
	st, ok := snapshotIn(t, e.expDir())
	if !ok {
		c.fail("(all)", "no experiment state in storage")
		return
	}
	c.stateInvariants(st, chaosEmbeddedTrials)
	// A trial that had finished when a kill struck never ran again.
	starts := (&heldSetup{marks: e.marks}).starts(t)
	for _, k := range e.crashes {
		for id, n := range k.finished {
			if len(starts[id]) != n {
				c.fail(id, fmt.Sprintf("had finished before a kill (log seq %d) but its trainable started again: %v", k.seq, starts[id]))
			}
			for _, ev := range evs {
				if p, ok := ev.Data.(*events.TrialStarted); ok && p.TrialID == id && ev.Seq > k.seq {
					c.fail(id, fmt.Sprintf("had finished before a kill (log seq %d) but attempt %d started at seq %d", k.seq, p.Attempt, ev.Seq))
				}
			}
		}
	}
	// The log's state is the stored one.
	can := tunejet(t, "", e.env, "can-restore", e.expDir(), "--store-dir", e.store)
	if wantCan := fmt.Sprintf("can restore %s: %d TERMINATED, from the event log\n", e.expDir(), chaosEmbeddedTrials); can.stdout != wantCan {
		c.fail("(all)", fmt.Sprintf("can-restore from the log: want %q:\n%s", wantCan, can))
	}
	e.fig.add(func(f *chaosFigures) { f.experiments["embedded"]++ })
}
