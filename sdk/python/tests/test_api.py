"""The driver API without the tunejet binary: what goes into the
experiment file, results, checkpoints and the worker mode of Tuner."""

import json
import os
import shutil
import sys
import tempfile
import unittest
from unittest import mock

import tunejet
from tests import support
from tunejet import _reporter, _result, _space, _tuner, _worker, train, tune
from tunejet.tune import schedulers, search, stopper
from tunejet.tune.search.bayesopt import BayesOptSearch
from tunejet.tune.search.optuna import NSGAIISampler, OptunaSearch


class SpaceTest(unittest.TestCase):
    def test_distributions_in_the_file_syntax(self):
        space = {
            "lr": tune.loguniform(1e-4, 1e-1),
            "base2": tune.lograndint(16, 256, base=2),
            "q": tune.quniform(0, 1, 0.1),
            "n": tune.randint(1, 10),
            "noise": tune.randn(),
            "act": tune.choice(["relu", "tanh"]),
            "x": tune.grid_search([1, 2]),
            "model": {"width": tune.qrandint(8, 64, 8), "depth": 3},
            "const": {"uniform": [1, 2]},
            "opt": {"name": "adam"},
            "list": [1, 2],
        }
        self.assertEqual(
            _space.to_spec(space),
            {
                "lr": {"loguniform": [1e-4, 1e-1]},
                "base2": {"lograndint": [16, 256, 2]},
                "q": {"quniform": [0, 1, 0.1]},
                "n": {"randint": [1, 10]},
                "noise": {"randn": [0.0, 1.0]},
                "act": {"choice": ["relu", "tanh"]},
                "x": {"grid_search": [1, 2]},
                "model": {"width": {"qrandint": [8, 64, 8]}, "depth": 3},
                "const": {"literal": {"uniform": [1, 2]}},
                "opt": {"literal": {"name": "adam"}},
                "list": [1, 2],
            },
        )

    def test_refuses_what_json_cannot_hold(self):
        with self.assertRaisesRegex(TypeError, "with_parameters"):
            _space.to_spec({"data": object()})
        with self.assertRaisesRegex(ValueError, "JSON"):
            _space.to_spec({"x": float("nan")})

    def test_sample_from_is_the_drivers(self):
        # Ray's sample_from and PBT's functions run in the driver: the file
        # names them, has a driver section, and a function mutation the
        # space lacks gives each trial its first value as a sample_from.
        def double(spec):
            return spec.config.x * 2

        def fresh_lr():
            return 0.1

        pbt = tune.schedulers.PopulationBasedTraining(
            metric="m", mode="max", hyperparam_mutations={"lr": fresh_lr, "x": [1, 2]}, custom_explore_fn=lambda c: c)
        spec = tune.Tuner(lambda config: None, param_space={"x": 1, "y": tune.sample_from(double)},
                          tune_config=tune.TuneConfig(scheduler=pbt))._spec("f")
        self.assertEqual(spec["param_space"], {"x": 1, "y": {"sample_from": double.__name__},
                                               "lr": {"sample_from": fresh_lr.__name__}})
        self.assertEqual(spec["driver"], {})
        sched = spec["tune_config"]["scheduler"]
        self.assertEqual(sched["hyperparam_mutations"], {"lr": {"sample_from": fresh_lr.__name__}, "x": [1, 2]})
        self.assertEqual(sched["custom_explore_fn"], "<lambda>")
        with self.assertRaisesRegex(TypeError, "takes a function"):
            tune.sample_from(3)


class ResourcesTest(unittest.TestCase):
    """tune.with_resources becomes trainable.resources in the experiment file."""

    def spec(self, trainable):
        return tune.Tuner(trainable)._spec("f")["trainable"]

    def test_amounts_and_config_keys(self):
        def f(config, data=None):
            pass

        wrapped = tune.with_resources(f, {"CPU": 2, "GPU": 0.5, "memory": 1e9, "ssd": 1, "gpu_mem": {"config": "m"}})
        want = {"cpu": 2, "gpu": 0.5, "memory": 1e9, "ssd": 1, "gpu_mem": {"config": "m"}}
        self.assertEqual(self.spec(wrapped)["resources"], want)
        self.assertEqual(wrapped.__name__, "f")
        # with_parameters around it keeps the resources.
        self.assertEqual(self.spec(tune.with_parameters(wrapped, data=1))["resources"], want)
        self.assertNotIn("resources", self.spec(f), "the function itself is not changed")

    def test_what_cannot_be_written_is_refused(self):
        def f(config):
            pass

        with self.assertRaisesRegex(TypeError, r'\{"gpu": \{"config": "gpus"\}\}'):
            tune.with_resources(f, lambda config: {"gpu": config["gpus"]})
        with self.assertRaisesRegex(ValueError, "cpu must be >= 0"):
            tune.with_resources(f, {"cpu": -1})
        with self.assertRaisesRegex(ValueError, "gpu must be a number"):
            tune.with_resources(f, {"gpu": "1"})
        with self.assertRaisesRegex(TypeError, "must be a dict"):
            tune.with_resources(f, [1])


class ScalingConfigTest(unittest.TestCase):
    """train.ScalingConfig in tune.with_resources: the trial holds Ray's
    total_resources (python/ray/air/config.py, ray-project/ray at
    a4217c86c5e2be79aa82f0dc3184db522c504ac9): trainer_resources (1 CPU
    when unset) plus num_workers times resources_per_worker (1 CPU, or
    1 GPU with use_gpu, when unset)."""

    def resources(self, scaling):
        def f(config):
            pass

        return tune.Tuner(tune.with_resources(f, scaling))._spec("f")["trainable"]["resources"]

    def test_ray_faq_example(self):
        from tunejet.train import ScalingConfig

        # Ray's Tune FAQ (doc/source/tune/doc_code/faq.py at
        # 20db9a6008999dd4b10d7cac1a0fdefd0f884674).
        scaling = ScalingConfig(
            trainer_resources={"CPU": 2, "GPU": 0.5, "hdd": 80},
            num_workers=2,
            resources_per_worker={"CPU": 1},
        )
        self.assertEqual(self.resources(scaling), {"cpu": 4, "gpu": 0.5, "hdd": 80})

    def test_defaults(self):
        from tunejet.train import ScalingConfig

        self.assertEqual(self.resources(ScalingConfig()), {"cpu": 2})
        self.assertEqual(self.resources(ScalingConfig(num_workers=2, use_gpu=True)), {"cpu": 1, "gpu": 2})
        self.assertEqual(self.resources(ScalingConfig(num_workers=0)), {"cpu": 1})

    def test_ray_checks(self):
        from tunejet.train import ScalingConfig

        with self.assertRaisesRegex(ValueError, "`use_gpu` is False but `GPU` was found in `resources_per_worker`"):
            ScalingConfig(resources_per_worker={"GPU": 1})
        with self.assertRaisesRegex(ValueError, "`use_gpu` is True but `GPU` is set to 0"):
            ScalingConfig(use_gpu=True, resources_per_worker={"GPU": 0, "CPU": 1})


class AirTest(unittest.TestCase):
    """Ray <= 2.6's ray.air names are the same objects as ray.train's."""

    def test_air_names(self):
        from tunejet import air
        from tunejet.air import session
        from tunejet.air.checkpoint import Checkpoint
        from tunejet.air.config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
        from tunejet.air.result import Result

        self.assertIs(air.RunConfig, train.RunConfig)
        self.assertIs(air.CheckpointConfig, train.CheckpointConfig)
        self.assertIs(air.FailureConfig, train.FailureConfig)
        self.assertIs(air.ScalingConfig, train.ScalingConfig)
        self.assertIs(air.Checkpoint, train.Checkpoint)
        self.assertIs(air.Result, train.Result)
        self.assertIs(air.session, session)
        self.assertIs(session.report, train.report)
        self.assertIs(session.get_checkpoint, train.get_checkpoint)
        self.assertEqual(
            (Checkpoint, CheckpointConfig, FailureConfig, RunConfig, ScalingConfig, Result),
            (train.Checkpoint, train.CheckpointConfig, train.FailureConfig, train.RunConfig,
             train.ScalingConfig, train.Result),
        )


class DictCheckpointTest(unittest.TestCase):
    """Ray <= 2.6's Checkpoint.from_dict and to_dict: a directory holding
    the dict in dict_checkpoint.pkl, Ray AIR's file name."""

    def test_round_trip(self):
        from tunejet.air.checkpoint import Checkpoint

        c = Checkpoint.from_dict({"acc": 0.5, "step": 3})
        self.addCleanup(shutil.rmtree, c.path, True)
        self.assertEqual(os.listdir(c.path), ["dict_checkpoint.pkl"])
        self.assertEqual(Checkpoint.from_directory(c.path).to_dict(), {"acc": 0.5, "step": 3})
        with self.assertRaisesRegex(TypeError, "takes a dict"):
            Checkpoint.from_dict([1])
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        with self.assertRaisesRegex(ValueError, "not made by Checkpoint.from_dict"):
            Checkpoint.from_directory(d).to_dict()


class ConfigTest(unittest.TestCase):
    def test_tune_config(self):
        tc = tune.TuneConfig(
            metric="loss",
            mode="min",
            num_samples=4,
            scheduler=schedulers.ASHAScheduler(max_t=27, grace_period=1),
            search_alg=search.ConcurrencyLimiter(OptunaSearch(points_to_evaluate=[{"lr": 0.01}], seed=7), 2),
            time_budget_s=60,
        )
        self.assertEqual(
            tc.to_spec(),
            {
                "num_samples": 4,
                "wait_for_decisions": True,
                "metric": "loss",
                "mode": "min",
                "scheduler": {"type": "asha", "max_t": 27, "grace_period": 1},
                "search_alg": {"type": "tpe", "seed": 7, "points_to_evaluate": [{"lr": 0.01}]},
                "max_concurrent_trials": 2,
                "time_budget_s": 60,
            },
        )
        self.assertEqual(tune.TuneConfig(scheduler="fifo").to_spec(), {"num_samples": 1, "wait_for_decisions": True, "scheduler": "fifo"})

    def test_optuna_search_with_its_own_metric_mode_and_space(self):
        # Ray's OptunaSearch(space=, metric=, mode=) (python/ray/tune/search/optuna/optuna_search.py):
        # the Tuner then takes no param_space, and TuneConfig no metric or mode.
        searcher = OptunaSearch(space={"lr": tune.loguniform(1e-4, 1e-1)}, metric="loss", mode="min")
        tuner = tune.Tuner(lambda config: None, tune_config=tune.TuneConfig(search_alg=search.ConcurrencyLimiter(searcher, 2)))
        spec = tuner._spec("f")
        self.assertEqual(spec["param_space"], {"lr": {"loguniform": [1e-4, 1e-1]}})
        self.assertEqual((spec["tune_config"]["metric"], spec["tune_config"]["mode"]), ("loss", "min"))
        self.assertEqual(spec["tune_config"]["search_alg"], {"type": "tpe"})
        # Given in both places: refused, as Ray refuses it.
        both = tune.TuneConfig(metric="acc", mode="max", search_alg=OptunaSearch(metric="loss", mode="min"))
        with self.assertRaisesRegex(ValueError, "already instantiated with their own `metric` and `mode`"):
            both.to_spec()
        with self.assertRaisesRegex(ValueError, "search space"):
            tune.Tuner(lambda config: None, param_space={"x": tune.uniform(0, 1)},
                       tune_config=tune.TuneConfig(search_alg=searcher))._spec("f")

    def test_optuna_search_with_several_metrics_and_nsga2(self):
        # Ray's multi-objective OptunaSearch(metric=[...], mode=[...]), and
        # Optuna's NSGAIISampler as its sampler: search_alg nsga2.
        searcher = OptunaSearch(metric=["loss", "gain"], mode=["min", "max"],
                                sampler=NSGAIISampler(population_size=8, crossover_prob=0.8, seed=5))
        tc = tune.TuneConfig(search_alg=searcher).to_spec()
        self.assertEqual((tc["metric"], tc["mode"]), (["loss", "gain"], ["min", "max"]))
        self.assertEqual(
            tc["search_alg"],
            {"type": "nsga2", "population_size": 8, "crossover_prob": 0.8, "swapping_prob": 0.5, "seed": 5},
        )
        self.assertEqual(OptunaSearch(metric=["a", "b"], mode=["min", "min"]).to_spec(), {"type": "tpe"})

        class NSGAIISampler2:  # stands for optuna.samplers.NSGAIISampler
            pass

        NSGAIISampler2.__name__ = "NSGAIISampler"
        with self.assertRaisesRegex(ValueError, "use tunejet.tune.search.optuna.NSGAIISampler"):
            OptunaSearch(sampler=NSGAIISampler2())
        with self.assertRaisesRegex(ValueError, "takes no TPE settings or evaluated_rewards, got n_startup_trials"):
            OptunaSearch(sampler=NSGAIISampler(), n_startup_trials=3)

    def test_bayesopt_search_in_the_file(self):
        # Ray's BayesOptSearch(space, metric, mode, utility_kwargs=, random_state=, random_search_steps=):
        # tunejet's bayesopt, its space the param space, random_state the seed.
        searcher = BayesOptSearch(space={"width": tune.uniform(0, 20)}, metric="loss", mode="min",
                                  random_state=3, random_search_steps=5, points_to_evaluate=[{"width": 1.0}])
        spec = tune.Tuner(lambda config: None, tune_config=tune.TuneConfig(search_alg=searcher))._spec("f")
        self.assertEqual(spec["param_space"], {"width": {"uniform": [0, 20]}})
        self.assertEqual(
            spec["tune_config"]["search_alg"],
            {"type": "bayesopt", "n_startup_trials": 5, "seed": 3, "points_to_evaluate": [{"width": 1.0}]},
        )
        with self.assertWarnsRegex(UserWarning, "utility_kwargs=.... has no effect"):
            BayesOptSearch(utility_kwargs={"kind": "ucb", "kappa": 2.5, "xi": 0.0})
        with self.assertRaisesRegex(ValueError, "analysis=.... is not supported"):
            BayesOptSearch(analysis="/some/experiment")
        # tunejet's reproducible parallel search: the file's tune_config.reproducible.
        tc = tune.TuneConfig(search_alg=searcher, max_concurrent_trials=4, reproducible=True).to_spec()
        self.assertEqual((tc["reproducible"], tc["max_concurrent_trials"]), (True, 4))
        self.assertNotIn("reproducible", tune.TuneConfig().to_spec())
        self.assertEqual(tune.TuneConfig(search_alg=searcher, warm_start="/r/old").to_spec()["warm_start"], "/r/old")

    def test_a_custom_stopper_is_the_drivers(self):
        # Ray's tune.Stopper subclass (doc/source/tune/tutorials/tune-stopping.rst),
        # whose __init__ does not call super().__init__(): the driver runs it.
        class CustomStopper(tune.Stopper):
            def __init__(self):
                self.should_stop = False

            def __call__(self, trial_id, result):
                return result["mean_accuracy"] > 0.9

            def stop_all(self):
                return False

        for stop in (CustomStopper(), [CustomStopper()], tune.stopper.CombinedStopper(CustomStopper())):
            self.assertNotIn("stoppers", train.RunConfig(stop=stop).to_spec())
            spec = tune.Tuner(lambda config: None, run_config=train.RunConfig(stop=stop))._spec("f")
            self.assertEqual(spec["driver"], {"stopper": "CustomStopper"})
        combined = tune.stopper.CombinedStopper(tune.stopper.MaximumIterationStopper(max_iter=3))
        self.assertEqual(train.RunConfig(stop=combined).to_spec()["stoppers"], [{"type": "maximum_iteration", "max_iter": 3}])
        self.assertNotIn("driver", tune.Tuner(lambda config: None, run_config=train.RunConfig(stop=combined))._spec("f"))

    def test_a_searcher_of_ones_own_is_the_drivers(self):
        # Ray's Searcher subclass (python/ray/tune/search/searcher.py: suggest, on_trial_complete).
        class Mine(search.Searcher):
            def suggest(self, trial_id):
                return {"x": 1}

            def on_trial_complete(self, trial_id, result=None, error=False):
                pass

        for alg, name in ((Mine(), "Mine"), (search.ConcurrencyLimiter(Mine(), 2), "Mine"),
                          (search.Repeater(Mine(), repeat=3), "Repeater")):
            spec = tune.Tuner(lambda config: None, tune_config=tune.TuneConfig(search_alg=alg))._spec("f")
            self.assertEqual(spec["driver"], {"searcher": name})
            self.assertNotIn("search_alg", spec["tune_config"])

    def test_cli_reporter_and_verbose_become_flags(self):
        reporter = tune.CLIReporter(metric_columns={"acc": "Accuracy"}, parameter_columns=["lr"], max_report_frequency=2)
        reporter.add_metric_column("loss")
        self.assertEqual(
            _reporter.args(1, reporter),
            ["--verbose=1", "--metric-columns=acc,loss", "--parameter-columns=lr", "--report-every=2s"],
        )
        self.assertEqual(_reporter.args(None, None), [])
        with self.assertRaisesRegex(ValueError, "verbose must be 0, 1, 2 or 3"):
            _reporter.args(5, None)
        with self.assertRaisesRegex(ValueError, "custom ProgressReporter"):
            _reporter.args(None, object())

    def test_pbt_mutations(self):
        # A list (or tuple) stays a list, which explore shifts along; a
        # distribution, tune.choice included, is multiplied (Ray's
        # PopulationBasedTraining docstring: "Using tune.choice is NOT
        # equivalent to the above").
        pbt = schedulers.PopulationBasedTraining(
            perturbation_interval=4,
            hyperparam_mutations={
                "lr": tune.loguniform(1e-4, 1e-1),
                "bs": [16, 32],
                "opt": ("sgd", "adam"),
                "factor": tune.choice([1, 10]),
                "nested": {"momentum": [0.9, 0.99]},
            },
        )
        self.assertEqual(
            pbt.to_spec(),
            {
                "type": "pbt",
                "perturbation_interval": 4,
                "hyperparam_mutations": {
                    "lr": {"loguniform": [1e-4, 1e-1]},
                    "bs": [16, 32],
                    "opt": ["sgd", "adam"],
                    "factor": {"choice": [1, 10]},
                    "nested": {"momentum": [0.9, 0.99]},
                },
            },
        )

    def test_run_config(self):
        rc = train.RunConfig(
            stop=[stopper.MaximumIterationStopper(10), stopper.TimeoutStopper(60)],
            failure_config=train.FailureConfig(max_failures=2),
            checkpoint_config=train.CheckpointConfig(num_to_keep=1, checkpoint_score_attribute="loss", checkpoint_score_order="min"),
            sync_config=train.SyncConfig(sync_period=5),
        )
        self.assertEqual(
            rc.to_spec(),
            {
                "stoppers": [{"type": "maximum_iteration", "max_iter": 10}, {"type": "timeout", "timeout": 60}],
                "failure_config": {"max_failures": 2, "fail_fast": False},
                "checkpoint_config": {"checkpoint_score_order": "min", "num_to_keep": 1, "checkpoint_score_attribute": "loss"},
                "sync_config": {"sync_period": 5, "sync_timeout": 1800, "sync_artifacts": False, "sync_artifacts_on_checkpoint": True},
            },
        )
        with self.assertRaisesRegex(ValueError, "flattened"):
            train.RunConfig(stop={"a": {"b": 1}}).to_spec()
        self.assertEqual(train.RunConfig(stop=lambda trial_id, result: False).to_spec(), {})  # the driver's
        with self.assertRaisesRegex(TypeError, "must be a dict, a Stopper or a function"):
            train.RunConfig(stop=3).to_spec()
        self.assertEqual(train.CheckpointConfig(route="object_store").to_spec()["route"], "object_store")
        with self.assertRaisesRegex(ValueError, "auto, storage or object_store"):
            train.CheckpointConfig(route="nfs").to_spec()

    def test_the_file_of_a_tuner(self):
        def my_train(config):
            pass

        tuner = tune.Tuner(
            my_train,
            param_space={"x": tune.uniform(0, 1)},
            run_config=train.RunConfig(storage_path="relative/results"),
        )
        spec = tuner._spec("my_train")
        self.assertEqual(spec["run_config"]["storage_path"], os.path.abspath("relative/results"))
        self.assertRegex(spec["name"], r"^my_train_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d$")
        self.assertEqual(spec["trainable"]["name"], "my_train")
        self.assertEqual(spec["trainable"]["command"][1:], ["-m", "tunejet._worker", "my_train"])

    def test_the_command_of_a_restore(self):
        def my_train(config):
            pass

        tuner = tune.Tuner.restore(
            "~/results/exp", my_train, resume_unfinished=False, restart_errored=True, param_space={"x": tune.uniform(0, 2)}
        )
        workdir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, workdir)
        args = tuner._restore_args("tunejet", workdir, "my_train")
        path = os.path.join(os.path.expanduser("~"), "results", "exp")
        file, space = os.path.join(workdir, "experiment.json"), os.path.join(workdir, "param_space.json")
        self.assertEqual(
            args,
            ["tunejet", "restore", path, file, "--resume-unfinished=false", "--restart-errored", "--param-space", space],
        )
        with open(file) as f:
            self.assertEqual(json.load(f)["trainable"]["name"], "my_train")
        with open(space) as f:
            self.assertEqual(json.load(f), {"x": {"uniform": [0, 2]}})

    def test_class_trainables(self):
        class MyTrainable(tune.Trainable):
            def setup(self, config, data=None):
                self.data = data

        class NotATrainable:
            pass

        tune.Tuner(MyTrainable, run_config=train.RunConfig(checkpoint_config=train.CheckpointConfig(checkpoint_frequency=2)))
        with self.assertRaisesRegex(TypeError, "not a trainable: subclass tune.Trainable"):
            tune.Tuner(NotATrainable)
        # with_parameters gives setup its objects; with_resources keeps them.
        wrapped = tune.with_resources(tune.with_parameters(MyTrainable, data=[1, 2]), {"gpu": 1})
        self.assertTrue(issubclass(wrapped, MyTrainable))
        self.assertEqual(wrapped.__name__, "MyTrainable")
        self.assertEqual(wrapped({"x": 1}).data, [1, 2])
        self.assertEqual(MyTrainable({"x": 1}).data, None, "the class itself is not changed")
        self.assertEqual(tune.Tuner(wrapped)._spec("MyTrainable")["trainable"]["resources"], {"gpu": 1})

    def test_checkpoint_frequency_is_for_class_trainables(self):
        def f(config):
            pass

        for cc, word in ((train.CheckpointConfig(checkpoint_frequency=2), "checkpoint_frequency"),
                         (train.CheckpointConfig(checkpoint_at_end=True), "checkpoint_at_end")):
            with self.assertRaisesRegex(ValueError, "'%s' cannot be .* function trainable" % word):
                tune.Tuner(f, run_config=train.RunConfig(checkpoint_config=cc))
        with self.assertRaisesRegex(ValueError, "checkpoint_frequency must be >=0, got -1"):
            train.CheckpointConfig(checkpoint_frequency=-1).to_spec()


class ResultTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def trial(self, trial_id, losses, status="TERMINATED", error=None):
        path = os.path.join(self.dir, trial_id)
        os.makedirs(os.path.join(path, "checkpoint_000000"))
        with open(os.path.join(path, "result.json"), "w") as f:
            for i, loss in enumerate(losses):
                f.write(json.dumps({"loss": loss, "training_iteration": i + 1}) + "\n")
        return _result.Result(
            {
                "trial_id": trial_id,
                "status": status,
                "config": {"id": trial_id},
                "metrics": {"loss": losses[-1], "training_iteration": len(losses)},
                "path": path,
                "error": error,
                "checkpoint": os.path.join(path, "checkpoint_000000"),
            }
        )

    def test_best_result_by_scope(self):
        grid = _result.ResultGrid(
            self.dir,
            [self.trial("a", [5, 1, 4]), self.trial("b", [3, 3, 3]), self.trial("c", [9], "ERROR", "Traceback...\nValueError: x")],
            "loss",
            "min",
        )
        self.assertEqual(grid.get_best_result().trial_id, "b")
        self.assertEqual(grid.get_best_result(scope="all").trial_id, "a")
        self.assertEqual(grid.get_best_result(scope="avg").trial_id, "b")
        self.assertEqual(grid.get_best_result(mode="max").trial_id, "c")
        self.assertEqual((len(grid), grid.num_errors, grid.num_terminated), (3, 1, 2))
        self.assertEqual([str(e) for e in grid.errors], ["Traceback...\nValueError: x"])
        self.assertIsInstance(grid[2].error, tune.TuneError)
        with self.assertRaisesRegex(RuntimeError, "No best trial found"):
            grid.get_best_result("accuracy")
        with self.assertRaisesRegex(ValueError, "No metric is provided"):
            _result.ResultGrid(self.dir, [], None, None).get_best_result()

    def test_best_result_by_a_nested_metric(self):
        # Ray flattens results with "/" before it ranks them (flatten_dict in
        # ExperimentAnalysis), so a nested metric is named val/loss.
        a, b = self.trial("a", [1]), self.trial("b", [1])
        a.metrics["val"], b.metrics["val"] = {"loss": 0.5}, {"loss": 0.25}
        for name, value in (("a", 0.5), ("b", 0.25)):
            with open(os.path.join(self.dir, name, "result.json"), "w") as f:
                f.write(json.dumps({"val": {"loss": value}, "training_iteration": 1}) + "\n")
        grid = _result.ResultGrid(self.dir, [a, b], "val/loss", "min")
        self.assertEqual(grid.get_best_result().trial_id, "b")
        self.assertEqual(grid.get_best_result(scope="all").trial_id, "b")
        self.assertEqual(grid.get_best_result(mode="max", scope="avg").trial_id, "a")

    def test_dataframes_need_pandas(self):
        grid = _result.ResultGrid(self.dir, [self.trial("a", [1])])
        with mock.patch.dict("sys.modules", {"pandas": None}):
            with self.assertRaisesRegex(ImportError, "pandas is needed"):
                grid.get_dataframe()
            with self.assertRaisesRegex(ImportError, "pandas is needed"):
                grid[0].metrics_dataframe


class CheckpointTest(unittest.TestCase):
    def test_directory_round_trip(self):
        src = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, src)
        with open(os.path.join(src, "w.json"), "w") as f:
            f.write("{}")
        ckpt = train.Checkpoint.from_directory(src)
        with ckpt.as_directory() as d:
            self.assertEqual(os.listdir(d), ["w.json"])
        copy = ckpt.to_directory()
        self.addCleanup(shutil.rmtree, copy)
        self.assertEqual(os.listdir(copy), ["w.json"])
        self.assertIs(tune.Checkpoint, train.Checkpoint)

    def test_report_takes_a_checkpoint(self):
        with self.assertRaisesRegex(TypeError, "Checkpoint.from_directory"):
            train.report({"loss": 1}, checkpoint="/tmp")


class WorkerModeTest(unittest.TestCase):
    def setUp(self):
        patcher = mock.patch.object(_tuner, "_worker", None)
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_fit_hands_over_the_trainable_of_its_rank(self):
        _tuner._enter_worker({"fit": 1, "fits": ["/nowhere/first"], "can_restore": [False], "bin": "tunejet"})

        def first(config):
            pass

        def second(config):
            pass

        self.assertFalse(tune.Tuner.can_restore("/nowhere/first"))
        grid = tune.Tuner(first).fit()  # an earlier fit(): its results, read when used
        self.assertEqual(grid.experiment_path, "/nowhere/first")
        with self.assertRaises(_tuner._TrainableFound) as found:
            try:
                tune.Tuner.restore("/nowhere/first", trainable=second, resume_errored=True).fit()
            except Exception:  # a script's handler does not catch it
                self.fail("_TrainableFound was caught as an Exception")
        self.assertIs(found.exception.trainable, second)

    def test_a_failed_fit_keeps_its_rank(self):
        def f(config):
            pass

        with mock.patch.object(_tuner, "_fits", []), mock.patch.dict(os.environ, {"TUNEJET_BIN": "", "PATH": ""}):
            for _ in range(2):
                with self.assertRaises(tune.TuneError):
                    tune.Tuner(f).fit()
            self.assertEqual(_tuner._fits, [None, None])
        _tuner._enter_worker({"fit": 2, "fits": [None, None]})
        for _ in range(2):
            with self.assertRaisesRegex(tune.TuneError, "failed in the driver"):
                tune.Tuner(f).fit()
        with self.assertRaises(_tuner._TrainableFound):
            tune.Tuner(f).fit()

    def test_with_parameters_keeps_the_name(self):
        def train_fn(config, data):
            return config["x"] + data

        wrapped = tune.with_parameters(train_fn, data=2)
        self.assertEqual(wrapped({"x": 1}), 3)
        self.assertEqual(_tuner._trainable_name(wrapped), "train_fn")


class FindTrainableTest(unittest.TestCase):
    """The worker runs the driver's script up to its fit() call."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)
        for patcher in (
            mock.patch.object(_tuner, "_worker", None),
            mock.patch.object(sys, "argv", list(sys.argv)),
            mock.patch.object(sys, "path", list(sys.path)),
            mock.patch.dict(sys.modules),
        ):
            patcher.start()
            self.addCleanup(patcher.stop)
        cwd = os.getcwd()
        self.addCleanup(os.chdir, cwd)

    def find(self, source, fit=0):
        script = os.path.join(self.dir, "script.py")
        with open(script, "w") as f:
            f.write(source)
        return _worker.find_trainable({"script": script, "argv": ["--x"], "cwd": self.dir, "fit": fit}, "f")

    def test_returns_the_trainable_of_the_fit_call(self):
        source = (
            "import sys\n"
            "from tunejet import tune\n"
            "ARGV = sys.argv[1:]\n"
            "def f(config):\n"
            "    return ARGV\n"
            "tune.Tuner(f).fit()\n"
            "raise AssertionError('after fit')\n"
        )
        self.assertEqual(self.find(source)({}), ["--x"])

    def test_a_script_that_ends_or_exits_first(self):
        with self.assertRaisesRegex(_worker._Fatal, "ended without reaching its fit"):
            self.find("x = 1\n")
        with self.assertRaisesRegex(_worker._Fatal, "exited \\(status 0\\) before its fit"):
            self.find("import sys\nsys.exit(0)\n")


class BinaryTest(unittest.TestCase):
    def test_missing_binary_says_how_to_build_it(self):
        with mock.patch.dict(os.environ, {"TUNEJET_BIN": "", "PATH": ""}):
            with self.assertRaisesRegex(tune.TuneError, "make build"):
                _tuner._binary()

    def test_an_unreachable_deployment_is_a_clear_error(self):
        # With NATS_URL, fit() submits to that deployment (cmd/tunejet's
        # TestPythonDriverOnADeployment runs one); one that does not answer
        # fails fit() with the tunejet process's reason.
        def f(config):
            pass

        home = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, home)
        env = {"NATS_URL": "nats://127.0.0.1:1", "HOME": home, "TUNEJET_BIN": support.binary()}
        with mock.patch.dict(os.environ, env):
            with self.assertRaisesRegex(tune.TuneError, "connect to NATS at nats://127.0.0.1:1"):
                tune.Tuner(f, run_config=tune.RunConfig(storage_path=home)).fit()

    def test_package_keeps_the_protocol_functions(self):
        for name in ["report", "get_checkpoint", "get_config", "get_trial_id", "get_attempt", "in_session"]:
            self.assertTrue(callable(getattr(tunejet, name)), name)
        with mock.patch.dict(os.environ, {"TUNEJET_SOCKET": ""}):
            self.assertFalse(tunejet.in_session())
            with self.assertRaisesRegex(RuntimeError, "not running under a tunejet runner"):
                train.get_context()


if __name__ == "__main__":
    unittest.main()
