package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunejet/tunejet/events"
)

// The Python benchmarks run a Ray Tune script (bench/testdata/python,
// Ray's API with the imports changed) as a real driver: /usr/bin/python3
// (TUNEJET_PYTHON), with the SDK of this tree on its PYTHONPATH and the
// tunejet binary built from ./cmd/tunejet as TUNEJET_BIN. Its fit() runs
// `tunejet run` against a deployment in this process (a nats-server on a
// loopback port with the controller, one runner and the syncer, as
// BenchmarkBookkeeping/deployment): NATS_URL is how a Python driver
// submits to a deployment, and it is the way to give the runner 16 slots
// (the embedded stack of `tunejet run` has one slot per CPU and the driver
// passes no --slots) and to read every event of the experiment, with its
// time, after fit() returns. The runner runs each trial's command,
// `python3 -m tunejet._worker NAME`, as it does on any deployment; each
// Fit gets a deployment of its own, so that nothing one leaves warm
// serves the next.
//
// Each script prints one line "RESULT {json}" that the benchmark decodes.
// A script that fails fails the benchmark, with the experiment's log
// summarized; so does a trial that did not end TERMINATED.

// pyScripts is the folder of the driver scripts, relative to this package.
const pyScripts = "testdata/python"

// pyBench is what the Python benchmarks share: the interpreter, the SDK's
// folder and the tunejet binary the drivers run.
type pyBench struct {
	python, sdk, bin string
}

// pythonBench finds the interpreter (TUNEJET_PYTHON, else Debian's
// /usr/bin/python3) and builds the tunejet binary; it skips the benchmark
// when the interpreter is missing or cannot import cloudpickle and numpy.
func pythonBench(b *testing.B) pyBench {
	b.Helper()
	python := os.Getenv("TUNEJET_PYTHON")
	if python == "" {
		python = "/usr/bin/python3"
	}
	path, err := exec.LookPath(python)
	if err != nil {
		b.Skipf("the Python benchmarks need a Python interpreter: %v (set TUNEJET_PYTHON to one)", err)
	}
	if out, err := exec.Command(path, "-c", "import cloudpickle, numpy").CombinedOutput(); err != nil {
		b.Skipf("the Python benchmarks need cloudpickle and numpy, which %s cannot import (Debian: apt-get install python3-cloudpickle python3-numpy; or set TUNEJET_PYTHON): %v\n%s",
			path, err, bytes.TrimSpace(out))
	}
	sdk, err := filepath.Abs(filepath.Join("..", "sdk", "python"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(sdk, "tunejet", "__init__.py")); err != nil {
		b.Fatalf("the tunejet Python package is not at %s: %v", sdk, err)
	}
	return pyBench{python: path, sdk: sdk, bin: buildTunejet(b)}
}

// pyOutcome is the part of a driver's RESULT line every script prints.
type pyOutcome struct {
	WallS    float64        `json:"wall_s"` // around tuner.fit() only
	Trials   int            `json:"trials"`
	Statuses map[string]int `json:"statuses"`
}

// terminated fails the benchmark unless the experiment had trials trials,
// each ended TERMINATED.
func (o pyOutcome) terminated(b *testing.B, exp string, trials int) {
	b.Helper()
	if o.Trials != trials || o.Statuses["TERMINATED"] != trials {
		b.Fatalf("%s: %d trials by status %v; want %d, all TERMINATED", exp, o.Trials, o.Statuses, trials)
	}
}

// pyFit is what fit returns: the experiment's events, read from the log
// after the script exited, the script's wall time (exec to exit), and the
// CPU time (user + system) spent meanwhile by this process (the
// deployment: nats-server, controller, runner, syncer) and by the
// processes it started (the trials' workers, which the runner started and
// waited for, and the driver with its `tunejet run` process).
type pyFit struct {
	events                  []*events.Event
	script                  time.Duration
	servicesCPU, processCPU time.Duration
}

// cpuTimes is the CPU time of this process and of its children waited for
// (with theirs), from getrusage(2).
func cpuTimes(b *testing.B) (self, children time.Duration) {
	b.Helper()
	var s, c syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &s); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &c); err != nil {
		b.Fatal(err)
	}
	sum := func(r syscall.Rusage) time.Duration { return time.Duration(r.Utime.Nano() + r.Stime.Nano()) }
	return sum(s), sum(c)
}

// fit runs a driver script with args on a fresh deployment whose runner
// has slots and decodes its RESULT line into out. A script that fails or
// runs past limit fails the benchmark, with the experiment's log
// summarized.
func (p pyBench) fit(b *testing.B, slots int, limit time.Duration, exp, script string, out any, args ...string) pyFit {
	b.Helper()
	d := startDeployment(b, slots, nil)
	defer d.close()
	scriptPath, err := filepath.Abs(filepath.Join(pyScripts, script))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	home := b.TempDir()
	cmd := exec.CommandContext(ctx, p.python, append([]string{scriptPath, exp, filepath.Join(home, "results")}, args...)...)
	cmd.Dir = home
	// NATS_URL: the driver's `tunejet run` submits to the deployment.
	cmd.Env = cleanEnv("HOME="+home, "NATS_URL="+d.natsURL(), "TUNEJET_BIN="+p.bin, "PYTHONPATH="+p.sdk,
		"PYTHONDONTWRITEBYTECODE=1", "TUNEJET_LOG_LEVEL=warn")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	self0, children0 := cpuTimes(b)
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start)
	self1, children1 := cpuTimes(b)
	if err != nil {
		d.diagnose(exp)
		b.Fatalf("%s %s after %v: %v\nstdout:\n%s\nstderr (end):\n%s", script, exp, took.Round(time.Millisecond), err,
			tailLines(stdout.String(), 20), tailLines(stderr.String(), 40))
	}
	var line string
	for l := range strings.Lines(stdout.String()) {
		if rest, ok := strings.CutPrefix(l, "RESULT "); ok {
			line = rest
		}
	}
	if err := json.Unmarshal([]byte(line), out); err != nil {
		b.Fatalf("%s %s printed no RESULT line that decodes (%v):\n%s", script, exp, err, tailLines(stdout.String(), 20))
	}
	return pyFit{events: d.events(context.Background(), exp), script: took, servicesCPU: self1 - self0, processCPU: children1 - children0}
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// reuseArg is a script's REUSE argument: "default" leaves
// TuneConfig.reuse_actors unset (warm workers, once the runner has them),
// "false" sets reuse_actors=False (a fresh interpreter per attempt).
func reuseArg(reuse bool) string {
	if reuse {
		return "default"
	}
	return "false"
}

// reuseName is the experiment-name suffix and log label of a side.
func reuseName(reuse bool) string {
	if reuse {
		return "reuse"
	}
	return "noreuse"
}

// pyAttempt is one attempt of a trial, from the log: when the controller
// scheduled its work, when the runner started it, its first report (the
// event's time and the result's own fields), and when it ended.
type pyAttempt struct {
	trial                     string
	num                       int
	restoredFrom              string
	scheduled, started, ended time.Time
	firstReport               time.Time
	firstResult               map[string]any
	pauseRequested            time.Time // the controller's trial.stop_requested with pause
	pauseAction               string    // the action of the trial's last trial.decided before it
	paused                    bool      // it ended with the runner's trial.paused
}

// pyAttempts groups an experiment's events by attempt, in log order. An
// attempt's scheduled time is its trial's last trial.scheduled before its
// trial.started; ended is its trial.completed, trial.failed or
// trial.paused from the runner.
func pyAttempts(evs []*events.Event) []*pyAttempt {
	var out []*pyAttempt
	scheduled := map[string]time.Time{}
	decided := map[string]string{}
	current := map[string]*pyAttempt{}
	for _, ev := range evs {
		id := ev.Trial()
		switch p := ev.Data.(type) {
		case *events.TrialScheduled:
			scheduled[id] = ev.Time
		case *events.TrialStarted:
			a := &pyAttempt{trial: id, num: p.Attempt, restoredFrom: p.RestoredFrom, scheduled: scheduled[id], started: ev.Time}
			current[id] = a
			out = append(out, a)
		case *events.TrialReported:
			if a := current[id]; a != nil && a.num == p.Attempt && a.firstReport.IsZero() {
				a.firstReport, a.firstResult = ev.Time, p.Results()[0]
			}
		case *events.TrialDecided:
			decided[id] = p.Action
		case *events.TrialStopRequested:
			if a := current[id]; a != nil && p.Pause && ev.Writer == events.WriterController && a.pauseRequested.IsZero() {
				a.pauseRequested, a.pauseAction = ev.Time, decided[id]
			}
		case *events.TrialCompleted, *events.TrialFailed, *events.TrialPaused:
			if a := current[id]; a != nil && ev.Writer == events.WriterRunner && a.ended.IsZero() {
				a.ended = ev.Time
				_, a.paused = p.(*events.TrialPaused)
			}
		}
	}
	return out
}

// reportIntervals is the time between consecutive results of one attempt,
// by the log's event times (a batch of n results spreads its interval over
// them).
func reportIntervals(evs []*events.Event) []time.Duration {
	type key struct {
		trial   string
		attempt int
	}
	last := map[key]time.Time{}
	var out []time.Duration
	for _, ev := range evs {
		p, ok := ev.Data.(*events.TrialReported)
		if !ok {
			continue
		}
		k := key{ev.Trial(), p.Attempt}
		if prev, ok := last[k]; ok {
			n := len(p.Results())
			for range n {
				out = append(out, ev.Time.Sub(prev)/time.Duration(n))
			}
		}
		last[k] = ev.Time
	}
	return out
}

// peakRunning is the most attempts running at once (trial.started to its
// end in the log).
func peakRunning(attempts []*pyAttempt) int {
	type edge struct {
		t time.Time
		d int
	}
	var edges []edge
	for _, a := range attempts {
		if !a.ended.IsZero() {
			edges = append(edges, edge{a.started, 1}, edge{a.ended, -1})
		}
	}
	// An end at the same instant as a start comes first.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].t.Equal(edges[j].t) {
			return edges[i].d < edges[j].d
		}
		return edges[i].t.Before(edges[j].t)
	})
	n, peak := 0, 0
	for _, e := range edges {
		n += e.d
		peak = max(peak, n)
	}
	return peak
}

// pyBookkeepingRun is what one Fit of BenchmarkPythonBookkeeping measured.
type pyBookkeepingRun struct {
	wall time.Duration
	pyFit
	peak        int
	inAttempt   time.Duration // mean trial.started → the runner's trial.completed, less the work
	handOff     time.Duration // mean trial.completed → the next trial.started on the freed slot
	toFirstLine time.Duration // mean trial.started → the trainable's first line
}

// BenchmarkPythonBookkeeping is Ray Tune's bookkeeping-overhead release
// test (BenchmarkBookkeeping's shape) with a Python driver and a Python
// function trainable: trials sleep for the work, report once and return;
// the script imports numpy at its top and the trainable uses it, so every
// trial's process has numpy loaded. 1,000 trials × 0.5 s
// (TUNEJET_BENCH_PY_TRIALS, TUNEJET_BENCH_WORK; -short: 32 × 50 ms) on 16
// slots: max_concurrent_trials=16 and a runner of 16 slots (the benchmark
// fails unless the log shows 16 attempts running at once, and no more).
//
// observed/min is Fit's wall time over the minimum, trials × work / 16;
// the wall time is taken inside the script around tuner.fit() (the
// driver's interpreter start and imports are not in it; `tunejet run`'s
// start, the submission and reading the results back are). The same
// script runs again with TuneConfig(reuse_actors=False) in the same
// benchmark run, each Fit on a fresh deployment: observed/min_noreuse.
// The two sides alternate over TUNEJET_BENCH_PY_ROUNDS rounds (2: reuse,
// noreuse, noreuse, reuse; -short: 1), and each figure is the mean of its
// side's rounds (the log has each round's): on the shared 2-core machine
// the same cold experiment took 85–140 s from one Fit to the next, first
// or second, so one Fit per side does not compare them. Until the runner
// keeps warm Python workers (reuse_actors is accepted and ignored) every
// trial is a fresh `python3 -m tunejet._worker` both ways, so the two
// figures measure the same thing. The benchmark fails unless every trial
// ended TERMINATED having reported exactly once.
//
// It also reports, for each side, from the log: in_attempt_ms (the mean
// trial.started → the runner's trial.completed, less the work: the
// worker's start, loading the trainable, the report and the exit), of
// which to_first_line_ms (trial.started → the trainable's first line,
// time.time() in the trainable), and handoff_ms (trial.completed → the
// next trial.started on the freed slot); and the CPU time (user + system)
// per trial of the processes the benchmark started (process_cpu_ms: the
// trials' workers, which the runner started and waited for, and the
// driver with its `tunejet run`, from getrusage's RUSAGE_CHILDREN) and of
// the benchmark's own process (services_cpu_ms: nats-server, controller,
// runner, syncer). On 2 cores a cold trial's process_cpu_ms bounds the
// wall time from below at trials × process_cpu_ms / 2.
func BenchmarkPythonBookkeeping(b *testing.B) {
	py := pythonBench(b)
	trials := envInt(b, "TUNEJET_BENCH_PY_TRIALS", 1000, 2*bookkeepingSlots)
	work := envDuration(b, "TUNEJET_BENCH_WORK", 500*time.Millisecond, 50*time.Millisecond)
	minimum := time.Duration(trials) * work / bookkeepingSlots
	// A guard against a hang, not a target: a cold trial costs up to
	// ~0.3 s of CPU on 2 cores, more under load.
	limit := 3*minimum + time.Duration(trials)*300*time.Millisecond + 2*time.Minute
	rounds := envInt(b, "TUNEJET_BENCH_PY_ROUNDS", 2, 1)
	var reuse, noreuse []pyBookkeepingRun
	for i := 0; i < b.N; i++ {
		reuse, noreuse = nil, nil
		for round := range rounds {
			// Alternating order (reuse first in even rounds), so that
			// the machine's load drifting over the run does not favour
			// one side.
			for _, side := range []bool{round%2 == 0, round%2 != 0} {
				r := pyBookkeepingOnce(b, py, side, trials, work, limit)
				if side {
					reuse = append(reuse, r)
				} else {
					noreuse = append(noreuse, r)
				}
			}
		}
	}
	b.ReportMetric(minimum.Seconds(), "min_s")
	var walls [2]time.Duration
	for k, side := range []struct {
		suffix string
		runs   []pyBookkeepingRun
	}{{"", reuse}, {"_noreuse", noreuse}} {
		var m pyBookkeepingRun // the means of the side's runs
		var each []string
		for _, r := range side.runs {
			m.wall += r.wall / time.Duration(rounds)
			m.inAttempt += r.inAttempt / time.Duration(rounds)
			m.toFirstLine += r.toFirstLine / time.Duration(rounds)
			m.handOff += r.handOff / time.Duration(rounds)
			m.processCPU += r.processCPU / time.Duration(rounds)
			m.servicesCPU += r.servicesCPU / time.Duration(rounds)
			each = append(each, fmt.Sprintf("%.3f", r.wall.Seconds()/minimum.Seconds()))
		}
		walls[k] = m.wall
		b.ReportMetric(m.wall.Seconds()/minimum.Seconds(), "observed/min"+side.suffix)
		b.ReportMetric(m.wall.Seconds(), "wall_s"+side.suffix)
		b.ReportMetric(ms(m.inAttempt), "in_attempt_ms"+side.suffix)
		b.ReportMetric(ms(m.toFirstLine), "to_first_line_ms"+side.suffix)
		b.ReportMetric(ms(m.handOff), "handoff_ms"+side.suffix)
		b.ReportMetric(ms(m.processCPU)/float64(trials), "process_cpu_ms"+side.suffix)
		b.ReportMetric(ms(m.servicesCPU)/float64(trials), "services_cpu_ms"+side.suffix)
		b.Logf("observed/min%s of each round: %s", side.suffix, strings.Join(each, ", "))
	}
	b.Logf("%d Python trials × %v on %d slots, minimum %.2fs: observed/min %.3f (reuse_actors unset), %.3f (reuse_actors=False), means of %d rounds; load average %s",
		trials, work, bookkeepingSlots, minimum.Seconds(), walls[0].Seconds()/minimum.Seconds(),
		walls[1].Seconds()/minimum.Seconds(), rounds, loadAvg())
}

// pyBookkeepingOnce runs bookkeeping.py once, on one side.
func pyBookkeepingOnce(b *testing.B, py pyBench, reuse bool, trials int, work, limit time.Duration) pyBookkeepingRun {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	exp := "pybookkeeping_" + reuseName(reuse)
	var out struct {
		pyOutcome
		ReportedOnce int     `json:"reported_once"`
		FitStart     float64 `json:"fit_start"`
	}
	f := py.fit(b, bookkeepingSlots, limit, exp, "bookkeeping.py", &out,
		strconv.Itoa(trials), strconv.FormatFloat(work.Seconds(), 'f', -1, 64), strconv.Itoa(bookkeepingSlots), reuseArg(reuse))
	out.terminated(b, exp, trials)
	if out.ReportedOnce != trials {
		b.Fatalf("%s: %d trials reported exactly once, want all %d", exp, out.ReportedOnce, trials)
	}
	r := pyBookkeepingRun{wall: time.Duration(out.WallS * float64(time.Second)), pyFit: f}
	attempts := pyAttempts(f.events)
	if len(attempts) != trials {
		b.Fatalf("%s: the log holds %d attempts, want one per trial (%d)", exp, len(attempts), trials)
	}
	r.peak = peakRunning(attempts)
	if want := min(trials, bookkeepingSlots); r.peak != want {
		b.Fatalf("%s: at most %d trials ran at once (trial.started → trial.completed in the log), want %d", exp, r.peak, want)
	}
	var starts, ends []time.Time
	var inside, toFirst time.Duration
	var pickups, firsts, ending []time.Duration
	for _, a := range attempts {
		starts, ends = append(starts, a.started), append(ends, a.ended)
		inside += a.ended.Sub(a.started) - work
		toFirst += firstLine(b, a).Sub(a.started)
		pickups = append(pickups, a.started.Sub(a.scheduled))
		firsts = append(firsts, firstLine(b, a).Sub(a.started))
		ending = append(ending, a.ended.Sub(a.firstReport))
	}
	b.Logf("%s: medians per attempt: trial.scheduled → trial.started %v, → the trainable's first line %v; its report → the attempt's end %v; an end → the controller's next trial.scheduled %v",
		exp, median(pickups).Round(100*time.Microsecond), median(firsts).Round(100*time.Microsecond), median(ending).Round(100*time.Microsecond),
		median(endToSchedule(f.events)).Round(100*time.Microsecond))
	n := time.Duration(len(attempts))
	r.inAttempt, r.toFirstLine = inside/n, toFirst/n
	sortTimes(starts)
	sortTimes(ends)
	r.handOff, _ = meanHandOff(starts, ends, bookkeepingSlots)
	fitStart := time.Unix(0, int64(out.FitStart*1e9))
	b.Logf("%s: Fit began → the first trial.started %v; the last trial's end → Fit returned %v",
		exp, starts[0].Sub(fitStart).Round(time.Millisecond), fitStart.Add(r.wall).Sub(ends[len(ends)-1]).Round(time.Millisecond))
	b.Logf("%s: Fit %.2fs (the script %.2fs, exec to exit); %d running at peak; per attempt: in the attempt beyond the work %v (of which trial.started → the trainable's first line %v), hand-off between attempts %v; CPU per trial: processes (workers, driver) %v, services %v; load average %s",
		exp, r.wall.Seconds(), r.script.Seconds(), r.peak, r.inAttempt.Round(time.Millisecond),
		r.toFirstLine.Round(time.Millisecond), r.handOff.Round(time.Millisecond),
		(r.processCPU / time.Duration(trials)).Round(100*time.Microsecond), (r.servicesCPU / time.Duration(trials)).Round(100*time.Microsecond), loadAvg())
	return r
}

// endToSchedule pairs each trial.scheduled with the oldest runner's end
// of an attempt before it not yet paired (the controller schedules a
// trial for each slot an end frees), and returns the times between.
func endToSchedule(evs []*events.Event) []time.Duration {
	var ends []time.Time
	var out []time.Duration
	for _, ev := range evs {
		switch ev.Data.(type) {
		case *events.TrialCompleted, *events.TrialFailed, *events.TrialPaused:
			if ev.Writer == events.WriterRunner {
				ends = append(ends, ev.Time)
			}
		case *events.TrialScheduled:
			if len(ends) > 0 {
				out = append(out, ev.Time.Sub(ends[0]))
				ends = ends[1:]
			}
		}
	}
	return out
}

// firstLine is when the attempt's trainable began: time.time() at its
// first line, which the scripts report as "t0" with their first result.
func firstLine(b *testing.B, a *pyAttempt) time.Time {
	b.Helper()
	t0, ok := a.firstResult["t0"].(float64)
	if a.firstReport.IsZero() || !ok {
		b.Fatalf("attempt %d of trial %s: no first report with t0 in the log", a.num, a.trial)
	}
	return time.Unix(0, int64(t0*1e9))
}

// pyStartRun is what one Fit of BenchmarkPythonTrialStart measured, per
// trial: trial.scheduled → the first trial.reported (start), and its
// split.
type pyStartRun struct {
	start, pickup, toFirstLine, toReport distribution
	late                                 int // trials with a pickup of latePickup or more
}

// latePickup is a trial.scheduled → trial.started that the runner's idle
// poll (1 s) rather than the work's arrival ended: the runner took the
// work at its next poll.
const latePickup = 500 * time.Millisecond

// BenchmarkPythonTrialStart measures how long a Python trial takes to
// start: from the controller's decision (the trial.scheduled event's time,
// stamped by the controller) to the trial's first result (the first
// trial.reported event's time, stamped by the runner when the report has
// come over the trainable protocol and the event is built, before it is
// stored). 50 trials (TUNEJET_BENCH_PY_STARTS; -short: 10) of a trainable
// that reports at its first line and returns, one at a time
// (max_concurrent_trials=1, so nothing queues for a slot), with numpy
// imported by the script and used by the trainable; the median, with
// reuse_actors unset (warm_start_ms) and with reuse_actors=False
// (cold_start_ms), each on a fresh deployment.
//
// Its baseline is a bare interpreter start measured in the same run:
// `python3 -c "import numpy"`, exec to exit, 10 times before the Fits and
// 10 times after; bare_ms is the median of the 20. cold_over_bare is the
// median start with reuse_actors=False over it: what a trial start costs
// beyond starting Python with numpy.
//
// Each start is also split (medians, per side): pickup_ms (trial.scheduled
// → trial.started: the runner fetching the work, checking the trial and
// publishing the start), to_first_line_ms (trial.started → the trainable's
// first line, time.time() in the trainable: the worker process's start,
// its imports, fetching and unpickling the trainable), report_ms (the
// first line → the report's event), and late_pickups counts the trials
// whose pickup took 0.5 s or more: the runner, idle after the previous
// trial, sometimes takes the new work only at its next idle poll (1 s;
// bench/README.md, findings), which the medians leave out.
//
// fork_ms and inprocess_call_ms price the warm worker's design: in a
// process with numpy loaded, a fork of a child that calls the trainable
// and ends (median of 200), against calling it in process, as Ray's reused
// actor does (forkcost.py).
func BenchmarkPythonTrialStart(b *testing.B) {
	py := pythonBench(b)
	trials := envInt(b, "TUNEJET_BENCH_PY_STARTS", 50, 10)
	const bareHalf = 10 // bare starts before the Fits, and again after
	limit := time.Duration(trials)*3*time.Second + 2*time.Minute
	var bare []time.Duration
	var warm, cold pyStartRun
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		bare = bareStarts(b, py.python, bareHalf)
		warm = pyTrialStarts(b, py, true, trials, limit)
		cold = pyTrialStarts(b, py, false, trials, limit)
		bare = append(bare, bareStarts(b, py.python, bareHalf)...)
		b.StartTimer()
	}
	bareD := newDistribution(bare)
	b.ReportMetric(ms(warm.start.median()), "warm_start_ms")
	b.ReportMetric(ms(cold.start.median()), "cold_start_ms")
	b.ReportMetric(ms(bareD.median()), "bare_ms")
	b.ReportMetric(float64(cold.start.median())/float64(bareD.median()), "cold_over_bare")
	b.ReportMetric(float64(warm.start.median())/float64(bareD.median()), "warm_over_bare")
	fork := forkCost(b, py.python)
	b.ReportMetric(fork.ForkMS, "fork_ms")
	b.ReportMetric(fork.CallMS, "inprocess_call_ms")
	for _, side := range []struct {
		suffix string
		r      pyStartRun
	}{{"", warm}, {"_noreuse", cold}} {
		b.ReportMetric(ms(side.r.pickup.median()), "pickup_ms"+side.suffix)
		b.ReportMetric(ms(side.r.toFirstLine.median()), "to_first_line_ms"+side.suffix)
		b.ReportMetric(ms(side.r.toReport.median()), "report_ms"+side.suffix)
		b.ReportMetric(float64(side.r.late), "late_pickups"+side.suffix)
	}
	b.Logf("bare `%s -c \"import numpy\"` (exec to exit): %v", py.python, bareD)
	b.Logf("trial.scheduled → first trial.reported over %d trials, one at a time: reuse_actors unset %v; reuse_actors=False %v; cold/bare %.2f; load average %s",
		trials, warm.start, cold.start, float64(cold.start.median())/float64(bareD.median()), loadAvg())
}

// forkCost runs forkcost.py: what a warm worker's fork per trial costs,
// with numpy loaded, against calling the trainable in process as a reused
// Ray actor does (the design choice in docs/architecture.md, Trainables).
func forkCost(b *testing.B, python string) (out struct {
	ForkMS float64 `json:"fork_ms"`
	CallMS float64 `json:"call_ms"`
}) {
	b.Helper()
	cmd := exec.Command(python, filepath.Join(pyScripts, "forkcost.py"), "200")
	cmd.Env = cleanEnv("PYTHONDONTWRITEBYTECODE=1")
	msg, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("forkcost.py: %v\n%s", err, msg)
	}
	for line := range strings.Lines(string(msg)) {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			if err := json.Unmarshal([]byte(rest), &out); err != nil {
				b.Fatal(err)
			}
			return out
		}
	}
	b.Fatalf("forkcost.py printed no RESULT:\n%s", msg)
	return out
}

// bareStarts times n starts of `python -c "import numpy"`, exec to exit.
func bareStarts(b *testing.B, python string, n int) []time.Duration {
	b.Helper()
	out := make([]time.Duration, 0, n)
	for range n {
		cmd := exec.Command(python, "-c", "import numpy")
		cmd.Env = cleanEnv("PYTHONDONTWRITEBYTECODE=1")
		start := time.Now()
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s -c 'import numpy': %v\n%s", python, err, msg)
		}
		out = append(out, time.Since(start))
	}
	return out
}

// pyTrialStarts runs trial_start.py once, on one side.
func pyTrialStarts(b *testing.B, py pyBench, reuse bool, trials int, limit time.Duration) pyStartRun {
	b.Helper()
	exp := "pytrialstart_" + reuseName(reuse)
	var out pyOutcome
	f := py.fit(b, bookkeepingSlots, limit, exp, "trial_start.py", &out, strconv.Itoa(trials), reuseArg(reuse))
	out.terminated(b, exp, trials)
	attempts := pyAttempts(f.events)
	if len(attempts) != trials {
		b.Fatalf("%s: the log holds %d attempts, want one per trial (%d)", exp, len(attempts), trials)
	}
	if peak := peakRunning(attempts); peak != 1 {
		b.Fatalf("%s: %d trials ran at once, want 1 (max_concurrent_trials=1)", exp, peak)
	}
	var start, pickup, toFirst, toReport []time.Duration
	for _, a := range attempts {
		first := firstLine(b, a)
		if a.scheduled.IsZero() {
			b.Fatalf("%s: trial %s started with no trial.scheduled before it in the log", exp, a.trial)
		}
		start = append(start, a.firstReport.Sub(a.scheduled))
		pickup = append(pickup, a.started.Sub(a.scheduled))
		toFirst = append(toFirst, first.Sub(a.started))
		toReport = append(toReport, a.firstReport.Sub(first))
	}
	r := pyStartRun{start: newDistribution(start), pickup: newDistribution(pickup),
		toFirstLine: newDistribution(toFirst), toReport: newDistribution(toReport)}
	for _, d := range pickup {
		if d >= latePickup {
			r.late++
		}
	}
	b.Logf("%s: trial.scheduled → first trial.reported %v; medians: trial.scheduled → trial.started %v, → the trainable's first line %v, → the report's event %v; %d of %d trials waited %v or more for the runner to take their work (trial.scheduled → trial.started: its idle poll); load average %s",
		exp, r.start, r.pickup.median().Round(time.Millisecond), r.toFirstLine.median().Round(time.Millisecond),
		r.toReport.median().Round(time.Millisecond), r.late, trials, latePickup, loadAvg())
	return r
}

// BenchmarkPBTExploit is Ray's pbt_function.py (the toy problem whose best
// learning rate is a triangle wave of the accuracy;
// python/ray/tune/examples/pbt_function.py in ray-project/ray at
// e7e78a0ce8c424884b9d657067e2ab50d1feb245) as a Python driver: 8 trials
// × 100 iterations (TUNEJET_BENCH_PBT_TRIALS, TUNEJET_BENCH_PBT_ITERS;
// -short: 4 × 20) under PopulationBasedTraining with perturbation_interval
// 4 and Ray's hyperparam_mutations, a checkpoint (a folder with a small
// JSON file) with every report as the example's checkpoint_interval=1
// does, keeping 2 by mean_accuracy. Each iteration's work is a 10 ms sleep
// (TUNEJET_BENCH_PBT_WORK), small but not nothing, so that the figures are
// mostly tunejet's. The example's "done" criterion is left out and every
// trial stops at the last iteration; the benchmark fails unless every
// trial ended TERMINATED at that iteration, and unless PBT exploited at
// least once (under -short a run without an exploit only logs it). One
// runner of 16 slots: all trials run at once.
//
// PBT makes more reports than its trials' iterations: an exploiting trial
// goes on from the donor's checkpoint of the donor's last perturbation
// (Ray's rule), often iterations behind its own, and runs them again. So
// pbt/fifo is Fit's wall time (inside the script, around tuner.fit())
// with PBT over the same script without a scheduler (FIFO) making the
// same reports: each FIFO trial makes as many reports as one of the PBT
// run's trials did (pbt.py's REPORTS) and returns, so both sides do the
// same work and the ratio is what pausing, exploiting, resuming and
// judging cost. pbt/fifo_iters compares the same PBT run with FIFO at
// the fixed number of iterations (every trial 100 reports): it charges
// PBT with its repeated iterations too. Each run on a fresh deployment,
// in the same benchmark run: TUNEJET_BENCH_PBT_ROUNDS rounds (5) after a
// warm-up round, each a PBT run, then FIFO with its reports, and FIFO at
// the fixed iterations before or after the pair in alternating rounds;
// each figure is the median of the rounds' ratios, with their range.
// PBT's side costs more by design: every report waits for the
// controller's judgement (Ray's report() does too; with FIFO nothing
// judges), and each exploit or pause ends an attempt and starts another.
//
// exploit_ms is the median of one exploit, from the log: the runner's
// trial.paused (the attempt has ended; the trial holds no slot) → the first
// trial.reported of the trial's next attempt, which started from the
// donor's checkpoint (trial.started's restored_from names the donor). It
// spans the controller scheduling the trial with the donor's config and
// checkpoint, a runner taking the work and starting the attempt, the
// worker process's start, the trainable loading the checkpoint, one
// iteration (the 10 ms sleep, writing the next checkpoint) and the
// report. Its parts are logged (medians): pause requested → paused,
// paused → trial.scheduled, → trial.started, → the trainable's first line
// (time.time() in the trainable), → the report; exploit_started_ms is
// paused → trial.started, what the controller and the runner add before
// the worker starts.
func BenchmarkPBTExploit(b *testing.B) {
	py := pythonBench(b)
	trials := envInt(b, "TUNEJET_BENCH_PBT_TRIALS", 8, 4)
	iters := envInt(b, "TUNEJET_BENCH_PBT_ITERS", 100, 20)
	work := envDuration(b, "TUNEJET_BENCH_PBT_WORK", 10*time.Millisecond, 10*time.Millisecond)
	limit := time.Duration(trials*iters)*500*time.Millisecond + 5*time.Minute
	rounds := envInt(b, "TUNEJET_BENCH_PBT_ROUNDS", 5, 1)
	var pbts, sames, fixed []time.Duration
	var sameRatios, fixedRatios []float64
	var pbtResults, fixedResults int
	var exploits []pbtExploit
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for round := 0; round <= rounds; round++ {
			keep := round > 0 // the first round warms the caches up
			var fifo pbtOutcome
			if round%2 == 1 {
				fifo = pbtRun(b, py, "fifo", trials, iters, work, limit, nil)
			}
			pbt := pbtRun(b, py, "pbt", trials, iters, work, limit, nil)
			same := pbtRun(b, py, "fifo", trials, iters, work, limit, pbt.reports)
			if round%2 == 0 {
				fifo = pbtRun(b, py, "fifo", trials, iters, work, limit, nil)
			}
			if keep {
				pbts, sames, fixed = append(pbts, pbt.wall), append(sames, same.wall), append(fixed, fifo.wall)
				sameRatios = append(sameRatios, pbt.wall.Seconds()/same.wall.Seconds())
				fixedRatios = append(fixedRatios, pbt.wall.Seconds()/fifo.wall.Seconds())
				pbtResults, fixedResults = pbtResults+pbt.results, fixedResults+fifo.results
				exploits = append(exploits, pbt.exploits...)
			}
		}
		b.StartTimer()
	}
	ratio, lo, hi := reportRatios(b, "pbt/fifo", sameRatios)
	fixedRatio, fixedLo, fixedHi := reportRatios(b, "pbt/fifo_iters", fixedRatios)
	if len(exploits) == 0 {
		if smoke() { // 4 trials × 20 iterations may, rarely, exploit nothing
			b.Logf("PBT made no exploit in %d trials × %d iterations: no exploit_ms", trials, iters)
			return
		}
		b.Fatalf("PBT made no exploit in %d trials × %d iterations: nothing to measure", trials, iters)
	}
	var total, started, req, sched, first, report []time.Duration
	for _, x := range exploits {
		total = append(total, x.next.firstReport.Sub(x.prev.ended))
		started = append(started, x.next.started.Sub(x.prev.ended))
		req = append(req, x.prev.ended.Sub(x.prev.pauseRequested))
		sched = append(sched, x.next.scheduled.Sub(x.prev.ended))
		first = append(first, x.firstLine.Sub(x.next.started))
		report = append(report, x.next.firstReport.Sub(x.firstLine))
	}
	totalD := newDistribution(total)
	b.ReportMetric(ms(totalD.median()), "exploit_ms")
	b.ReportMetric(ms(newDistribution(started).median()), "exploit_started_ms")
	b.ReportMetric(float64(len(exploits)), "exploits")
	b.ReportMetric(median(pbts).Seconds(), "pbt_wall_s")
	b.ReportMetric(median(sames).Seconds(), "fifo_wall_s")
	b.ReportMetric(median(fixed).Seconds(), "fifo_iters_wall_s")
	b.Logf("%d trials × %d iterations of %v, %d rounds: PBT median %.2fs (%s), %d results in all; FIFO with the same reports median %.2fs (%s): pbt/fifo %.3f [rounds %.3f–%.3f]; FIFO at %d iterations median %.2fs (%s), %d results: pbt/fifo_iters %.3f [%.3f–%.3f]; load average %s",
		trials, iters, work, len(pbts), median(pbts).Seconds(), spread(pbts), pbtResults,
		median(sames).Seconds(), spread(sames), ratio, lo, hi,
		iters, median(fixed).Seconds(), spread(fixed), fixedResults, fixedRatio, fixedLo, fixedHi, loadAvg())
	b.Logf("%d exploits, trial.paused → first report from the donor's checkpoint: %v", len(exploits), totalD)
	med := func(ds []time.Duration) time.Duration { return newDistribution(ds).median().Round(time.Millisecond) }
	b.Logf("medians: pause requested → trial.paused %v; trial.paused → trial.scheduled %v, → trial.started %v; trial.started → the trainable's first line %v → its first report %v",
		med(req), med(sched), med(started), med(first), med(report))
}

// reportRatios reports the median of the rounds' ratios under unit, and
// their range under unit_min and unit_max.
func reportRatios(b *testing.B, unit string, ratios []float64) (ratio, lo, hi float64) {
	b.Helper()
	s := slices.Sorted(slices.Values(ratios))
	n := len(s)
	ratio = s[n/2]
	if n%2 == 0 {
		ratio = (s[n/2-1] + s[n/2]) / 2
	}
	lo, hi = s[0], s[n-1]
	b.ReportMetric(ratio, unit)
	b.ReportMetric(lo, unit+"_min")
	b.ReportMetric(hi, unit+"_max")
	return ratio, lo, hi
}

// pbtExploit is one exploit: the attempt that paused and the trial's next
// attempt, from the donor's checkpoint, with its trainable's first line.
type pbtExploit struct {
	prev, next *pyAttempt
	firstLine  time.Time
}

// pbtOutcome is what one run of pbt.py measured: Fit's wall time, the
// results in the log, each trial's count of them, and PBT's exploits.
type pbtOutcome struct {
	wall     time.Duration
	results  int
	reports  []int // per trial, in the trials' order in the log
	exploits []pbtExploit
}

// pbtRun runs pbt.py once with scheduler "pbt" or "fifo"; with reports
// (FIFO only), trial i makes exactly reports[i] reports and returns.
func pbtRun(b *testing.B, py pyBench, scheduler string, trials, iters int, work, limit time.Duration, reports []int) pbtOutcome {
	b.Helper()
	exp := "pbt_function_" + scheduler
	args := []string{strconv.Itoa(trials), strconv.Itoa(iters), strconv.FormatFloat(work.Seconds(), 'f', -1, 64), scheduler}
	if reports != nil {
		exp += "_same"
		counts := make([]string, len(reports))
		for i, n := range reports {
			counts[i] = strconv.Itoa(n)
		}
		args = append(args, strings.Join(counts, ","))
	}
	var out struct {
		pyOutcome
		Iterations []int `json:"iterations"`
	}
	f := py.fit(b, bookkeepingSlots, limit, exp, "pbt.py", &out, args...)
	out.terminated(b, exp, trials)
	if reports != nil {
		if want := slices.Sorted(slices.Values(reports)); !slices.Equal(out.Iterations, want) {
			b.Fatalf("%s: trials ended at iterations %v, want %v", exp, out.Iterations, want)
		}
	} else {
		for _, it := range out.Iterations {
			// A trial that exploits a donor's checkpoint of the last iteration
			// goes on from it, and its first result ends it one later (as in Ray).
			if it != iters && (scheduler != "pbt" || it != iters+1) {
				b.Fatalf("%s: trials ended at iterations %v, want all at %d (PBT: or %d, resumed from a donor's last)", exp, out.Iterations, iters, iters+1)
			}
		}
	}
	o := pbtOutcome{wall: time.Duration(out.WallS * float64(time.Second))}
	perTrial := map[string]int{}
	var order []string
	for _, ev := range f.events {
		if p, ok := ev.Data.(*events.TrialReported); ok {
			if _, seen := perTrial[ev.Trial()]; !seen {
				order = append(order, ev.Trial())
			}
			perTrial[ev.Trial()] += len(p.Results())
			o.results += len(p.Results())
		}
	}
	for _, id := range order {
		o.reports = append(o.reports, perTrial[id])
	}
	if len(o.reports) != trials {
		b.Fatalf("%s: %d trials reported, want %d", exp, len(o.reports), trials)
	}
	attempts := pyAttempts(f.events)
	last := map[string]*pyAttempt{}
	var pauses, lost int
	for _, a := range attempts {
		prev := last[a.trial]
		last[a.trial] = a
		if prev == nil || !prev.paused {
			continue
		}
		if prev.pauseAction != "exploit" {
			pauses++ // Ray's pause of a trial in neither quantile while others wait
			continue
		}
		if !strings.Contains(a.restoredFrom, "/") {
			lost++
			b.Errorf("%s: trial %s paused to exploit another trial's checkpoint (attempt %d), but attempt %d resumed from %q, its own",
				exp, a.trial, prev.num, a.num, a.restoredFrom)
			continue
		}
		if a.scheduled.Before(prev.ended) {
			b.Fatalf("%s: trial %s's attempt %d was scheduled before attempt %d paused", exp, a.trial, a.num, prev.num)
		}
		o.exploits = append(o.exploits, pbtExploit{prev: prev, next: a, firstLine: firstLine(b, a)})
	}
	b.Logf("%s: Fit %.2fs; %d attempts, %d exploits from a donor's checkpoint, %d other pauses, %d exploits lost; %d results in the log (per trial %v); within an attempt, report to report: %v",
		exp, out.WallS, len(attempts), len(o.exploits), pauses, lost, o.results, o.reports, newDistribution(reportIntervals(f.events)))
	return o
}
