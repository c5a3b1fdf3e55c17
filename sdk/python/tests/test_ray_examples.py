"""Ray Tune example scripts, with only their imports changed, run end to
end: the driver API, the worker, the tunejet binary and the results."""

import json
import math
import os
import shutil
import subprocess
import tempfile
import unittest

from tests import support
from tunejet import _result, _tuner


def setUpModule():
    support.binary()


def tearDownModule():
    support.remove_built()


class RayExampleTest(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="tunejet-home-")
        self.addCleanup(shutil.rmtree, self.home, True)

    def results(self, *parts):
        return _tuner.load_results(support.binary(), os.path.join(self.home, *parts), "", "")

    def test_function_trainable_with_checkpoints(self):
        out = support.run_script(self, os.path.join(support.EXAMPLES, "func_checkpointing.py"), "--smoke-test", home=self.home)
        grid = self.results("tunejet_results", "func_checkpointing")
        self.assertEqual(len(grid), 3)
        self.assertEqual(grid.num_terminated, 3)
        for r in grid:
            self.assertEqual(r.metrics["training_iteration"], 3, r)
            self.assertEqual([h["iterations"] for h in r.history()], [0, 1, 2])
            with r.checkpoint.as_directory() as d, open(os.path.join(d, "checkpoint.json")) as f:
                self.assertEqual(json.load(f), {"step": 2})
        best = grid.get_best_result("mean_loss", "min")
        self.assertEqual(best.metrics["mean_loss"], min(r.metrics["mean_loss"] for r in grid))
        self.assertIn("Best hyperparameters:  %s" % (best.config,), out)
        self.assertIn("Best checkpoint:  %r" % (best.checkpoint,), out)

    def test_max_failures_resumes_from_the_checkpoint(self):
        out = support.run_script(self, os.path.join(support.EXAMPLES, "trial_fault_tolerance.py"), home=self.home)
        self.assertIn("Errors: 0 Terminated: 2", out)
        grid = self.results("ray_results", "trial_fault_tolerance")
        self.assertEqual(sorted(r.config["lr"] for r in grid), [0.1, 0.2])
        for r in grid:
            self.assertEqual(r.status, "TERMINATED")
            self.assertEqual(r.num_failures, 1)
            # Epochs 1 and 2 before the crash, 3 to 5 after: resumed, not restarted.
            self.assertEqual([h["epoch"] for h in r.history()], [1, 2, 3, 4, 5])
            with open(os.path.join(r.path, "error.txt")) as f:
                error = f.read()
            self.assertIn('trial_fault_tolerance.py", line', error)
            self.assertIn("in trainable", error)
            self.assertIn("RuntimeError: simulated crash at epoch 3", error)
            self.assertNotIn("_worker.py", error)

    def test_restore_resume_errored(self):
        out = support.run_script(self, os.path.join(support.EXAMPLES, "restore_errored.py"), home=self.home)
        self.assertIn("Errors: 2 Terminated: 0", out)
        self.assertIn("After restore: Errors: 0 Terminated: 2", out)
        # x was 1.0: JSON numbers come back as ints when they are whole.
        self.assertIn("Best config: {'num_epochs': 4, 'x': 1}", out)
        grid = self.results("ray_results", "tune_fault_tolerance_guide")
        self.assertEqual(grid.num_terminated, 2)
        for r in grid:
            self.assertEqual([h["epoch"] for h in r.history()], [1, 2, 3, 4])
            self.assertIsNone(r.error)

    def test_async_hyperband_stops_trials_early(self):
        out = support.run_script(self, os.path.join(support.EXAMPLES, "async_hyperband.py"), "--smoke-test", home=self.home)
        grid = self.results("tunejet_results", "asha_test")
        self.assertEqual(len(grid), 8)
        self.assertEqual(grid.num_terminated, 8)
        iterations = sorted(r.metrics["training_iteration"] for r in grid)
        self.assertEqual(iterations[-1], 9, "some trial reaches max_t")
        self.assertLess(iterations[0], 9, "ASHA stopped no trial: %s" % iterations)
        for r in grid:
            if r.metrics["training_iteration"] < 9:
                self.assertTrue(r.end_reason, r)
        best = grid.get_best_result("mean_loss", "min")
        self.assertIn("Best hyperparameters found were:  %s" % (best.config,), out)

    def test_a_class_trainable_under_hyperband(self):
        out = support.run_script(self, os.path.join(support.EXAMPLES, "hyperband_class.py"), "--smoke-test", home=self.home)
        grid = self.results("tunejet_results", "hyperband_test")
        self.assertEqual(len(grid), 20)
        self.assertEqual(grid.num_terminated, 20)
        for r in grid:
            self.assertEqual(r.metrics["training_iteration"], 1)
            self.assertAlmostEqual(r.metrics["episode_reward_mean"], math.tanh(1 / r.config["width"]) * r.config["height"])
            # Done at the stop: checkpoint_at_end (Ray's default for a class)
            # saved it through save_checkpoint.
            with r.checkpoint.as_directory() as d, open(os.path.join(d, "checkpoint")) as f:
                self.assertEqual(json.load(f), {"timestep": 1})
        best = grid.get_best_result("episode_reward_mean", "max")
        self.assertIn("Best hyperparameters found were:  %s" % (best.config,), out)

    def test_pbt_function_in_ray_air_names(self):
        # Ray <= 2.6's names, a list mutation, stop={"done": True} and
        # Checkpoint.from_dict: the smoke test's 8 trials run 10
        # iterations each (done, the accuracy above 200, needs many more),
        # and some_other_factor stays in its list.
        out = support.run_script(self, os.path.join(support.EXAMPLES, "pbt_function.py"), "--smoke-test", home=self.home)
        grid = self.results("tunejet_results", "pbt_function_api_example")
        self.assertEqual(len(grid), 8)
        self.assertEqual(grid.num_terminated, 8)
        for r in grid:
            self.assertEqual(r.metrics["training_iteration"], 10, r)
            self.assertIn(r.config["some_other_factor"], (1, 2), r)
            self.assertLessEqual({h["config"]["some_other_factor"] for h in r.history()}, {1, 2})
            self.assertLessEqual(len(r.best_checkpoints), 2, "num_to_keep=2")
            with r.checkpoint.as_directory() as d:
                self.assertIn("dict_checkpoint.pkl", os.listdir(d))
            self.assertEqual(r.checkpoint.to_dict()["step"], 10)
        best = grid.get_best_result("mean_accuracy", "max")
        self.assertIn("Best hyperparameters found were:  %s" % (best.config,), out)

    def test_bayesopt_search(self):
        # The GP suggests once random_search_steps random configs have
        # completed; its suggestions close in on the loss's minimum
        # (height -100: each unit lower takes 0.1 off the loss).
        out = support.run_script(self, os.path.join(support.EXAMPLES, "bayesopt_example.py"), home=self.home)
        # Ray's default name: the trainable's and the local time.
        (name,) = [n for n in os.listdir(os.path.join(self.home, "tunejet_results")) if n.startswith("objective_")]
        grid = self.results("tunejet_results", name)
        self.assertEqual(len(grid), 12)
        self.assertEqual(grid.num_terminated, 12)
        best = grid.get_best_result("mean_loss", "min")
        self.assertIn("Best hyperparameters found were:  %s" % (best.config,), out)
        spec = _result.read_spec(grid.experiment_path)
        self.assertEqual(spec["tune_config"]["search_alg"], "bayesopt")
        self.assertEqual(spec["tune_config"]["search_alg_config"], {"n_startup_trials": 4, "seed": 42})
        self.assertEqual(spec["tune_config"]["max_concurrent_trials"], 4)
        # The last 4 trials are the GP's (with 4 in flight the first 7 may
        # be random): each near height -100, where a random draw lands 1
        # time in 20.
        for r in list(grid)[-4:]:
            self.assertLess(r.config["height"], -90, r.config)

    def test_optuna_multi_objective(self):
        # Ray's multi-objective OptunaSearch: TPE over two metrics, the
        # results' best by each metric and their Pareto front.
        out = support.run_script(self, os.path.join(support.EXAMPLES, "optuna_multiobjective.py"), home=self.home)
        (name,) = [n for n in os.listdir(os.path.join(self.home, "tunejet_results")) if n.startswith("multi_objective_")]
        path = os.path.join(self.home, "tunejet_results", name)
        spec = _result.read_spec(path)
        self.assertEqual(spec["tune_config"]["metrics"], ["loss", "gain"])
        self.assertEqual(spec["tune_config"]["modes"], ["min", "max"])
        self.assertEqual(spec["tune_config"]["search_alg"], "tpe")
        metric, mode = _result.read_objective(path)
        grid = _tuner.load_results(support.binary(), path, metric, mode)
        self.assertEqual(len(grid), 16)
        self.assertEqual(grid.num_terminated, 16)
        for m, md in (("loss", "min"), ("gain", "max")):
            best = grid.get_best_result(m, md)
            self.assertIn("Best hyperparameters for %s found were:  %s" % (m, best.config), out)
        with self.assertRaisesRegex(ValueError, "No metric is provided"):
            grid.get_best_result()
        # The front: the trials no other beats in both loss and gain; it
        # holds the best of each metric.
        front = grid.best_results
        points = [(r.metrics["loss"], -r.metrics["gain"]) for r in grid]
        for r in grid:
            p = (r.metrics["loss"], -r.metrics["gain"])
            dominated = any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in points)
            self.assertEqual(r in front, not dominated, (r.config, p))
        self.assertIn(grid.get_best_result("loss", "min"), front)
        self.assertIn(grid.get_best_result("gain", "max"), front)
        proc = subprocess.run([support.binary(), "results", "--json", path], capture_output=True, text=True, check=True)
        listed = json.loads(proc.stdout)["pareto_front"]
        self.assertEqual(listed, [r.trial_id for r in front])


if __name__ == "__main__":
    unittest.main()
