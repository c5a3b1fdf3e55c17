"""Ray Tune behaviours that scripts rely on, each through fit() as a
script runs it: what a stop dict, a trainable's return value, a metric
value and a Result hold, and how experiments are named."""

import json
import os
import tempfile
import textwrap
import unittest

from tests import support
from tunejet import _tuner

# Ray's Trial.should_stop (python/ray/tune/experiment/trial.py,
# ray-project/ray at f4dcee96a1a58b9c8f00329994e0ab74d79ecc60): a result
# whose "done" is truthy stops the trial, and so does a criterion with
# result[key] >= value, which for stop={"done": True} is done >= True.
# Ray's pbt_function example stops its trials so. argv[1] says which run:
# "dict" gives stop={"done": True}, "none" gives no stop at all.
STOP_DONE = textwrap.dedent(
    '''
    import json, sys
    from tunejet import train, tune

    def trainable(config):
        for step in range(1, 11):
            train.report({"step": step, "done": step >= config["until"]})

    stop = {"done": True, "training_iteration": 100} if sys.argv[1] == "dict" else None
    grid = tune.Tuner(
        trainable,
        param_space={"until": tune.grid_search([3, 4])},
        run_config=train.RunConfig(name="stop_done_" + sys.argv[1], storage_path="results", stop=stop),
    ).fit()
    print("RESULT " + json.dumps(sorted(
        [r.config["until"], r.status, [h["step"] for h in r.history()]] for r in grid)))
    '''
)

# Ray's wrap_function (python/ray/tune/trainable/function_trainable.py,
# ray-project/ray at 97d8aa4784931ca2efcbd952f762bbf024ba7e19) reports
# what the trainable returns, or yields, with handle_output: a dict as
# is, a number as {"_metric": number}, nothing for a falsy value, and
# refuses anything else.
RETURNS = textwrap.dedent(
    '''
    import json
    from tunejet import train, tune

    def trainable(config):
        kind = config["kind"]
        if kind == "number":
            return 2.5
        if kind == "dict":
            return {"loss": 0.25}
        if kind == "none":
            train.report({"loss": 1})
            return None
        return "not a result"

    def generator(config):
        for x in (1, 2, 3):
            yield x / 2

    grids = [
        tune.Tuner(trainable, param_space={"kind": tune.grid_search(["number", "dict", "none", "string"])},
                   run_config=train.RunConfig(name="returns", storage_path="results")).fit(),
        tune.Tuner(generator, run_config=train.RunConfig(name="yields", storage_path="results")).fit(),
    ]
    print("RESULT " + json.dumps({
        r.config.get("kind", "generator"): {
            "status": r.status,
            "history": [{k: h[k] for k in ("_metric", "loss") if k in h} for h in r.history()],
            "error": str(r.error or ""),
        }
        for grid in grids for r in grid
    }))
    '''
)

# Ray writes results with SafeFallbackEncoder
# (python/ray/air/_internal/json.py, ray-project/ray at
# 52059ed2a5eb27c8761a5edf027db6c2da9f396c): an integral number is an int,
# another number a float, and a value it cannot encode is str(value).
NOT_JSON = textwrap.dedent(
    '''
    import datetime, fractions, json
    from tunejet import train, tune

    class Model:
        def __str__(self):
            return "Model(layers=3)"

    def trainable(config):
        train.report({
            "loss": fractions.Fraction(1, 4),
            "when": datetime.date(2026, 12, 3),
            "model": Model(),
            "nested": {"z": 1 + 2j, "tags": {"b"}},
            "items": [fractions.Fraction(3, 1), Model()],
        })

    grid = tune.Tuner(trainable, run_config=train.RunConfig(name="not_json", storage_path="results")).fit()
    r = grid[0]
    print("RESULT " + json.dumps({"status": r.status, "error": str(r.error or ""),
                                  "metrics": {k: r.metrics.get(k) for k in ("loss", "when", "model", "nested", "items")},
                                  "history": [h.get("model") for h in r.history()]}))
    '''
)

# Ray <= 2.6's Result.log_dir is the trial's folder, a pathlib.Path: what
# Result.path names since.
LOG_DIR = textwrap.dedent(
    '''
    import json, pathlib
    from tunejet import train, tune

    def trainable(config):
        train.report({"loss": config["x"]})

    grid = tune.Tuner(trainable, param_space={"x": tune.grid_search([1, 2])},
                      run_config=train.RunConfig(name="log_dir", storage_path="results")).fit()
    print("RESULT " + json.dumps([
        {"path": r.path, "log_dir": str(r.log_dir), "is_path": isinstance(r.log_dir, pathlib.Path),
         "files": sorted(p.name for p in r.log_dir.iterdir())}
        for r in grid
    ]))
    '''
)

# Two fit() calls of one trainable without a RunConfig.name, in the same
# second: the driver's clock is frozen, so that both take Ray's default
# name "<trainable>_<date>_<time>" from the same second.
SAME_SECOND = textwrap.dedent(
    '''
    import datetime, json, types
    from tunejet import _config, train, tune

    class Frozen(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(2026, 12, 3, 12, 0, 0)

    _config.datetime = types.SimpleNamespace(datetime=Frozen, timedelta=datetime.timedelta)

    def trainable(config):
        train.report({"x": config["x"]})

    paths = []
    for x in (1, 2):
        grid = tune.Tuner(trainable, param_space={"x": x},
                          run_config=train.RunConfig(storage_path="results")).fit()
        paths.append([grid.experiment_path, [r.config["x"] for r in grid]])
    print("RESULT " + json.dumps(paths))
    '''
)

# A script in Ray <= 2.6's names (ray.air's session, Checkpoint and
# configs, and ScalingConfig for the trial's resources) with only the
# package renamed: its first attempt crashes after a checkpoint, and the
# retry resumes from it through session.get_checkpoint().
AIR = textwrap.dedent(
    '''
    import json, os, tempfile
    from tunejet import air, tune
    from tunejet.air import session
    from tunejet.air.checkpoint import Checkpoint
    from tunejet.air.config import ScalingConfig

    def trainable(config):
        start = 1
        checkpoint = session.get_checkpoint()
        if checkpoint:
            with checkpoint.as_directory() as d, open(os.path.join(d, "step")) as f:
                start = int(f.read()) + 1
        for step in range(start, 4):
            if step == 2 and checkpoint is None:
                raise RuntimeError("crash")
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "step"), "w") as f:
                    f.write(str(step))
                session.report({"step": step, "resources": session.get_trial_resources(),
                                "trial": session.get_trial_name()},
                               checkpoint=Checkpoint.from_directory(d))

    grid = tune.Tuner(
        tune.with_resources(trainable, ScalingConfig(trainer_resources={"CPU": 0.5}, num_workers=1,
                                                     resources_per_worker={"CPU": 0.5})),
        run_config=air.RunConfig(name="air", storage_path="results",
                                 failure_config=air.FailureConfig(max_failures=1),
                                 checkpoint_config=air.CheckpointConfig(num_to_keep=1)),
    ).fit()
    r = grid[0]
    print("RESULT " + json.dumps({"status": r.status, "steps": [h["step"] for h in r.history()],
                                  "resources": r.metrics["resources"], "trial": r.metrics["trial"],
                                  "name": r.trial_name}))
    '''
)

# A script with a fixed RunConfig.name, run twice. Ray's Tuner.fit()
# without a restore starts a new experiment in the existing folder
# (TuneController.__init__: no resume_config, "Starting a new
# experiment."; python/ray/tune/execution/tune_controller.py,
# ray-project/ray at bde9c15a44ce3b309504e2bce936c9e3ae4b18ed): the new
# run's trials and state file join the folder, and its results are the new
# run's. argv[1] is the first x of the grid.
RERUN = textwrap.dedent(
    '''
    import json, sys
    from tunejet import train, tune

    def trainable(config):
        train.report({"x": config["x"]})

    x = int(sys.argv[1])
    grid = tune.Tuner(trainable, param_space={"x": tune.grid_search([x, x + 1])},
                      run_config=train.RunConfig(name="fixed", storage_path="results")).fit()
    print("RESULT " + json.dumps({"path": grid.experiment_path, "xs": sorted(r.metrics["x"] for r in grid),
                                  "trials": sorted(r.path for r in grid)}))
    '''
)


_result = support.result_line


def setUpModule():
    support.binary()


class CompatTest(support.HomeTest):
    def run_driver(self, text, *args):
        script = os.path.join(self.home, "driver.py")
        with open(script, "w") as f:
            f.write(text)
        return support.run_script(self, script, *args, home=self.home)

    def test_stop_done_true(self):
        for how in ("dict", "none"):
            with self.subTest(stop=how):
                out = _result(self.run_driver(STOP_DONE, how))
                self.assertEqual(out, [
                    [3, "TERMINATED", [1, 2, 3]],
                    [4, "TERMINATED", [1, 2, 3, 4]],
                ])

    def test_returned_values_are_reported_as_ray_does(self):
        out = _result(self.run_driver(RETURNS))
        self.assertEqual(out["number"], {"status": "TERMINATED", "history": [{"_metric": 2.5}], "error": ""})
        self.assertEqual(out["dict"], {"status": "TERMINATED", "history": [{"loss": 0.25}], "error": ""})
        self.assertEqual(out["none"], {"status": "TERMINATED", "history": [{"loss": 1}], "error": ""})
        self.assertEqual(out["generator"]["history"], [{"_metric": 0.5}, {"_metric": 1}, {"_metric": 1.5}])
        self.assertEqual(out["string"]["status"], "ERROR")
        self.assertIn(
            "ValueError: Invalid return or yield value. Either return/yield a single number or a "
            "dictionary object in your trainable function.", out["string"]["error"])

    def test_a_value_json_cannot_hold_is_stored_as_its_string(self):
        out = _result(self.run_driver(NOT_JSON))
        self.assertEqual(out["error"], "")
        self.assertEqual(out["status"], "TERMINATED")
        self.assertEqual(out["metrics"], {
            "loss": 0.25,
            "when": "2026-12-03",
            "model": "Model(layers=3)",
            "nested": {"z": "(1+2j)", "tags": "{'b'}"},
            "items": [3, "Model(layers=3)"],
        })
        self.assertEqual(out["history"], ["Model(layers=3)"])

    def test_result_log_dir_is_the_trial_folder(self):
        out = _result(self.run_driver(LOG_DIR))
        self.assertEqual(len(out), 2)
        for r in out:
            self.assertTrue(r["path"].startswith(os.path.join(self.home, "results", "log_dir") + os.sep), r)
            self.assertEqual(r["log_dir"], r["path"])
            self.assertTrue(r["is_path"], r)
            self.assertIn("result.json", r["files"])

    def test_default_names_differ_within_a_second(self):
        out = _result(self.run_driver(SAME_SECOND))
        (first, xs1), (second, xs2) = out
        self.assertEqual((xs1, xs2), ([1], [2]))
        self.assertEqual(first, os.path.join(self.home, "results", "trainable_2026-12-03_12-00-00"))
        self.assertNotEqual(first, second)
        self.assertTrue(os.path.basename(second).startswith("trainable_2026-12-03_12-00-00_"), second)

    def test_a_script_in_ray_air_names(self):
        out = _result(self.run_driver(AIR))
        self.assertEqual(out["status"], "TERMINATED", out)
        self.assertEqual(out["steps"], [1, 2, 3], "resumed after step 1 from its checkpoint")
        self.assertEqual(out["resources"], {"cpu": 1})
        self.assertEqual(out["trial"], out["name"])

    def test_a_rerun_with_a_fixed_name_starts_a_new_run(self):
        first = _result(self.run_driver(RERUN, "1"))
        second = _result(self.run_driver(RERUN, "10"))
        self.assertEqual(first["xs"], [1, 2])
        self.assertEqual(second["xs"], [10, 11], "the second run's results are its own")
        self.assertEqual(second["path"], first["path"])
        self.assertFalse(set(first["trials"]) & set(second["trials"]), "trial folders are new")
        for path in first["trials"] + second["trials"]:
            self.assertTrue(os.path.isfile(os.path.join(path, "result.json")), path)
        grid = _tuner.load_results(support.binary(), second["path"])
        self.assertEqual(sorted(r.metrics["x"] for r in grid), [10, 11], "storage reads the new run")


if __name__ == "__main__":
    unittest.main()
