package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/metrics"
	"github.com/tunejet/tunejet/internal/trainproto"
)

// A warm worker is a command trainable started once as a fork server
// (events.Trainable.ForkServer; docs/trainable-protocol.md, "Warm
// workers"): it loads the trainable, then forks one process per attempt.
// The attempt's process is then exactly a cold one's, only without the
// interpreter's start and the trainable's imports: its own process group,
// stdio files, working directory and environment, its exit status
// relayed by the worker. Heartbeats, fencing and attempts stay per trial.
//
// The runner keeps one worker per experiment run, command and resource
// assignment (CUDA_VISIBLE_DEVICES is the worker's for its whole life),
// stops it once it has been idle for Config.WorkerIdle, and stops every
// worker of a run when the runner stops pulling the run's work. A worker
// that cannot start, or says forking it is unsafe, is not tried again
// for that key: its trials start cold.

// warmSet is the warm workers of one experiment run.
type warmSet struct {
	s    *Service
	exp  string
	idle time.Duration

	mu      sync.Mutex
	workers map[string]*warmWorker // key → live worker
	cold    map[string]bool        // keys whose worker could not serve
	closed  bool
	started int // workers started, to name their logs
}

func newWarmSet(s *Service, exp string) *warmSet {
	return &warmSet{s: s, exp: exp, idle: s.cfg.WorkerIdle, workers: map[string]*warmWorker{}, cold: map[string]bool{}}
}

type warmSetKey struct{}

// withWarmSet gives the attempts of ctx the run's warm workers.
func withWarmSet(ctx context.Context, w *warmSet) context.Context {
	return context.WithValue(ctx, warmSetKey{}, w)
}

func warmSetFrom(ctx context.Context) *warmSet {
	w, _ := ctx.Value(warmSetKey{}).(*warmSet)
	return w
}

// worker returns the ready worker of key, starting it if there is none,
// or nil when the trial must start cold. env is the worker's environment.
func (ws *warmSet) worker(ctx context.Context, e *commandExecutor, key string, args, env []string) *warmWorker {
	ws.mu.Lock()
	w := ws.workers[key]
	if w != nil && w.gone() {
		delete(ws.workers, key)
		w = nil
	}
	if w == nil {
		if ws.closed || ws.cold[key] {
			ws.mu.Unlock()
			return nil
		}
		ws.started++
		w = &warmWorker{set: ws, key: key, ready: make(chan struct{}), dead: make(chan struct{}),
			forks: map[int]chan forkReply{}, procs: map[int]chan error{},
			log: e.Log.With().Str("experiment", ws.exp).Int("warm_worker", ws.started).Logger()}
		ws.workers[key] = w
		go w.start(context.WithoutCancel(ctx), e, args, env, ws.started)
	}
	w.busy++
	w.stopIdleTimer()
	ws.mu.Unlock()

	select {
	case <-w.ready:
	case <-ctx.Done():
		ws.release(w)
		return nil
	}
	if w.err != nil {
		ws.mu.Lock()
		if !ws.cold[key] {
			ws.cold[key] = true
			w.log.Warn().Err(w.err).Msg("no warm worker for this trainable; its trials start cold")
		}
		if ws.workers[key] == w {
			delete(ws.workers, key)
		}
		ws.mu.Unlock()
		return nil
	}
	return w
}

// release ends a trial's use of w; an idle worker stops after ws.idle.
func (ws *warmSet) release(w *warmWorker) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.busy--
	if w.busy > 0 {
		return
	}
	w.idleSince = time.Now()
	w.idleTimer = time.AfterFunc(ws.idle, func() {
		ws.mu.Lock()
		idle := w.busy == 0 && ws.workers[w.key] == w
		if idle {
			delete(ws.workers, w.key)
		}
		ws.mu.Unlock()
		if idle {
			w.log.Debug().Dur("idle", ws.idle).Msg("warm worker idle; stopping it")
			w.stop()
		}
	})
}

// close stops every worker; attempts that ask after it start cold.
func (ws *warmSet) close() {
	ws.mu.Lock()
	ws.closed = true
	workers := ws.workers
	ws.workers = map[string]*warmWorker{}
	ws.mu.Unlock()
	for _, w := range workers {
		w.stop()
	}
	for _, w := range workers {
		<-w.dead
	}
}

// infos describes the live workers, for the registry and /metrics.
func (ws *warmSet) infos() []bus.WarmWorker {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]bus.WarmWorker, 0, len(ws.workers))
	for _, w := range ws.workers {
		select {
		case <-w.ready:
		default:
			continue // still loading
		}
		if w.err != nil || w.gone() {
			continue
		}
		info := bus.WarmWorker{Experiment: ws.exp, Trainable: w.trainable, PID: w.pid, GPUIDs: w.gpuIDs,
			Running: w.busy, Trials: w.trials, RSSBytes: rss(w.pid)}
		if w.busy == 0 {
			info.IdleSince = w.idleSince.UTC()
		}
		out = append(out, info)
	}
	return out
}

// warmWorker is one fork server process.
type warmWorker struct {
	set *warmSet
	key string
	log zerolog.Logger

	ready chan struct{} // closed once the worker loaded, or failed to (err)
	err   error
	dead  chan struct{} // closed once the worker's process has ended

	// Set before ready is closed.
	pid       int
	trainable string
	gpuIDs    []string
	requests  *os.File
	stopOnce  sync.Once

	// Guarded by set.mu.
	busy      int // attempts using the worker
	trials    int // attempts forked
	idleSince time.Time
	idleTimer *time.Timer

	mu     sync.Mutex
	ended  bool // the process has ended: no more forks
	nextID int
	forks  map[int]chan forkReply // request id → its reply
	procs  map[int]chan error     // forked pid → its end
}

type forkReply struct {
	pid   int
	ended <-chan error // receives how the forked process ended
	err   error
}

// workerReply is one line the worker writes.
type workerReply struct {
	Ready  bool   `json:"ready"`
	Unsafe string `json:"unsafe"`
	ID     *int   `json:"id"`
	PID    int    `json:"pid"`
	Error  string `json:"error"`
	Exit   int    `json:"exit"`
	Status int    `json:"status"`
	Signal int    `json:"signal"`
}

// errWorkerDied ends the attempts of a worker whose process ended.
var errWorkerDied = errors.New("the warm worker that forked this trial's process died")

func (w *warmWorker) gone() bool {
	select {
	case <-w.dead:
		return true
	default:
		return false
	}
}

// start runs the worker's process and reads its replies until it ends.
func (w *warmWorker) start(ctx context.Context, e *commandExecutor, args, env []string, n int) {
	fail := func(err error) {
		w.err = err
		close(w.ready)
		close(w.dead)
	}
	dir := filepath.Join(w.set.s.cfg.WorkDir, w.set.exp, ".workers")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fail(fmt.Errorf("warm worker: %w", err))
		return
	}
	sock, stopServe, err := e.serve(ctx, fmt.Sprintf("worker-%s-%d", w.set.exp, n), objectServer{w.set.s, w.set.exp})
	if err != nil {
		fail(err)
		return
	}
	defer stopServe()
	logFile, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("worker-%d.log", n)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fail(fmt.Errorf("warm worker: %w", err))
		return
	}
	defer func() { _ = logFile.Close() }()
	reqR, reqW, err := os.Pipe()
	if err != nil {
		fail(fmt.Errorf("warm worker: %w", err))
		return
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		_ = reqR.Close()
		_ = reqW.Close()
		fail(fmt.Errorf("warm worker: %w", err))
		return
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(env, trainproto.EnvExperiment+"="+w.set.exp, trainproto.EnvSocket+"="+sock, trainproto.EnvForkServer+"=1")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{reqR, repW} // fds 3 and 4
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = reqR.Close()
	_ = repW.Close()
	if err != nil {
		_ = reqW.Close()
		_ = repR.Close()
		fail(fmt.Errorf("start warm worker %q: %w", args[0], err))
		return
	}
	w.pid, w.requests, w.trainable = cmd.Process.Pid, reqW, args[len(args)-1]
	w.gpuIDs = strings.Split(lookupEnv(env, "CUDA_VISIBLE_DEVICES"), ",")
	if w.gpuIDs[0] == "" {
		w.gpuIDs = nil
	}
	w.log = w.log.With().Int("pid", w.pid).Logger()
	w.read(repR)
	_ = repR.Close()
	_ = reqW.Close()
	waitErr := cmd.Wait()
	select {
	case <-w.ready:
	default:
		if waitErr == nil {
			waitErr = errors.New("exit status 0")
		}
		w.err = fmt.Errorf("warm worker exited while loading (%w); see %s", waitErr, logFile.Name())
		close(w.ready)
	}
	w.log.Debug().AnErr("exit", waitErr).Msg("warm worker ended")
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	close(w.dead) // before its attempts learn it: their retries start another
	for id, ch := range w.forks {
		ch <- forkReply{err: errWorkerDied}
		delete(w.forks, id)
	}
	for pid, ch := range w.procs {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // nobody would report its end
		ch <- fmt.Errorf("%w (pid %d); the trial's process was killed", errWorkerDied, w.pid)
		delete(w.procs, pid)
	}
}

// read handles the worker's replies until its pipe closes.
func (w *warmWorker) read(r *os.File) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var rep workerReply
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			w.log.Warn().Err(err).Bytes("line", sc.Bytes()).Msg("bad line from warm worker; stopping it")
			w.stop()
			continue
		}
		switch {
		case rep.Ready:
			w.log.Info().Str("trainable", w.trainable).Strs("gpu_ids", w.gpuIDs).Msg("warm worker ready")
			close(w.ready)
		case rep.Unsafe != "":
			w.err = fmt.Errorf("forking it is unsafe: %s", rep.Unsafe)
			close(w.ready)
		case rep.ID != nil:
			w.mu.Lock()
			ch := w.forks[*rep.ID]
			delete(w.forks, *rep.ID)
			if ch != nil {
				if rep.Error != "" {
					ch <- forkReply{err: errors.New(rep.Error)}
				} else {
					// Its end may be read before fork returns: the channel
					// goes with the reply, not through the map.
					ended := make(chan error, 1)
					w.procs[rep.PID] = ended
					ch <- forkReply{pid: rep.PID, ended: ended}
				}
			}
			w.mu.Unlock()
		case rep.Exit != 0:
			w.mu.Lock()
			if ch := w.procs[rep.Exit]; ch != nil {
				delete(w.procs, rep.Exit)
				ch <- forkedEnd(rep)
			}
			w.mu.Unlock()
		}
	}
}

// forkedEnd is how a forked process ended, as exec reports a child's.
func forkedEnd(rep workerReply) error {
	switch {
	case rep.Signal != 0:
		return &exitError{code: -1, signal: syscall.Signal(rep.Signal)}
	case rep.Status != 0:
		return &exitError{code: rep.Status}
	}
	return nil
}

// fork starts one attempt's process: env its environment, dir its working
// directory, stdout and stderr the files it appends to. ended receives how
// it ended.
func (w *warmWorker) fork(env []string, dir, stdout, stderr string) (pid int, ended <-chan error, err error) {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return 0, nil, errWorkerDied
	}
	w.nextID++
	id := w.nextID
	ch := make(chan forkReply, 1)
	w.forks[id] = ch
	w.mu.Unlock()
	line, err := json.Marshal(map[string]any{"op": "fork", "id": id, "env": env, "dir": dir, "stdout": stdout, "stderr": stderr})
	if err != nil {
		return 0, nil, fmt.Errorf("fork request: %w", err)
	}
	if _, err := w.requests.Write(append(line, '\n')); err != nil {
		w.mu.Lock()
		delete(w.forks, id)
		w.mu.Unlock()
		return 0, nil, fmt.Errorf("%w: %w", errWorkerDied, err)
	}
	r := <-ch // the worker answers at once, or its end does
	if r.err != nil {
		return 0, nil, r.err
	}
	w.set.mu.Lock()
	w.trials++
	w.set.mu.Unlock()
	if h := w.set.s.hooks.forked; h != nil {
		h(w, r.pid)
	}
	return r.pid, r.ended, nil
}

// stop closes the worker's requests: it exits, and its forked processes
// live on to their ends.
func (w *warmWorker) stop() {
	w.stopOnce.Do(func() {
		<-w.ready
		if w.requests != nil {
			_ = w.requests.Close()
		}
	})
}

func (w *warmWorker) stopIdleTimer() {
	if w.idleTimer != nil {
		w.idleTimer.Stop()
		w.idleTimer = nil
	}
}

// objectServer serves a warm worker's protocol connection while it loads:
// objects only (the driver's description, the pickled trainable).
type objectServer struct {
	s   *Service
	exp string
}

func (o objectServer) Report(context.Context, map[string]any, string) (bool, error) {
	return false, errors.New("a warm worker reports no results; its forked trials do")
}

func (o objectServer) GetCheckpoint(context.Context) (string, error) { return "", nil }

func (o objectServer) GetObject(ctx context.Context, name string) (string, error) {
	return o.s.objectFile(ctx, o.exp, name)
}

// rss is the resident memory of process pid in bytes, 0 if unknown.
func rss(pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// warmWorkers describes the runner's live warm workers and updates their
// gauges on /metrics.
func (s *Service) warmWorkers() []bus.WarmWorker {
	s.mu.Lock()
	sets := make([]*warmSet, 0, len(s.warm))
	for _, ws := range s.warm {
		sets = append(sets, ws)
	}
	s.mu.Unlock()
	var out []bus.WarmWorker
	for _, ws := range sets {
		infos := ws.infos()
		var sum int64
		for _, i := range infos {
			sum += i.RSSBytes
		}
		metrics.WarmWorkers.WithLabelValues(ws.exp).Set(float64(len(infos)))
		metrics.WarmWorkerRSS.WithLabelValues(ws.exp).Set(float64(sum))
		out = append(out, infos...)
	}
	return out
}
