"""Ray's driver-side decisions, end to end through Tuner.fit() and a real
tunejet binary: a Stopper subclass, a stop function, a Searcher subclass
under ConcurrencyLimiter, and Repeater, run in the driver and asked by
tunejet's controller (docs/driver.md, "Requests: the driver's decisions");
and a driver killed with kill -9 mid-experiment, then restored, ends as
the uninterrupted run does, its callback seeing each result once.

The APIs are Ray's: python/ray/tune/stopper/stopper.py,
python/ray/tune/search/searcher.py, python/ray/tune/search/repeater.py and
python/ray/tune/search/concurrency_limiter.py of ray-project/ray."""

import json
import os
import signal
import subprocess
import sys
import shutil
import tempfile
import textwrap

from tests import support

# A Stopper subclass that does not call super().__init__() (Ray's API, and
# the AttributeError), a stop function, and a stop_all.
STOPPERS = textwrap.dedent(
    '''
    import json, sys
    from tunejet import train, tune
    from tunejet.tune.stopper import MaximumIterationStopper

    class AtStep(tune.Stopper):
        def __init__(self, step):
            self.step = step
            self.asked = 0

        def __call__(self, trial_id, result):
            self.asked += 1
            return result["step"] >= self.step

        def stop_all(self):
            return False

    class FirstFive(tune.Stopper):
        """Stops everything once any trial has reported step 5."""

        def __init__(self):
            self.seen = 0

        def __call__(self, trial_id, result):
            self.seen = max(self.seen, result["step"])
            return False

        def stop_all(self):
            return self.seen >= 5

    class Boom(tune.Stopper):
        def __call__(self, trial_id, result):
            if result["step"] == 2:
                raise ValueError("boom at step 2")
            return False

        def stop_all(self):
            return False

    def reach_six(trial_id, result):
        return result["score"] >= 6

    def trainable(config):
        for step in range(1, 21):
            train.report({"step": step, "score": step * config["x"]})

    how = sys.argv[1]
    stop = {"class": AtStep(4), "function": reach_six, "mixed": [MaximumIterationStopper(3), reach_six],
            "all": FirstFive(), "raises": Boom()}[how]
    concurrency = 1 if how == "all" else None
    grid = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1, 2, 3])},
        tune_config=tune.TuneConfig(max_concurrent_trials=concurrency),
        run_config=train.RunConfig(name="stop_" + how, storage_path="results", stop=stop),
    ).fit()
    print("RESULT " + json.dumps({
        "steps": {str(r.config["x"]): r.metrics.get("step") for r in grid},
        "asked": getattr(stop, "asked", None),
        "errors": [str(e) for e in grid.errors],
    }))
    '''
)

# A searcher of one's own under ConcurrencyLimiter(..., 1): each config
# comes from the trial before's final score, which it hears of through
# on_trial_complete; FINISHED after four trials (num_samples allows ten).
SEARCHER = textwrap.dedent(
    '''
    import json
    from tunejet import train, tune
    from tunejet.tune.search import ConcurrencyLimiter, Searcher

    class Chain(Searcher):
        def __init__(self):
            super().__init__()
            self.next_x, self.made, self.results, self.completed = 1, 0, 0, []
            self.properties = None

        def set_search_properties(self, metric, mode, config, **spec):
            self.properties = [metric, mode, config]
            self._metric, self._mode = metric, mode
            return True

        def suggest(self, trial_id):
            if self.made == 4:
                return Searcher.FINISHED
            if self.next_x is None:
                return None  # the trial before has not completed
            self.made += 1
            x, self.next_x = self.next_x, None
            return {"x": x}

        def on_trial_result(self, trial_id, result):
            self.results += 1

        def on_trial_complete(self, trial_id, result=None, error=False):
            self.completed.append([trial_id, result[self.metric], error])
            self.next_x = result[self.metric] + 1

    def trainable(config):
        for step in range(1, 4):
            train.report({"score": config["x"] * step, "c": config["c"]})

    chain = Chain()
    grid = tune.Tuner(
        trainable,
        param_space={"c": 5},
        tune_config=tune.TuneConfig(metric="score", mode="max", num_samples=10,
                                    search_alg=ConcurrencyLimiter(chain, max_concurrent=1)),
        run_config=train.RunConfig(name="searcher", storage_path="results"),
    ).fit()
    print("RESULT " + json.dumps({
        "trials": sorted([r.config["x"], r.config["c"], r.metrics["score"], r.status] for r in grid),
        "completed": chain.completed,
        "results": chain.results,
        "properties": chain.properties,
        "best": grid.get_best_result().config["x"],
    }))
    '''
)

# Repeater(searcher, repeat=2): each suggestion runs twice, __trial_index__
# 0 and 1, and the searcher completes with the group's mean score.
REPEATER = textwrap.dedent(
    '''
    import json
    from tunejet import train, tune
    from tunejet.tune.search import Repeater, Searcher

    class Two(Searcher):
        def __init__(self):
            super().__init__(metric="score", mode="max")
            self.made, self.completed = 0, []

        def suggest(self, trial_id):
            if self.made == 2:
                return Searcher.FINISHED
            self.made += 1
            return {"x": self.made}

        def on_trial_complete(self, trial_id, result=None, error=False):
            self.completed.append(result)

    def trainable(config):
        train.report({"score": config["x"] * 10 + config["__trial_index__"]})

    two = Two()
    grid = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(num_samples=4, search_alg=Repeater(two, repeat=2)),
        run_config=train.RunConfig(name="repeater", storage_path="results"),
    ).fit()
    print("RESULT " + json.dumps({
        "configs": sorted([r.config["x"], r.config["__trial_index__"]] for r in grid),
        "completed": sorted(c["score"] for c in two.completed),
    }))
    '''
)

# The stopper's budget shrinks with each trial it has seen (6, 5, 4, 3
# iterations): state across trials. The searcher chains each config on the
# final score of the trial before. The callback appends each result to
# results.jsonl; with KILL_AT=K, the first run's driver kills itself with
# SIGKILL at the K-th result it is given, before writing it.
DONE = textwrap.dedent(
    '''
    import json, os, signal, sys, tempfile
    from tunejet import train, tune
    from tunejet.tune.search import ConcurrencyLimiter, Searcher

    class Shrinking(tune.Stopper):
        def __init__(self):
            self.order = []

        def __call__(self, trial_id, result):
            if trial_id not in self.order:
                self.order.append(trial_id)
            return result["training_iteration"] >= 6 - self.order.index(trial_id)

        def stop_all(self):
            return False

    class Chain(Searcher):
        def __init__(self):
            super().__init__(metric="score", mode="max")
            self.next_x, self.made = 1, 0

        def suggest(self, trial_id):
            if self.made == 4:
                return Searcher.FINISHED
            if self.next_x is None:
                return None
            self.made += 1
            x, self.next_x = self.next_x, None
            return {"x": x}

        def on_trial_complete(self, trial_id, result=None, error=False):
            self.next_x = result["score"] + 1

    def _children():
        out = []
        for p in os.listdir("/proc"):
            try:
                with open("/proc/%s/stat" % p) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                        out.append(int(p))
            except (OSError, ValueError, IndexError):
                pass
        return out

    class Append(tune.Callback):
        def __init__(self):
            self.given = 0

        def on_trial_result(self, iteration, trials, trial, result, **info):
            self.given += 1
            if sys.argv[1] == "run" and os.environ.get("KILL_AT") == str(self.given):
                with open("children.json", "w") as f:
                    json.dump(_children(), f)
                os.kill(os.getpid(), signal.SIGKILL)
            with open("results.jsonl", "a") as f:
                f.write(json.dumps([trial.trial_id, result["training_iteration"], result["step"]]) + "\\n")
                f.flush()
                os.fsync(f.fileno())

    def trainable(config):
        start = 0
        ckpt = train.get_checkpoint()
        if ckpt:
            with open(os.path.join(ckpt.path, "step.json")) as f:
                start = json.load(f)
        for step in range(start + 1, 21):
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "step.json"), "w") as f:
                    json.dump(step, f)
                train.report({"step": step, "score": config["x"] * step}, checkpoint=train.Checkpoint.from_directory(d))

    path = os.path.abspath(os.path.join("results", "done"))
    if sys.argv[1] == "run":
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(num_samples=10, search_alg=ConcurrencyLimiter(Chain(), 1)),
            run_config=train.RunConfig(name="done", storage_path="results", stop=Shrinking(), callbacks=[Append()]),
        )
    else:
        tuner = tune.Tuner.restore(path, trainable=trainable)
    grid = tuner.fit()
    print("RESULT " + json.dumps({r.trial_id: [r.config["x"], r.metrics.get("training_iteration"), r.status] for r in grid}))
    '''
)

_result = support.result_line


def setUpModule():
    support.binary()


class DecisionsTest(support.HomeTest):
    def test_a_stopper_subclass_a_stop_function_and_stop_all(self):
        script = self.write("stoppers.py", STOPPERS)
        out = _result(support.run_script(self, script, "class", home=self.home))
        self.assertEqual(out["errors"], [])
        self.assertEqual(out["steps"], {"1": 4, "2": 4, "3": 4})
        out = _result(support.run_script(self, script, "function", home=self.home))
        self.assertEqual(out["steps"], {"1": 6, "2": 3, "3": 2}, "each trial stops at its first score >= 6")
        # The built-in stopper is the controller's, the function the
        # driver's: whichever stops first.
        out = _result(support.run_script(self, script, "mixed", home=self.home))
        self.assertEqual(out["steps"], {"1": 3, "2": 3, "3": 2})
        # stop_all at the first trial's step 5 ends the experiment: one trial
        # at a time, the others are never made.
        out = _result(support.run_script(self, script, "all", home=self.home))
        self.assertEqual(out["steps"], {"1": 5})
        # The stopper's exception fails fit(), as in Ray; the experiment stays restorable.
        proc = subprocess.run([sys.executable, script, "raises"], cwd=self.home, env=support.environ(self.home),
                              capture_output=True, text=True, timeout=support.SCRIPT_TIMEOUT_S)
        self.assertNotEqual(proc.returncode, 0, proc.stdout)
        self.assertIn("ValueError: boom at step 2", proc.stderr)
        self.assertIn("in __call__", proc.stderr, "the stopper's own traceback")
        self.assertNotIn("RESULT", proc.stdout)
        can = subprocess.run([support.binary(), "can-restore", os.path.join(self.home, "results", "stop_raises")],
                             capture_output=True, text=True)
        self.assertEqual(can.returncode, 0, can.stderr)

    def test_a_searcher_of_ones_own_under_a_concurrency_limiter(self):
        script = self.write("searcher.py", SEARCHER)
        out = _result(support.run_script(self, script, home=self.home))
        # 1 -> final score 3 -> x=4 -> 12 -> x=13 -> 39 -> x=40: each config
        # chained on the completed trial before, FINISHED after four.
        self.assertEqual(out["trials"], [[1, 5, 3, "TERMINATED"], [4, 5, 12, "TERMINATED"],
                                         [13, 5, 39, "TERMINATED"], [40, 5, 120, "TERMINATED"]])
        self.assertEqual([c[1:] for c in out["completed"]], [[3, False], [12, False], [39, False], [120, False]])
        self.assertEqual(out["results"], 12, "on_trial_result once per result")
        self.assertEqual(out["properties"], ["score", "max", {"c": 5}])
        self.assertEqual(out["best"], 40)

    def test_repeater(self):
        script = self.write("repeater.py", REPEATER)
        out = _result(support.run_script(self, script, home=self.home))
        self.assertEqual(out["configs"], [[1, 0], [1, 1], [2, 0], [2, 1]])
        self.assertEqual(out["completed"], [10.5, 20.5], "each group's mean score")

    def test_a_driver_killed_then_restored_decides_as_the_uninterrupted_one(self):
        script = self.write("done.py", DONE)
        reference_home = tempfile.mkdtemp(prefix="tunejet-home-")
        self.addCleanup(shutil.rmtree, reference_home, True)
        shutil.copy(script, reference_home)
        reference = _result(support.run_script(self, os.path.join(reference_home, "done.py"), "run", home=reference_home))
        want = sorted(v for v in reference.values())
        # x=1 stops at iteration 6 (score 6), x=7 at 5 (35), x=36 at 4 (144), x=145 at 3.
        self.assertEqual(want, [[1, 6, "TERMINATED"], [7, 5, "TERMINATED"], [36, 4, "TERMINATED"], [145, 3, "TERMINATED"]])

        # Killed at the second trial's second result, and at the first
        # trial's last one (the result its stop answer ends it at, before
        # the searcher has been asked for the second trial).
        for kill_at in (8, 6):
            with self.subTest(kill_at=kill_at):
                self.killed_then_restored(kill_at, want)

    def killed_then_restored(self, kill_at, want):
        home = tempfile.mkdtemp(prefix="tunejet-home-")
        self.addCleanup(shutil.rmtree, home, True)
        script = os.path.join(home, "done.py")
        shutil.copy(os.path.join(self.home, "done.py"), script)
        env = dict(support.environ(home), KILL_AT=str(kill_at))
        proc = subprocess.run([sys.executable, script, "run"], cwd=home, env=env, capture_output=True,
                              text=True, timeout=support.SCRIPT_TIMEOUT_S)
        self.assertEqual(proc.returncode, -signal.SIGKILL, proc.stdout + proc.stderr)
        with open(os.path.join(home, "children.json")) as f:
            children = json.load(f)
        self.assertEqual(len(children), 1, "the driver's one child, its tunejet process")

        def gone():
            try:
                os.kill(children[0], 0)
            except ProcessLookupError:
                return True
            return False

        support.eventually(self, gone, "the killed driver's tunejet process to end")
        with open(os.path.join(home, "results.jsonl")) as f:
            self.assertEqual(len(f.readlines()), kill_at - 1, "the results written before the kill")

        if kill_at == 8:
            # Without the objects fit() kept, the restore fails saying why:
            # before it runs when the experiment's state file names them
            # (written when the killed run's tunejet process ended, if it
            # got that far), else at the first answer the log replays.
            kept = os.path.join(home, "results", "done", "tunejet_driver.pkl")
            os.rename(kept, kept + ".away")
            proc = subprocess.run([sys.executable, script, "restore"], cwd=home, env=support.environ(home),
                                  capture_output=True, text=True, timeout=support.SCRIPT_TIMEOUT_S)
            self.assertNotEqual(proc.returncode, 0, proc.stdout)
            self.assertRegex(proc.stderr, r"TuneError: (the experiment asks the driver's searcher, and this fit\(\) "
                             r"has none \(no tunejet_driver.pkl at |the experiment at .* has its driver run "
                             r'\{"stopper": "Shrinking", "searcher": "Chain"\}, and .*tunejet_driver.pkl is missing)')
            os.rename(kept + ".away", kept)

        restored = _result(support.run_script(self, script, "restore", home=home))
        self.assertEqual(sorted(restored.values()), want, "the same trials stop at the same iterations")
        with open(os.path.join(home, "results.jsonl")) as f:
            seen = [tuple(json.loads(line)) for line in f]
        pairs = [(t, i) for t, i, _ in seen]
        self.assertEqual(len(pairs), len(set(pairs)), "each (trial, training_iteration) once: %s" % seen)
        expected = {(t, i, i) for t, (_, last, _) in restored.items() for i in range(1, last + 1)}
        self.assertEqual(set(seen), expected, "iteration i is the trial's step i: resumed, not restarted")

if __name__ == "__main__":
    import unittest

    unittest.main()
