"""Warm workers: with TuneConfig(reuse_actors) on (the default) a runner
loads the trainable once per experiment and resource set and forks each
trial from that worker; each trial still gets a process of its own, with
its own globals, working directory and environment."""

import json
import glob
import os
import subprocess
import time
import unittest

from tests.support import SCRIPT_TIMEOUT_S, HomeTest, binary, environ, result_line, run_script

# loads.py records each process that imports it, as a trainable's heavy
# imports (numpy, torch) would run: once per process that loads it.
LOADS = """import os
with open(os.environ["LOADS_FILE"], "a") as f:
    f.write("%d\\n" % os.getpid())
"""

SCRIPT = """import json, os, random, signal, sys, threading, time
import loads
import tunejet
from tunejet import train, tune

SEEN = []  # a global each trial appends to
LEFT_OPEN = []  # files a trial never closes
DIES = json.loads(sys.argv[3])  # by trial: "no", "self" or "worker"

def trainable(config):
    assert loads.__name__ == "loads"  # the trainable needs the module, as it would numpy
    SEEN.append(config["i"])
    leaked = os.environ.get("LEAKED", "")
    os.environ["LEAKED"] = str(config["i"])
    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()  # left running
    attempt = tunejet.get_attempt()
    record = {"seen": len(SEEN), "leaked": leaked, "cwd": os.getcwd(), "trial_dir": tunejet.get_trial_dir(),
              "trial_id_env": os.environ["TUNEJET_TRIAL_ID"], "me": os.getpid(), "parent": os.getppid(),
              "attempt": attempt, "random": random.random()}
    # A trial's process ends as an interpreter would: the files it left
    # open are flushed, and its non-daemon threads run to their end.
    LEFT_OPEN.append(open("left_open.txt", "w"))
    LEFT_OPEN[-1].write("trial %d" % config["i"])
    done = os.path.abspath("thread_done.txt")
    threading.Thread(target=lambda: (time.sleep(0.2), open(done, "w").write("done"))).start()
    os.chdir("/")  # a trial may change its working directory
    die = DIES[config["i"]]
    if attempt == 1 and die == "self":
        train.report(record)
        os.kill(os.getpid(), signal.SIGKILL)
    if attempt == 1 and die == "ready":
        # kill the forks the worker keeps ready beside this trial
        def siblings():
            found = []
            for pid in os.listdir("/proc"):
                if pid.isdigit() and int(pid) != os.getpid():
                    try:
                        with open("/proc/%s/stat" % pid) as f:
                            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                    except (OSError, ValueError, IndexError):
                        continue
                    if ppid == os.getppid():
                        found.append(int(pid))
            return found
        deadline = time.monotonic() + 30
        while not siblings() and time.monotonic() < deadline:
            time.sleep(0.01)
        record["killed_ready"] = len(siblings())
        for pid in siblings():
            os.kill(pid, signal.SIGKILL)
    if attempt == 1 and die == "worker":
        train.report(record)
        os.kill(os.getppid(), signal.SIGKILL)  # the warm worker that forked this trial
        time.sleep(300)  # the runner ends this process
    train.report(record)

if __name__ == "__main__":
    reuse = {"default": None, "on": True, "off": False}[sys.argv[2]]
    grid = tune.Tuner(
        trainable,
        param_space={"i": tune.grid_search(list(range(len(DIES))))},
        tune_config=tune.TuneConfig(reuse_actors=reuse, max_concurrent_trials=1),
        run_config=train.RunConfig(name="warm", storage_path=sys.argv[1],
                                   failure_config=train.FailureConfig(max_failures=1)),
    ).fit()
    print("RESULT " + json.dumps({"errors": grid.num_errors, "trials": [
        dict(r.metrics, trial_id=r.metrics["trial_id"], i=r.config["i"]) for r in grid]}))
"""


class WarmWorkers(HomeTest):
    def run_trials(self, reuse, dies, write_loads=True):
        if write_loads:
            self.write("loads.py", LOADS)
        script = self.write("warm.py", SCRIPT)
        loads = os.path.join(self.home, "loads.txt")
        os.environ["LOADS_FILE"] = loads
        self.addCleanup(os.environ.pop, "LOADS_FILE", None)
        got = result_line(run_script(self, script, os.path.join(self.home, "results"), reuse, json.dumps(dies), home=self.home))
        with open(loads) as f:
            pids = f.read().split()
        self.assertEqual(got["errors"], 0, got)
        trials = sorted(got["trials"], key=lambda t: t["i"])
        self.assertEqual(len(trials), len(dies))
        return trials, len(pids) - 1  # the driver imports loads too

    def assert_isolated(self, trials):
        for t in trials:
            self.assertEqual(t["seen"], 1, "trial %d saw another trial's global: %s" % (t["i"], t))
            self.assertEqual(t["leaked"], "", "trial %d saw another trial's environment: %s" % (t["i"], t))
            self.assertEqual(os.path.realpath(t["cwd"]), os.path.realpath(t["trial_dir"]), t)
            self.assertEqual(t["trial_id_env"], t["trial_id"], t)
            with open(os.path.join(t["trial_dir"], "left_open.txt")) as f:
                self.assertEqual(f.read(), "trial %d" % t["i"], "a file the trial left open was not flushed")
            self.assertTrue(os.path.exists(os.path.join(t["trial_dir"], "thread_done.txt")), "a non-daemon thread was cut short")
        self.assertEqual(len({t["me"] for t in trials}), len(trials), "a process ran two trials")
        self.assertEqual(len({t["random"] for t in trials}), len(trials), "two trials drew the same random numbers")

    def test_trials_fork_from_one_warm_worker_and_share_nothing(self):
        trials, loads = self.run_trials("default", ["no"] * 6)
        self.assertEqual(loads, 1, "the trainable was loaded %d times for 6 trials, want once" % loads)
        self.assertEqual(len({t["parent"] for t in trials}), 1, "trials forked from several workers: %s" % trials)
        self.assert_isolated(trials)

    def test_a_ready_fork_killed_costs_nothing(self):
        # Trial 1 kills the fork the worker keeps ready for the next trial:
        # the next trials still run from the same worker, at their first
        # attempt.
        trials, loads = self.run_trials("on", ["no", "ready", "no", "no"])
        self.assertGreater(trials[1].get("killed_ready", 0), 0, "no ready fork to kill: %s" % trials[1])
        self.assertEqual([t["attempt"] for t in trials], [1, 1, 1, 1], trials)
        self.assertEqual(loads, 1, "want one worker, got %d loads" % loads)
        self.assert_isolated(trials)

    def test_no_fork_outlives_its_worker(self):
        # The worker forks ahead (a fork ready for the next trial); once
        # the run ends, no process of it is left: not a trial, not a
        # ready fork.
        self.run_trials("default", ["no"] * 3)
        mine = ("HOME=%s" % self.home).encode()

        def left():
            pids = []
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open("/proc/%s/environ" % pid, "rb") as f:
                        if mine in f.read().split(b"\0"):
                            pids.append(int(pid))
                except OSError:  # gone, or another user's
                    pass
            return pids

        deadline = time.monotonic() + SCRIPT_TIMEOUT_S
        while left() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(left(), [], "processes of the run are left after it ended")

    def test_reuse_actors_false_starts_each_trial_cold(self):
        trials, loads = self.run_trials("off", ["no"] * 4)
        self.assertEqual(loads, 4, "reuse_actors=False loaded the trainable %d times for 4 trials, want 4" % loads)
        self.assert_isolated(trials)

    def test_a_trainable_that_starts_threads_as_it_loads_runs_cold(self):
        # A fork keeps only the forking thread: the worker says it is
        # unsafe to fork, and each trial starts a fresh interpreter.
        self.write("loads.py", LOADS + "import threading, time\nthreading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n")
        trials, loads = self.run_trials("on", ["no"] * 3, write_loads=False)
        self.assertEqual(loads, 4, "want the worker's load, then one per cold trial; got %d" % loads)
        self.assert_isolated(trials)

    def test_a_killed_trial_or_worker_costs_only_that_attempt(self):
        # Trial 1 is SIGKILLed mid-trial; trial 3 kills the warm worker that
        # forked it. Each is retried (max_failures=1) and ends TERMINATED;
        # the others run once, and a new worker replaces the killed one.
        trials, loads = self.run_trials("on", ["no", "self", "no", "worker", "no"])
        self.assertEqual([t["attempt"] for t in trials], [1, 2, 1, 2, 1], trials)
        self.assertEqual(loads, 2, "want the first worker and the one that replaced it, got %d loads" % loads)
        self.assertEqual(len({t["parent"] for t in trials[:3]}), 1, trials)
        self.assertEqual(len({t["parent"] for t in trials[3:]}), 1, trials)
        self.assertNotEqual(trials[0]["parent"], trials[4]["parent"], "the killed worker still forked trials")
        self.assert_isolated(trials)


# A command trainable whose body runs through tunejet.run_trials: with
# fork_server: true each attempt is a fork of the script loaded once.
COMMAND = """import os
import tunejet
LOADED_BY = os.getpid()

def trial():
    tunejet.report({"loaded_by": LOADED_BY, "me": os.getpid()})

tunejet.run_trials(trial)
"""

EXPERIMENT = """name: %s
trainable:
  command: ["python3", "trial.py"]
  fork_server: %s
param_space:
  x: {grid_search: [1, 2, 3, 4]}
tune_config: {max_concurrent_trials: 1}
run_config:
  storage_path: results
"""


class CommandForkServer(HomeTest):
    def run_experiment(self, fork_server):
        self.write("trial.py", COMMAND)
        name = "fork_%s" % fork_server
        self.write("exp.yaml", EXPERIMENT % (name, fork_server))
        proc = subprocess.run([binary(), "run", "exp.yaml"], cwd=self.home, env=environ(self.home),
                              capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        results = []
        for path in glob.glob(os.path.join(self.home, "results", name, "*", "result.json")):
            with open(path) as f:
                results.append(json.loads(f.readline()))
        self.assertEqual(len(results), 4, proc.stdout)
        return results

    def test_run_trials_forks_each_attempt_from_the_loaded_script(self):
        results = self.run_experiment("true")
        self.assertEqual(len({r["loaded_by"] for r in results}), 1, results)
        for r in results:
            self.assertNotEqual(r["loaded_by"], r["me"], "a trial ran in the warm worker's own process")

    def test_without_fork_server_run_trials_runs_the_body_once(self):
        for r in self.run_experiment("false"):
            self.assertEqual(r["loaded_by"], r["me"])


if __name__ == "__main__":
    unittest.main()
