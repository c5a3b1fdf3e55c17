package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/ckpt/direct"
	"github.com/tunejet/tunejet/internal/state"
)

// clusterScript is the steps trainable of faults_test.go (report
// step=1..$STEPS, a checkpoint with each, resume from
// TUNEJET_CHECKPOINT_DIR) that waits at two steps for the test: at $GO_AT
// until $MARK_DIR/go exists, at $RELEASE_AT until $MARK_DIR/release does.
// So the test injects each fault while every trial is running, however
// long the cluster takes to recover, and the first fault while reports
// flow.
const clusterScript = `set -eu
wait_for() {
	n=0
	while [ ! -e "$MARK_DIR/$1" ] && [ -d "$MARK_DIR" ] && [ "$n" -lt 2400 ]; do
		n=$((n + 1))
		sleep 0.05
	done
}
step=0
if [ -n "${TUNEJET_CHECKPOINT_DIR:-}" ]; then step=$(cat "$TUNEJET_CHECKPOINT_DIR/step"); fi
while [ "$step" -lt "$STEPS" ]; do
	step=$((step + 1))
	dir=$(mktemp -d)
	echo "$step" > "$dir/step"
	out=$("$TUNEJET_BIN" report --checkpoint "$dir" step=$step)
	rm -rf "$dir"
	if [ "$out" = stop ]; then exit 0; fi
	if [ "$step" -eq "$GO_AT" ]; then wait_for go; fi
	if [ "$step" -eq "$RELEASE_AT" ]; then wait_for release; fi
	sleep "$STEP_SLEEP"
done
`

// clusterExperiment runs it on a grid of six, with retries and a bounded
// number of kept checkpoints.
const clusterExperiment = `name: %s
trainable:
  command: ["/bin/sh", "steps.sh"]
param_space:
  x: {grid_search: [1, 2, 3, 4, 5, 6]}
run_config:
  storage_path: %s
  failure_config: {max_failures: 2, heartbeat_timeout_s: 3}
  checkpoint_config: {num_to_keep: 3, route: %s}
`

// A trial takes ~3-4 s when not held: each step is a sleep plus a
// `tunejet report` with a checkpoint.
const (
	clusterSteps     = 14
	clusterGoAt      = 3
	clusterReleaseAt = 8
	clusterStepSleep = "0.2"
)

// TestClusterSurvivesLosses runs a deployment the way an operator does: a
// 3-node JetStream cluster of real nats-server processes, and every
// tunejet service as its own process with replicas 3 — two controllers, a
// syncer, a restorer and two runners. While an experiment runs, one NATS
// node (the event log's leader) is killed and restarted, a runner is
// killed, and the controller holding the experiment's lease is killed so
// the standby takes over. The experiment completes, every trial has each
// report the fold accepted exactly once in result.json, and every kept
// checkpoint is in storage.
//
// The checkpoints take the default route (auto: the runners see the
// storage folder and write them there); TestClusterSurvivesLossesObjectStore
// runs the same with every checkpoint through the replicated Object Store.
func TestClusterSurvivesLosses(t *testing.T) { clusterSurvivesLosses(t, events.RouteAuto) }

// TestClusterSurvivesLossesObjectStore is TestClusterSurvivesLosses with
// checkpoint_config.route object_store: every checkpoint is staged in the
// Object Store (R3) and persisted by the syncer while the losses happen.
func TestClusterSurvivesLossesObjectStore(t *testing.T) {
	t.Parallel()
	clusterSurvivesLosses(t, events.RouteObjectStore)
}

func clusterSurvivesLosses(t *testing.T, route string) {
	begin := time.Now()
	logf := func(format string, args ...any) {
		t.Helper()
		t.Logf("%6.2fs "+format, append([]any{time.Since(begin).Seconds()}, args...)...)
	}
	const exp = "cluster"
	cl := startCluster(t, buildNatsServer(t), 3)
	logf("cluster up: meta leader elected")
	urls := cl.urls()

	storage, marks, dir := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, dir, "steps.sh", clusterScript)
	file := writeFile(t, dir, "experiment.yaml", fmt.Sprintf(clusterExperiment, exp, storage, route))
	env := baseEnv("TUNEJET_BIN="+tunejetBin, "MARK_DIR="+marks, "STEPS="+strconv.Itoa(clusterSteps),
		"STEP_SLEEP="+clusterStepSleep, "GO_AT="+strconv.Itoa(clusterGoAt), "RELEASE_AT="+strconv.Itoa(clusterReleaseAt),
		"TUNEJET_LOG_FORMAT=json")
	service := func(args ...string) *proc {
		return startTunejet(t, "", env, append(args, "--nats", urls, "--replicas", "3")...)
	}
	controllers := []*proc{service("controller"), service("controller")}
	services := append([]*proc{service("syncer"), service("restorer")}, controllers...)
	runners := map[string]*proc{}
	for _, name := range []string{"rA", "rB"} {
		runners[name] = service("runner", "--slots", "2", "--name", name, "--work-dir", t.TempDir())
	}

	// alive fails the test at once if a service that should be running
	// has exited (dead ones are taken out as the test kills them).
	alive := map[*proc]bool{}
	for _, p := range services {
		alive[p] = true
	}
	for _, p := range runners {
		alive[p] = true
	}
	checkAlive := func() {
		t.Helper()
		for p := range alive {
			if p.exited() {
				t.Fatalf("service %q exited:\n%s", p.name, p.stderr)
			}
		}
	}

	js := cl.js(t)
	// Submit only once the services have provisioned the streams (R3) and
	// both runners are registered: the deployment is up.
	bustest.Eventually(t, 30*time.Second, "the services to provision and both runners to register", func() bool {
		checkAlive()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		rs, err := liveRunners(ctx, js)
		return err == nil && len(rs) == 2
	})
	logf("services up")
	run := startTunejet(t, "", baseEnv(), "run", "--nats", urls, file)
	watch := watchExperiment(t, js, exp)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the experiment's events (without reports and syncer events):\n%s", timeline(watch.events()))
			t.Logf("the consumers of %s:\n%s", bus.StreamName, consumers(js))
		}
	})
	waitLog := func(what string, cond func(evs []*events.Event) bool) {
		t.Helper()
		watch.waitFor(t, 60*time.Second, what, run, func(evs []*events.Event) bool {
			checkAlive()
			return cond(evs)
		})
		logf("%s", what)
	}

	// 1. The event log's leader node dies while trials report; the others
	// carry on; it comes back with its store and catches up.
	waitLog(fmt.Sprintf("4 trials running, each at step %d", clusterGoAt), func(evs []*events.Event) bool {
		n := 0
		for _, tl := range trials(evs) {
			if len(tl.started) > 0 && len(tl.checkpoints[1]) >= clusterGoAt {
				n++
			}
		}
		return n >= 4
	})
	if !checkReplicas(t, js, exp) {
		t.Fatal("a stream or bucket is not replicated on every node: losing one would lose it")
	}
	victim := cl.streamLeader(t, js, bus.StreamName)
	victim.kill()
	killed := time.Now()
	logf("killed nats node %s (leader of %s)", victim.name, bus.StreamName)
	writeFile(t, marks, "go", "")
	waitLog("5 reports made with the node down", func(evs []*events.Event) bool {
		n := 0
		for _, ev := range evs {
			if p, ok := ev.Data.(*events.TrialReported); ok && ev.Time.After(killed) {
				n += len(p.Results())
			}
		}
		return n >= 5
	})
	victim.start(t)
	logf("restarted nats node %s", victim.name)
	victim.waitHealthy(t, 45*time.Second)
	logf("nats node %s healthy (JetStream current)", victim.name)

	// 2. A runner running a trial that has checkpointed dies without a word.
	var doomed string
	waitLog("a trial running with a checkpoint of its current attempt", func(evs []*events.Event) bool {
		for _, tl := range trials(evs) {
			if len(tl.completed) > 0 || len(tl.started) == 0 {
				continue
			}
			cur := tl.started[len(tl.started)-1]
			if len(tl.checkpoints[cur.Attempt]) > 0 && runners[cur.Runner] != nil {
				doomed = cur.Runner
				return true
			}
		}
		return false
	})
	delete(alive, runners[doomed])
	runners[doomed].kill()
	logf("killed runner %s", doomed)

	// 3. The controller holding the experiment's lease dies while trials
	// run; the standby takes over once the lease expires.
	waitLog("a trial running on the surviving runner", func(evs []*events.Event) bool {
		for _, tl := range trials(evs) {
			if len(tl.completed) == 0 && len(tl.started) > 0 && tl.started[len(tl.started)-1].Runner != doomed {
				return true
			}
		}
		return false
	})
	leader, standby := leaseHolder(t, js, exp, controllers)
	delete(alive, leader)
	leader.kill()
	logf("killed the lease holder, controller pid %d", leader.cmd.Process.Pid)
	leaseHolder(t, js, exp, []*proc{standby, leader}) // the killed one cannot renew it
	logf("the standby holds the lease")

	// Let the trials run to their end.
	writeFile(t, marks, "release", "")
	r := run.wait(t)
	logf("tunejet run exited %d", r.code)
	if r.code != 0 || !strings.Contains(r.stdout, "6 TERMINATED, 0 ERROR") {
		t.Fatalf("tunejet run --nats: want exit 0 with 6 TERMINATED:\n%s", r)
	}
	checkAlive()

	evs := replayCluster(t, js, exp)
	for _, ev := range evs {
		if c, ok := ev.Data.(*events.TrialCheckpointed); ok && direct.Written(&c.Checkpoint) != (route == events.RouteAuto) {
			t.Fatalf("route %s, yet %s's %s was written direct=%v", route, c.TrialID, c.Checkpoint.Name, direct.Written(&c.Checkpoint))
		}
	}
	checkClusterRun(t, evs, exp, storage, standby)
	checkReplicas(t, js, exp)
	logf("checked")
}

// checkClusterRun checks the log and storage after the run: each trial
// created once and completed once, result.json holding exactly the reports
// the fold accepted, and every kept checkpoint in storage.
func checkClusterRun(t *testing.T, evs []*events.Event, exp, storage string, standby *proc) {
	t.Helper()
	// Fold the log, noting the reports the fold accepts (those of each
	// trial's current attempt, in the attempt's order), per trial.
	fold := state.New(exp)
	accepted := map[string][]int{}
	created, completed := map[string]int{}, map[string]int{}
	var ended *events.Event
	// Stored reports per trial, attempt and iteration: the log must hold
	// each report once, even where a publish was retried across the loss
	// of a node.
	stored := map[string]map[[2]int]int{}
	// The attempt whose completion the fold took, per trial, and the
	// iterations each attempt stored, in log order.
	finisher := map[string]int{}
	inLog := map[string]map[int][]int{}
	// Results sent together are folded (and counted) one by one.
	var each []*events.Event
	for _, ev := range evs {
		each = append(each, events.Split(ev)...)
	}
	for _, ev := range each {
		results := 0
		if tr := fold.Trials[ev.Trial()]; tr != nil {
			results = tr.NumResults
		}
		var changed bool
		fold, changed, _ = state.Fold(t.Context(), fold, ev, nil)
		// A result counts when the fold takes it: from trial.reported, or
		// from the trial.checkpointed it was reported with.
		if tr := fold.Trials[ev.Trial()]; tr != nil && tr.NumResults > results {
			accepted[tr.ID] = append(accepted[tr.ID], tr.Iteration)
		}
		switch p := ev.Data.(type) {
		case *events.ExperimentCompleted:
			ended = ev
		case *events.TrialCreated:
			created[p.TrialID]++
		case *events.TrialCompleted:
			if changed {
				completed[p.TrialID]++
				finisher[p.TrialID] = p.Attempt
			}
		case *events.TrialReported:
			f, _ := p.Result["training_iteration"].(float64)
			it := int(f)
			if stored[p.TrialID] == nil {
				stored[p.TrialID] = map[[2]int]int{}
			}
			stored[p.TrialID][[2]int{p.Attempt, it}]++
			if inLog[p.TrialID] == nil {
				inLog[p.TrialID] = map[int][]int{}
			}
			inLog[p.TrialID][p.Attempt] = append(inLog[p.TrialID][p.Attempt], it)
		}
	}
	if len(created) != 6 {
		t.Errorf("%d trials created, want 6", len(created))
	}
	for id, n := range created {
		if n != 1 {
			t.Errorf("trial %s created %d times", id, n)
		}
	}
	// The standby ended the experiment: it took over.
	if ended == nil || !strings.HasSuffix(ended.Source, "-"+strconv.Itoa(standby.cmd.Process.Pid)) {
		t.Errorf("the experiment.completed event %+v is not the standby controller's (pid %d)", ended, standby.cmd.Process.Pid)
	}
	for id, byAttempt := range stored {
		for k, n := range byAttempt {
			if n != 1 {
				t.Errorf("trial %s: the log holds attempt %d's report of iteration %d %d times", id, k[0], k[1], n)
			}
		}
	}
	// The attempt that finished each trial stored its reports in order,
	// one per step from where it resumed to the last: none was lost, or
	// stored out of order (which the fold would drop), by a publish
	// retried across the loss of a node.
	for id, a := range finisher {
		its := inLog[id][a]
		for i := 1; i < len(its); i++ {
			if its[i] != its[i-1]+1 {
				t.Errorf("trial %s: attempt %d stored iterations %v: not one per step, in order", id, a, its)
				break
			}
		}
	}
	for id, tl := range trials(evs) {
		// A superseded attempt may still log its completion; the fold
		// takes exactly one.
		if completed[id] != 1 {
			t.Errorf("trial %s: the fold accepted %d completions (%d logged)", id, completed[id], len(tl.completed))
		}
		var desc []string
		for _, s := range tl.started {
			desc = append(desc, fmt.Sprintf("attempt %d on %s from %q", s.Attempt, s.Runner, s.RestoredFrom))
		}
		for _, f := range tl.failed {
			desc = append(desc, fmt.Sprintf("attempt %d failed (%s, counted %v: %q)", f.Attempt, f.Cause, f.Counted, tail(f.Error, 200)))
		}
		t.Logf("trial %s: %s", id, strings.Join(desc, "; "))
	}

	final := loadState(t, filepath.Join(storage, exp))
	if final.Status != state.ExperimentCompleted {
		t.Errorf("stored state: experiment %s, want %s", final.Status, state.ExperimentCompleted)
	}
	if len(final.Trials) != 6 {
		t.Errorf("stored state: %d trials, want 6", len(final.Trials))
	}
	for _, tr := range final.TrialList() {
		logged := fold.Trials[tr.ID]
		if logged == nil {
			t.Errorf("trial %s is in the stored state but not in the log", tr.ID)
			continue
		}
		if tr.Status != events.StatusTerminated || tr.Iteration != clusterSteps {
			t.Errorf("trial %s: stored status %s at iteration %d; want TERMINATED at %d", tr.ID, tr.Status, tr.Iteration, clusterSteps)
		}
		if tr.NumResults != logged.NumResults || tr.NumResults != len(accepted[tr.ID]) {
			t.Errorf("trial %s: stored state counts %d results, the log's fold %d (%d accepted reports)", tr.ID, tr.NumResults, logged.NumResults, len(accepted[tr.ID]))
		}
		// result.json: one line per accepted report, in order, nothing
		// else.
		rows := resultLines(t, filepath.Join(storage, exp, tr.DirName, "result.json"))
		its := make([]int, len(rows))
		for i, row := range rows {
			f, _ := row["training_iteration"].(float64)
			its[i] = int(f)
			if row["trial_id"] != tr.ID {
				t.Errorf("trial %s: result.json line %d is trial %v's", tr.ID, i+1, row["trial_id"])
			}
		}
		if len(rows) != tr.NumResults || !slices.Equal(its, accepted[tr.ID]) {
			t.Errorf("trial %s: result.json has %d lines, iterations %v; the state counts %d results and the fold accepted iterations %v",
				tr.ID, len(rows), its, tr.NumResults, accepted[tr.ID])
		}
		// The last report is the last step (the attempt that finished may
		// have resumed from the last checkpoint and had nothing left to do).
		if its := accepted[tr.ID]; len(its) == 0 || its[len(its)-1] != clusterSteps {
			t.Errorf("trial %s: the last accepted report is not iteration %d: %v", tr.ID, clusterSteps, its)
		}
		// Every kept checkpoint is durable and whole in storage.
		if len(tr.Checkpoints) == 0 || tr.LatestCheckpoint().Iteration != clusterSteps {
			t.Errorf("trial %s: kept checkpoints %+v; want the latest at iteration %d", tr.ID, tr.Checkpoints, clusterSteps)
		}
		if len(tr.Checkpoints) > 3 {
			t.Errorf("trial %s: %d checkpoints kept, want at most num_to_keep 3", tr.ID, len(tr.Checkpoints))
		}
		for _, c := range tr.Checkpoints {
			if !tr.Persisted[c.Name] {
				t.Errorf("trial %s: kept checkpoint %s is not marked persisted", tr.ID, c.Name)
			}
			b, err := os.ReadFile(filepath.Join(storage, exp, tr.DirName, c.Name, "step"))
			if err != nil {
				t.Errorf("trial %s: kept checkpoint %s is not in storage: %v", tr.ID, c.Name, err)
				continue
			}
			if got := strings.TrimSpace(string(b)); got != strconv.Itoa(c.Iteration) {
				t.Errorf("trial %s: %s/step holds %q, want %d (the iteration it was reported with)", tr.ID, c.Name, got, c.Iteration)
			}
		}
	}
}

// checkReplicas checks that every stream and bucket tunejet uses is
// replicated on the three nodes: losing any one node loses nothing.
func checkReplicas(t *testing.T, js jetstream.JetStream, exp string) (ok bool) {
	t.Helper()
	ok = true
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	names := []string{bus.StreamName, bus.DLQStreamName, bus.AdvisoryStreamName,
		"KV_" + bus.LeaseBucket, "KV_" + bus.RunnerBucket, "OBJ_" + ckpt.Bucket(exp)}
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Errorf("stream %s: %v", name, err)
			ok = false
			continue
		}
		if n := s.CachedInfo().Config.Replicas; n != 3 {
			t.Errorf("stream %s has %d replicas, want 3 (every service ran with --replicas 3; the CLI submitted to R3 streams)", name, n)
			ok = false
		}
	}
	return ok
}

// leaseHolder waits until one of the two controllers holds the
// experiment's lease (read from the tunejet_leases bucket) and returns it
// and the other one.
func leaseHolder(t *testing.T, js jetstream.JetStream, exp string, controllers []*proc) (holder, other *proc) {
	t.Helper()
	var value string
	bustest.Eventually(t, 30*time.Second, "a controller to hold the experiment's lease", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		kv, err := js.KeyValue(ctx, bus.LeaseBucket)
		if err != nil {
			return false
		}
		e, err := kv.Get(ctx, exp)
		if err != nil {
			return false
		}
		value = string(e.Value()) // tunejet/controller/<host>-<pid>
		for i, c := range controllers {
			if strings.HasSuffix(value, "-"+strconv.Itoa(c.cmd.Process.Pid)) && !c.exited() {
				holder, other = c, controllers[1-i]
				return true
			}
		}
		return false
	})
	return holder, other
}

// buildNatsServer builds nats-server from the module tunejet depends on.
func buildNatsServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nats-server")
	build := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	build.Dir = moduleRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build github.com/nats-io/nats-server/v2: %v\n%s", err, out)
	}
	return bin
}

// natsCluster is a JetStream cluster of nats-server processes on loopback.
type natsCluster struct{ nodes []*natsNode }

// natsNode is one nats-server process, restartable with its configuration
// and store.
type natsNode struct {
	bin, name, conf string
	client, route   int // ports
	monitor         int
	log             *lockedBuffer
	cmd             *exec.Cmd
	done            chan struct{}
}

// startCluster starts n nodes and waits until JetStream has a meta leader.
// One node (n = 1) is a single server, not a cluster: it has no routes and
// no meta group.
func startCluster(t *testing.T, bin string, n int) *natsCluster {
	t.Helper()
	ports := freeLowPorts(t, 3*n)
	cl := &natsCluster{}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i]))
	}
	for i := range n {
		nd := &natsNode{bin: bin, name: fmt.Sprintf("n%d", i+1), client: ports[i], route: ports[n+i], monitor: ports[2*n+i], log: &lockedBuffer{}}
		dir := t.TempDir()
		cluster := fmt.Sprintf(`cluster {
  name: tunejet_test
  listen: 127.0.0.1:%d
  routes: [
    %s
  ]
}
`, nd.route, strings.Join(routes, "\n    "))
		if n == 1 {
			cluster = ""
		}
		nd.conf = writeFile(t, dir, "nats.conf", fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
jetstream {
  store_dir: %q
}
%s`, nd.name, nd.client, nd.monitor, filepath.Join(dir, "jetstream"), cluster))
		cl.nodes = append(cl.nodes, nd)
		t.Cleanup(func() {
			nd.kill()
			if t.Failed() {
				t.Logf("nats-server %s (the last 12 KiB of its log without route dial errors):\n%s", nd.name, tail(withoutRouteDials(nd.log.String()), 12<<10))
			}
		})
	}
	for _, nd := range cl.nodes {
		nd.start(t)
	}
	// Formed: a meta leader that every client sees, and that sees every
	// other node current (until then, placing an R3 stream fails with "no
	// suitable peers for placement, peer offline").
	bustest.Eventually(t, 30*time.Second, "the JetStream meta leader, with all peers current", func() bool {
		if n == 1 {
			return true
		}
		time.Sleep(40 * time.Millisecond) // poll gently
		return cl.metaFormed()
	})
	bustest.Eventually(t, 30*time.Second, "every node to answer JetStream requests", func() bool {
		for _, nd := range cl.nodes {
			nc, err := nats.Connect(nd.url(), nats.Timeout(time.Second))
			if err != nil {
				return false
			}
			js, err := jetstream.New(nc)
			if err == nil {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				_, err = js.AccountInfo(ctx)
				cancel()
			}
			nc.Close()
			if err != nil {
				return false
			}
		}
		return true
	})
	return cl
}

// metaFormed reports whether a node leads the JetStream meta group and
// sees every other node as current (its /jsz monitoring endpoint).
func (cl *natsCluster) metaFormed() bool {
	client := &http.Client{Timeout: time.Second}
	for _, nd := range cl.nodes {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz", nd.monitor))
		if err != nil {
			continue
		}
		var jsz struct {
			Meta *struct {
				Leader   string `json:"leader"`
				Replicas []struct {
					Current bool `json:"current"`
					Offline bool `json:"offline"`
				} `json:"replicas"`
			} `json:"meta_cluster"`
		}
		err = json.NewDecoder(resp.Body).Decode(&jsz)
		resp.Body.Close()
		if err != nil || jsz.Meta == nil || jsz.Meta.Leader != nd.name || len(jsz.Meta.Replicas) != len(cl.nodes)-1 {
			continue
		}
		for _, r := range jsz.Meta.Replicas {
			if !r.Current || r.Offline {
				return false
			}
		}
		return true
	}
	return false
}

// urls is the comma-separated client URLs of every node.
func (cl *natsCluster) urls() string {
	var out []string
	for _, nd := range cl.nodes {
		out = append(out, nd.url())
	}
	return strings.Join(out, ",")
}

// js connects to the cluster for the test's reads, behind the services'
// backs: it reconnects forever, to whichever node is up.
func (cl *natsCluster) js(t *testing.T) jetstream.JetStream {
	t.Helper()
	return bustest.JetStream(t, cl.urls())
}

// liveRunners lists the runners registered with the deployment js
// reaches, read on js's connection.
func liveRunners(ctx context.Context, js jetstream.JetStream) ([]bus.RunnerInfo, error) {
	b, err := bus.New(js.Conn(), "test", zerolog.Nop())
	if err != nil {
		return nil, err
	}
	rs, ok, err := b.LiveRunners(ctx)
	if err == nil && !ok {
		err = errors.New("no runner has created the registry yet")
	}
	return rs, err
}

// streamLeader is the node leading a stream's Raft group.
func (cl *natsCluster) streamLeader(t *testing.T, js jetstream.JetStream, stream string) *natsNode {
	t.Helper()
	var leader string
	bustest.Eventually(t, 20*time.Second, "the leader of stream "+stream, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return false
		}
		if ci := s.CachedInfo().Cluster; ci != nil {
			leader = ci.Leader
		}
		return leader != ""
	})
	for _, nd := range cl.nodes {
		if nd.name == leader {
			return nd
		}
	}
	t.Fatalf("stream %s is led by %q, not a node of the cluster", stream, leader)
	return nil
}

func (nd *natsNode) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", nd.client) }

// start runs the node with its configuration and store.
func (nd *natsNode) start(t *testing.T) {
	t.Helper()
	fmt.Fprintf(nd.log, "=== start %s\n", time.Now().Format(time.TimeOnly))
	nd.cmd = exec.Command(nd.bin, "-c", nd.conf)
	nd.cmd.Stdout, nd.cmd.Stderr = nd.log, nd.log
	nd.done = make(chan struct{})
	if err := nd.cmd.Start(); err != nil {
		t.Fatalf("start nats-server %s: %v", nd.name, err)
	}
	cmd, done := nd.cmd, nd.done
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
}

// kill sends SIGKILL and waits for the process to be reaped.
func (nd *natsNode) kill() {
	if nd.cmd == nil {
		return
	}
	select {
	case <-nd.done:
		return
	default:
	}
	_ = nd.cmd.Process.Signal(syscall.SIGKILL)
	<-nd.done
}

// waitHealthy polls the node's /healthz, which answers 200 once it serves
// clients and its JetStream assets are current.
func (nd *natsNode) waitHealthy(t *testing.T, within time.Duration) {
	t.Helper()
	bustest.Eventually(t, within, "nats node "+nd.name+" to be healthy", func() bool {
		time.Sleep(40 * time.Millisecond) // poll gently
		return nd.healthy()
	})
}

// healthy asks the node's /healthz once.
func (nd *natsNode) healthy() bool {
	client := &http.Client{Timeout: time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", nd.monitor))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// freeLowPorts returns n distinct free loopback ports below the Linux
// ephemeral range (32768-60999), so that no outgoing connection can take
// one while a node that owns it is down.
func freeLowPorts(t *testing.T, n int) []int {
	t.Helper()
	seen := map[int]bool{}
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 10000 {
			t.Fatalf("found only %d free ports below 32768", len(out))
		}
		p := 20000 + rand.IntN(12000)
		if seen[p] {
			continue
		}
		seen[p] = true
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		out = append(out, p)
	}
	return out
}

// withoutRouteDials drops the lines a node logs every second while a peer
// is down.
func withoutRouteDials(log string) string {
	var keep []string
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "Error trying to connect to route") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// logReader reads an experiment's events from the event log one
// sequence at a time with plain message gets, each bounded: the test's
// view of the log survives the loss of any node (it does not rely on the
// consumers under test).
type logReader struct {
	js   jetstream.JetStream
	exp  string
	next uint64 // the next sequence to read
	evs  []*events.Event
}

// readNew appends the events stored since the last call, until the end of
// the log or the first error (a failover: the caller tries again later).
func (r *logReader) readNew(ctx context.Context) error {
	get := func(f func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return f(ctx)
	}
	var s jetstream.Stream
	if err := get(func(ctx context.Context) (err error) { s, err = r.js.Stream(ctx, bus.StreamName); return err }); err != nil {
		return err
	}
	last := s.CachedInfo().State.LastSeq
	if r.next == 0 {
		r.next = 1
	}
	for ; r.next <= last; r.next++ {
		var m *jetstream.RawStreamMsg
		err := get(func(ctx context.Context) (err error) { m, err = s.GetMsg(ctx, r.next); return err })
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted (dead work), below the last sequence
		}
		if err != nil {
			return err
		}
		ev, err := events.Decode(m.Subject, m.Header, m.Data)
		if err != nil || ev.Experiment != r.exp {
			continue
		}
		ev.Seq = m.Sequence
		r.evs = append(r.evs, ev)
	}
	return nil
}

// expWatch follows an experiment's events for the whole test.
type expWatch struct {
	mu  sync.Mutex
	evs []*events.Event
}

func watchExperiment(t *testing.T, js jetstream.JetStream, exp string) *expWatch {
	w := &expWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		r := &logReader{js: js, exp: exp}
		for ctx.Err() == nil {
			_ = r.readNew(ctx)
			w.mu.Lock()
			w.evs = slices.Clone(r.evs)
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *expWatch) events() []*events.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.evs
}

// waitFor polls the events seen so far until cond holds, failing if run
// exits first (the moment to inject a fault has passed).
func (w *expWatch) waitFor(t *testing.T, within time.Duration, what string, run *proc, cond func([]*events.Event) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond(w.events()) {
		if run.exited() {
			t.Fatalf("tunejet run exited before %s:\n%s", what, run.wait(t))
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// replayCluster returns every event of the experiment, read afresh.
func replayCluster(t *testing.T, js jetstream.JetStream, exp string) []*events.Event {
	t.Helper()
	r := &logReader{js: js, exp: exp}
	bustest.Eventually(t, 30*time.Second, "a full read of the log", func() bool {
		return r.readNew(t.Context()) == nil
	})
	return r.evs
}

// timeline is a compact listing of the events that tell how the trials
// went, for a failed test's log.
func timeline(evs []*events.Event) string {
	var sb strings.Builder
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *events.TrialReported, *events.CheckpointPersisted, *events.CheckpointDeleted, *events.SyncCompleted:
		case *events.TrialCheckpointed:
			fmt.Fprintf(&sb, "%6d %s %-32s %s attempt %d %s\n", ev.Seq, ev.Time.Format("15:04:05.000"), ev.Source, ev.Type(), p.Attempt, p.Checkpoint.Name)
		default:
			fmt.Fprintf(&sb, "%6d %s %-32s %s %+v\n", ev.Seq, ev.Time.Format("15:04:05.000"), ev.Source, ev.Type(), trimPayload(ev.Data))
		}
	}
	return sb.String()
}

func trimPayload(p events.Payload) string {
	switch p := p.(type) {
	case *events.TrialScheduled:
		return "trial " + p.TrialID
	case *events.ExperimentSubmitted:
		return ""
	}
	return tail(fmt.Sprintf("%+v", p), 300)
}

// consumers describes the event log's consumers, for a failed test's log:
// where each is led and how far it has delivered.
func consumers(js jetstream.JetStream) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, bus.StreamName)
	if err != nil {
		return err.Error()
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "stream: last seq %d, leader %s\n", s.CachedInfo().State.LastSeq, s.CachedInfo().Cluster.Leader)
	list := s.ListConsumers(ctx)
	for ci := range list.Info() {
		leader := ""
		if ci.Cluster != nil {
			leader = ci.Cluster.Leader
		}
		fmt.Fprintf(&sb, "%-28s leader %-3s filter %-50q delivered %d ack floor %d pending %d waiting %d ack pending %d redelivered %d\n",
			ci.Name, leader, ci.Config.FilterSubject+strings.Join(ci.Config.FilterSubjects, ","), ci.Delivered.Stream, ci.AckFloor.Stream,
			ci.NumPending, ci.NumWaiting, ci.NumAckPending, ci.NumRedelivered)
	}
	if err := list.Err(); err != nil {
		fmt.Fprintf(&sb, "listing: %v\n", err)
	}
	return sb.String()
}
