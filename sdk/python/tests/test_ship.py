"""The trainable goes to its trials by value, as in Ray: fit() pickles it
with cloudpickle and each trial's worker loads it, without running the
driver's script again. Running the script again (the replay) is only the
fallback, with a warning saying why."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

from tests import support

# A folder made before fit(), which the trainable writes into: every trial
# must see the driver's folder, not one of its own.
MKDTEMP = textwrap.dedent(
    '''
    import json, os, tempfile
    from tunejet import train, tune

    with open("top_level.log", "a") as f:
        f.write("%d\\n" % os.getpid())
    folder = tempfile.mkdtemp(prefix="driver-", dir=os.getcwd())

    def trainable(config):
        with open(os.path.join(folder, "trial_%d" % config["x"]), "w") as f:
            f.write("written")
        train.report({"folder": folder})

    grid = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1, 2, 3])},
        run_config=train.RunConfig(name="mkdtemp", storage_path="results"),
    ).fit()
    print("RESULT " + json.dumps({
        "folder": folder,
        "seen": [r.metrics.get("folder") for r in grid],
        "files": sorted(os.listdir(folder)),
        "errors": [str(e) for e in grid.errors],
    }))
    '''
)

# A closure over a local variable whose value only the driver knows.
CLOSURE = textwrap.dedent(
    '''
    import json, os, uuid
    from tunejet import train, tune

    def make():
        token = "%d-%s" % (os.getpid(), uuid.uuid4().hex)

        def trainable(config):
            train.report({"token": token, "x": config["x"]})

        return trainable, token

    trainable, token = make()
    grid = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1, 2])},
        run_config=train.RunConfig(name="closure", storage_path="results"),
    ).fit()
    print("RESULT " + json.dumps({
        "token": token,
        "seen": [r.metrics.get("token") for r in grid],
        "errors": [str(e) for e in grid.errors],
    }))
    '''
)

# A notebook: the program has no file (python3 -c), its trainable lives in
# __main__; a second trainable is made by exec().
NOTEBOOK = textwrap.dedent(
    '''
    import json
    from tunejet import train, tune

    scale = 10

    def cell_trainable(config):
        train.report({"y": config["x"] * scale})

    namespace = {"train": train}
    exec("def exec_trainable(config):\\n    train.report({'y': config['x'] + 1000})\\n", namespace)

    out = {}
    for name, fn in (("cell", cell_trainable), ("exec", namespace["exec_trainable"])):
        grid = tune.Tuner(
            fn,
            param_space={"x": tune.grid_search([1, 2])},
            run_config=train.RunConfig(name="notebook_" + name, storage_path="results"),
        ).fit()
        out[name] = {"y": sorted(r.metrics.get("y") for r in grid), "errors": [str(e) for e in grid.errors]}
    print("RESULT " + json.dumps(out))
    '''
)

# The fallback: a trainable that cannot be pickled (a closure over a lock)
# runs by the replay of the script, with a warning that says why.
UNPICKLABLE = textwrap.dedent(
    '''
    import json, os, threading
    from tunejet import train, tune

    with open("top_level.log", "a") as f:
        f.write("%d\\n" % os.getpid())
    lock = threading.Lock()

    def trainable(config):
        with lock:
            train.report({"y": config["x"]})

    grid = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1, 2])},
        run_config=train.RunConfig(name="unpicklable", storage_path="results"),
    ).fit()
    print("RESULT " + json.dumps({"y": sorted(r.metrics.get("y") for r in grid), "errors": [str(e) for e in grid.errors]}))
    '''
)


_result = support.result_line


def setUpModule():
    support.binary()


class ShipTest(support.HomeTest):
    def run_driver(self, args, env=None):
        """Run the driver (python3 ARGS) in home; return (stdout, stderr)."""
        proc = subprocess.run(
            [sys.executable, *args], cwd=self.home, env=env or support.environ(self.home),
            capture_output=True, text=True, timeout=support.SCRIPT_TIMEOUT_S,
        )
        if proc.returncode != 0:
            self.fail("driver exited with status %d\nstdout:\n%s\nstderr:\n%s" % (proc.returncode, proc.stdout, proc.stderr))
        return proc.stdout, proc.stderr

    def top_level_runs(self):
        with open(os.path.join(self.home, "top_level.log")) as f:
            return len(f.read().split())

    def test_every_trial_sees_the_folder_made_before_fit(self):
        out, err = self.run_driver([self.write("mkdtemp.py", MKDTEMP)])
        result = _result(out)
        self.assertEqual(result["errors"], [])
        self.assertEqual(result["seen"], [result["folder"]] * 3, "a trial saw another folder than the driver's")
        self.assertEqual(result["files"], ["trial_1", "trial_2", "trial_3"])
        self.assertEqual(self.top_level_runs(), 1, "the script's top level ran again in a trial")
        self.assertNotIn("UserWarning", err)

    def test_a_closure_over_a_local_variable_goes_by_value(self):
        out, _ = self.run_driver([self.write("closure.py", CLOSURE)])
        result = _result(out)
        self.assertEqual(result["errors"], [])
        self.assertEqual(result["seen"], [result["token"]] * 2)

    def test_a_notebook_trainable_and_one_made_by_exec(self):
        out, _ = self.run_driver(["-c", NOTEBOOK])
        result = _result(out)
        self.assertEqual(result["cell"], {"y": [10, 20], "errors": []})
        self.assertEqual(result["exec"], {"y": [1001, 1002], "errors": []})

    def test_without_cloudpickle_the_script_is_replayed_with_a_warning(self):
        blocked = os.path.join(self.home, "blocked", "cloudpickle")
        os.makedirs(blocked)
        with open(os.path.join(blocked, "__init__.py"), "w") as f:
            f.write("raise ImportError('cloudpickle is blocked in this test')\n")
        env = support.environ(self.home)
        env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(blocked), env["PYTHONPATH"]])
        out, err = self.run_driver([self.write("mkdtemp.py", MKDTEMP)], env=env)
        result = _result(out)
        self.assertEqual(result["errors"], [])
        # The warm worker replays the script once, and forks each trial.
        self.assertEqual(len(set(result["seen"])), 1, "the warm worker's replay makes one folder for its trials")
        self.assertEqual(self.top_level_runs(), 2, "the script's top level ran in the driver and the warm worker")
        self.assertIn("cloudpickle is blocked in this test", err)
        self.assertIn("runs the script again", err)

    def test_an_unpicklable_trainable_is_replayed_with_a_warning(self):
        out, err = self.run_driver([self.write("unpicklable.py", UNPICKLABLE)])
        result = _result(out)
        self.assertEqual(result, {"y": [1, 2], "errors": []})
        self.assertEqual(self.top_level_runs(), 2, "the script's top level ran in the driver and the warm worker")
        self.assertIn("cannot be pickled", err)
        self.assertIn("lock", err)


if __name__ == "__main__":
    unittest.main()
