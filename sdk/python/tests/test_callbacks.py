"""Ray's callbacks (RunConfig(callbacks=[...])), run by fit() in the
driver and fed from the experiment's event log: each hook once per event,
also across a driver killed with kill -9 and a Tuner.restore.

The hooks and their keyword arguments are Ray's, as in
python/ray/tune/callback.py of ray-project/ray at commit
048f73e1902d1e464c92b7a0c7f0101e44ac11e7 (setup(stop, num_samples,
total_num_samples, **info), on_trial_start(iteration, trials, trial,
**info), on_trial_result(iteration, trials, trial, result, **info),
on_trial_complete / on_trial_error (iteration, trials, trial, **info),
on_checkpoint(iteration, trials, trial, checkpoint, **info),
on_experiment_end(trials, **info)).
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest
from unittest import mock

from tests import support
from tunejet import train, tune

# A callback that appends one JSON line per hook call to records.jsonl,
# flushed and fsynced before the hook returns, so that what a killed
# driver's hooks returned from is on disk.
RECORDER = textwrap.dedent(
    '''
    import json, os, sys, threading
    from tunejet import train, tune

    RECORDS = os.path.abspath("records.jsonl")


    def _ppid(pid):
        with open("/proc/%s/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])


    class Recorder(tune.Callback):
        def __init__(self, label):
            self.label = label  # kept in the pickle restore() reads

        def write(self, **rec):
            rec.update(label=self.label, run=sys.argv[1])
            with open(RECORDS, "a") as f:
                f.write(json.dumps(rec) + "\\n")
                f.flush()
                os.fsync(f.fileno())

        def setup(self, stop=None, num_samples=None, total_num_samples=None, **info):
            self.write(hook="setup", num_samples=num_samples, total=total_num_samples)

        def on_trial_start(self, iteration, trials, trial, **info):
            self.write(hook="start", trial=trial.trial_id, status=trial.status, config=trial.config,
                       known=sorted(t.trial_id for t in trials))

        def on_trial_result(self, iteration, trials, trial, result, **info):
            if sys.argv[1] == "run" and os.environ.get("KILL_AT") == str(result["step"]):
                # kill -9 of this driver and its tunejet process, mid-hook:
                # the test does it once this file names them.
                children = [p for p in os.listdir("/proc") if p.isdigit() and _safe_ppid(p) == os.getpid()]
                with open("kill_me.tmp", "w") as f:
                    json.dump({"driver": os.getpid(), "children": [int(p) for p in children]}, f)
                os.rename("kill_me.tmp", "kill_me")
                threading.Event().wait()  # never returns
            self.write(hook="result", trial=trial.trial_id, step=result["step"],
                       last=trial.last_result.get("step"), iteration=iteration)

        def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
            self.write(hook="checkpoint", trial=trial.trial_id, path=checkpoint.path)

        def on_trial_complete(self, iteration, trials, trial, **info):
            self.write(hook="complete", trial=trial.trial_id, status=trial.status, last=trial.last_result.get("step"),
                       path=trial.local_path, tag=trial.experiment_tag, name=str(trial))

        def on_trial_error(self, iteration, trials, trial, **info):
            self.write(hook="error", trial=trial.trial_id, status=trial.status, error_file=trial.error_file)

        def on_experiment_end(self, trials, **info):
            self.write(hook="end", statuses=sorted(t.status for t in trials))


    def _safe_ppid(pid):
        try:
            return _ppid(pid)
        except OSError:
            return None
    '''
)

# Three trials of three checkpointed steps; x=3 fails after its first.
FULL = RECORDER + textwrap.dedent(
    '''
    import tempfile

    def trainable(config):
        for step in range(1, 4):
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "step.json"), "w") as f:
                    json.dump(step, f)
                train.report({"step": step}, checkpoint=train.Checkpoint.from_directory(d))
            if config["x"] == 3:
                raise ValueError("x=3 fails")

    grid = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1, 2, 3])},
        run_config=train.RunConfig(name="callbacks", storage_path="results", callbacks=[Recorder("full")]),
    ).fit()
    print("RESULT " + json.dumps({r.trial_id: [r.config["x"], r.status, r.path] for r in grid}))
    '''
)

# Two trials of six checkpointed steps. The first run's trials, once at
# step 4, wait for their tunejet process to die (then they end); the
# driver's hook blocks at a result of step KILL_AT until the test kills
# it. The restore passes no callbacks: fit() kept them.
KILLED = RECORDER + textwrap.dedent(
    '''
    import tempfile, time

    def trainable(config):
        start = 0
        ckpt = train.get_checkpoint()
        if ckpt:
            with open(os.path.join(ckpt.path, "step.json")) as f:
                start = json.load(f)
        for step in range(start + 1, 7):
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "step.json"), "w") as f:
                    json.dump(step, f)
                train.report({"step": step}, checkpoint=train.Checkpoint.from_directory(d))
            if sys.argv[1] == "run" and step == 4:
                parent = os.getppid()
                while os.getppid() == parent:  # until the runner is gone
                    time.sleep(0.1)
                sys.exit(1)

    path = os.path.abspath(os.path.join("results", "killed"))
    if sys.argv[1] == "run":
        tuner = tune.Tuner(
            trainable,
            param_space={"x": tune.grid_search([1, 2])},
            run_config=train.RunConfig(name="killed", storage_path="results", callbacks=[Recorder("kept")]),
        )
    else:
        tuner = tune.Tuner.restore(path, trainable=trainable)
    grid = tuner.fit()
    print("RESULT " + json.dumps({r.trial_id: [r.status, r.metrics.get("step")] for r in grid}))
    '''
)

# Ray's experiment trackers, with the fake mlflow and wandb modules the
# test puts on PYTHONPATH (FAKE_MLFLOW, FAKE_WANDB): x=2 fails after its
# results.
TRACKERS = textwrap.dedent(
    """
    import json
    from tunejet import train, tune
    from tunejet.air.integrations.mlflow import MLflowLoggerCallback
    from tunejet.air.integrations.wandb import WandbLoggerCallback

    def trainable(config):
        for i in range(1, 3):
            train.report({"loss": config["x"] / i, "name": "not a metric"})
        if config["x"] == 2:
            raise ValueError("x=2 fails")

    grid = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1, 2]), "opt": {"lr": 0.5}},
        run_config=train.RunConfig(name="trackers", storage_path="results", callbacks=[
            MLflowLoggerCallback(tracking_uri="file:./mlruns", experiment_name="exp", tags={"team": "a"}),
            WandbLoggerCallback(project="proj"),
        ]),
    ).fit()
    print("RESULT " + json.dumps({r.trial_id: r.config["x"] for r in grid}))
    """
)

# The calls the trackers make, each appended to $HOME/<module>.jsonl.
FAKE_LOG = textwrap.dedent(
    """
    import json, os

    def log(module, *args):
        with open(os.path.join(os.environ["HOME"], module + ".jsonl"), "a") as f:
            f.write(json.dumps(args) + "\\n")
    """
)

FAKE_MLFLOW = FAKE_LOG + textwrap.dedent(
    """
    import types

    class MlflowClient:
        def __init__(self, tracking_uri=None, registry_uri=None):
            log("mlflow", "client", tracking_uri)

        def get_experiment_by_name(self, name):
            return None

        def create_experiment(self, name):
            log("mlflow", "create_experiment", name)
            return "exp-1"

        def create_run(self, experiment_id, run_name=None, tags=None):
            log("mlflow", "create_run", experiment_id, run_name, tags)
            return types.SimpleNamespace(info=types.SimpleNamespace(run_id="run-" + run_name))

        def log_param(self, run_id, key, value):
            log("mlflow", "log_param", run_id, key, value)

        def log_metric(self, run_id, key, value, step=None):
            log("mlflow", "log_metric", run_id, key, value, step)

        def set_terminated(self, run_id, status=None):
            log("mlflow", "set_terminated", run_id, status)
    """
)

FAKE_WANDB = FAKE_LOG + textwrap.dedent(
    """
    class Run:
        def __init__(self, id):
            self.id = id

        def log(self, metrics, step=None):
            log("wandb", "log", self.id, metrics.get("loss"), step)

        def finish(self, exit_code=0):
            log("wandb", "finish", self.id, exit_code)

    def init(id=None, name=None, project=None, config=None, **kwargs):
        log("wandb", "init", id, name, project, config)
        return Run(id)
    """
)


_result = support.result_line


def setUpModule():
    support.binary()


class CallbacksTest(support.HomeTest):
    def records(self):
        with open(os.path.join(self.home, "records.jsonl")) as f:
            return [json.loads(line) for line in f]

    def test_each_hook_once_per_event(self):
        script = self.write("full.py", FULL)
        trials = _result(support.run_script(self, script, "run", home=self.home))
        records = self.records()
        self.assertEqual([r["hook"] for r in records].count("setup"), 1)
        self.assertEqual(records[0]["hook"], "setup", "setup comes before any other hook")
        self.assertEqual((records[0]["num_samples"], records[0]["total"]), (1, 3))
        self.assertEqual(records[-1], {"hook": "end", "statuses": ["ERROR", "TERMINATED", "TERMINATED"], "label": "full", "run": "run"})
        self.assertEqual(len(trials), 3)
        for trial_id, (x, status, path) in trials.items():
            mine = [r for r in records if r.get("trial") == trial_id]
            hooks = [r["hook"] for r in mine]
            with self.subTest(x=x):
                self.assertEqual(hooks[0], "start", hooks)
                self.assertEqual(hooks.count("start"), 1)
                self.assertEqual(mine[0]["config"], {"x": x})
                self.assertEqual(mine[0]["status"], "RUNNING")
                self.assertIn(trial_id, mine[0]["known"])
                want = [1] if x == 3 else [1, 2, 3]
                results = [r for r in mine if r["hook"] == "result"]
                self.assertEqual([r["step"] for r in results], want, "each result once, in order")
                self.assertEqual([r["last"] for r in results], want, "trial.last_result is the result")
                self.assertEqual(sorted(r["iteration"] for r in results), [r["iteration"] for r in results])
                checkpoints = [r["path"] for r in mine if r["hook"] == "checkpoint"]
                self.assertEqual(len(checkpoints), len(want))
                for p in checkpoints:
                    self.assertTrue(os.path.isdir(p), p)
                    self.assertEqual(os.path.dirname(p), path)
                last = mine[-1]
                if x == 3:
                    self.assertEqual((hooks.count("error"), hooks.count("complete")), (1, 0))
                    self.assertEqual((last["hook"], last["status"]), ("error", "ERROR"))
                    self.assertEqual(last["error_file"], os.path.join(path, "error.txt"))
                    self.assertTrue(os.path.exists(last["error_file"]))
                else:
                    self.assertEqual((hooks.count("complete"), hooks.count("error")), (1, 0))
                    self.assertEqual((last["hook"], last["status"], last["last"]), ("complete", "TERMINATED", 3))
                    self.assertEqual(last["path"], path)
                    self.assertTrue(last["tag"].endswith("x=%d" % x), last["tag"])
                    self.assertTrue(last["name"].endswith(trial_id), last["name"])
                self.assertEqual(status, "ERROR" if x == 3 else "TERMINATED")

    def test_a_killed_driver_then_restore_sees_each_result_once(self):
        script = self.write("killed.py", KILLED)
        env = dict(support.environ(self.home), KILL_AT="3")
        driver = subprocess.Popen(
            [sys.executable, script, "run"], cwd=self.home, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.addCleanup(driver.kill)
        marker = os.path.join(self.home, "kill_me")
        support.eventually(self, lambda: os.path.exists(marker) or driver.poll() is not None, "the hook at step 3")
        if driver.poll() is not None:
            self.fail("the driver ended before its hook blocked:\n%s%s" % driver.communicate())
        with open(marker) as f:
            pids = json.load(f)
        self.assertEqual(pids["driver"], driver.pid)
        self.assertEqual(len(pids["children"]), 1, "the driver's one child, its tunejet process")
        for pid in pids["children"] + [pids["driver"]]:
            os.kill(pid, signal.SIGKILL)
        driver.communicate(timeout=support.SCRIPT_TIMEOUT_S)
        self.assertEqual(driver.returncode, -signal.SIGKILL)
        first = self.records()
        self.assertTrue(any(r["hook"] == "result" for r in first), "the first run's hooks saw results")
        self.assertFalse([r for r in first if r["hook"] in ("complete", "end")])

        trials = _result(support.run_script(self, script, "restore", home=self.home))
        records = self.records()
        self.assertEqual({r["label"] for r in records}, {"kept"}, "the restore ran the callbacks fit() kept")
        self.assertEqual([r["run"] for r in records if r["hook"] == "setup"], ["run", "restore"])
        self.assertEqual([r["hook"] for r in records if r["hook"] == "end"], ["end"])
        self.assertEqual(records[-1]["hook"], "end")
        self.assertEqual(len(trials), 2)
        for trial_id, (status, step) in trials.items():
            mine = [r for r in records if r.get("trial") == trial_id]
            with self.subTest(trial=trial_id):
                self.assertEqual((status, step), ("TERMINATED", 6))
                self.assertEqual([r["step"] for r in mine if r["hook"] == "result"], [1, 2, 3, 4, 5, 6],
                                 "the two runs' hooks saw each result once")
                self.assertEqual([r["run"] for r in mine if r["hook"] == "start"], ["run", "restore"],
                                 "started once per run: the restore resumed it")
                self.assertEqual([r["hook"] for r in mine if r["hook"] in ("complete", "error")], ["complete"])

    def calls(self, module):
        with open(os.path.join(self.home, module + ".jsonl")) as f:
            return [json.loads(line) for line in f]

    def test_mlflow_and_wandb_trackers(self):
        # mlflow and wandb are fakes put on PYTHONPATH here: they record
        # the calls Ray's callbacks make to the real packages' API.
        fakes = os.path.join(self.home, "fakes")
        os.makedirs(os.path.join(fakes, "mlflow"))
        self.write(os.path.join("fakes", "mlflow", "__init__.py"), "")
        self.write(os.path.join("fakes", "mlflow", "tracking.py"), FAKE_MLFLOW)
        self.write(os.path.join("fakes", "wandb.py"), FAKE_WANDB)
        script = self.write("trackers.py", TRACKERS)
        env = support.environ(self.home)
        env["PYTHONPATH"] = fakes + os.pathsep + env["PYTHONPATH"]
        proc = subprocess.run([sys.executable, script], cwd=self.home, env=env, capture_output=True, text=True,
                              timeout=support.SCRIPT_TIMEOUT_S)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        trials = _result(proc.stdout)
        mlflow, wandb = self.calls("mlflow"), self.calls("wandb")
        self.assertEqual(mlflow[:2], [["client", "file:./mlruns"], ["create_experiment", "exp"]])
        self.assertEqual(len(trials), 2)
        for trial_id, x in trials.items():
            with self.subTest(x=x):
                name = "trainable_" + trial_id
                run = "run-" + name
                mine = [c for c in mlflow if run in c or name in c]
                self.assertEqual(mine[0], ["create_run", "exp-1", name, {"team": "a", "trial_name": name}])
                self.assertEqual(sorted(c[2:] for c in mine if c[0] == "log_param"), [["opt/lr", 0.5], ["x", x]])
                self.assertEqual([c[2:] for c in mine if c[0] == "log_metric" and c[2] == "loss"],
                                 [["loss", x / 1, 1], ["loss", x / 2, 2]])
                self.assertFalse([c for c in mine if c[0] == "log_metric" and c[2] == "name"], "a string is no metric")
                self.assertEqual(mine[-1], ["set_terminated", run, "FAILED" if x == 2 else "FINISHED"])
                runs = [c for c in wandb if c[1] == trial_id]
                self.assertEqual(runs[0], ["init", trial_id, name, "proj", {"x": x, "opt": {"lr": 0.5}}])
                self.assertEqual([c[2:] for c in runs if c[0] == "log"], [[x / 1, 1], [x / 2, 2]])
                self.assertEqual(runs[-1], ["finish", trial_id, 1 if x == 2 else 0])

    def test_restore_takes_callbacks_again(self):
        # Callbacks given to Tuner.restore replace those fit() kept; the
        # restore's hooks see only the restored run's events.
        script = self.write("full.py", FULL)
        support.run_script(self, script, "run", home=self.home)
        os.remove(os.path.join(self.home, "records.jsonl"))
        again = self.write("again.py", RECORDER + textwrap.dedent(
            """
            def trainable(config):
                pass

            path = os.path.abspath(os.path.join("results", "callbacks"))
            grid = tune.Tuner.restore(path, trainable=trainable, restart_errored=True, callbacks=[Recorder("given")]).fit()
            """
        ))
        support.run_script(self, again, "restore", home=self.home)
        records = self.records()
        self.assertEqual({r["label"] for r in records}, {"given"})
        hooks = [r["hook"] for r in records]
        self.assertEqual((hooks[0], hooks[-1]), ("setup", "end"))
        self.assertEqual(hooks.count("start"), 1, "only the restarted trial started: %s" % hooks)
        self.assertEqual(hooks.count("result"), 0, "no result of the first run is seen again")


class CallbackAPITest(unittest.TestCase):
    def test_only_callbacks_are_taken(self):
        with self.assertRaisesRegex(TypeError, "not a tune.Callback"):
            train.RunConfig(callbacks=[object()]).to_spec()
        with self.assertRaisesRegex(TypeError, "wrap it in a list"):
            train.RunConfig(callbacks=tune.Callback()).to_spec()
        self.assertNotIn("callbacks", train.RunConfig(callbacks=[tune.Callback()]).to_spec())

    def test_ray_module_paths(self):
        from tunejet.tune.callback import Callback
        from tunejet.tune.logger import CSVLoggerCallback, JsonLoggerCallback, LoggerCallback, TBXLoggerCallback

        self.assertIs(Callback, tune.Callback)
        for cls in (CSVLoggerCallback, JsonLoggerCallback, TBXLoggerCallback):
            self.assertTrue(issubclass(cls, LoggerCallback) and issubclass(cls, tune.Callback))

    def test_trackers_need_their_package(self):
        from tunejet.air.integrations.mlflow import MLflowLoggerCallback
        from tunejet.air.integrations.wandb import WandbLoggerCallback

        with mock.patch.dict(sys.modules, {"mlflow": None, "mlflow.tracking": None, "wandb": None}):
            with self.assertRaisesRegex(ImportError, "pip install mlflow"):
                MLflowLoggerCallback()
            with self.assertRaisesRegex(ImportError, "pip install wandb"):
                WandbLoggerCallback(project="p")


if __name__ == "__main__":
    unittest.main()
