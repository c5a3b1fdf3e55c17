"""The driver end to end beyond the Ray examples: errors with their
traceback, closures and with_parameters, get_context, a returned dict,
a script whose top level runs only in the driver, and Ctrl-C then
restore."""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import unittest
import unittest.mock

from tests import support
from tunejet import _tuner, tune

DRIVER = textwrap.dedent(
    '''
    import json, os, sys
    from tunejet import train, tune

    with open("top_level.log", "a") as f:
        f.write("%d\\n" % os.getpid())


    def helper(x):
        raise ValueError("bad x=%s" % x)


    def make_trainable(offset):
        def trainable(config, data=None):
            ctx = train.get_context()
            if config["x"] == 2:
                helper(config["x"])
            train.report({
                "y": config["x"] + offset + len(data),
                "trial_id": ctx.get_trial_id(),
                "trial_dir": ctx.get_trial_dir(),
                "cwd": os.getcwd(),
                "argv": sys.argv[1:],
            })
            return {"y": config["x"] + offset + len(data) + 100, "final": True}
        return trainable


    tuner = tune.Tuner(
        tune.with_parameters(make_trainable(10), data=[1, 2, 3]),
        param_space={"x": tune.grid_search([1, 2, 3]), "nested": {"a": tune.choice(["p"])}},
        tune_config=tune.TuneConfig(metric="y", mode="max"),
        run_config=train.RunConfig(name="driver", storage_path="results"),
    )
    grid = tuner.fit()
    with open("after_fit.log", "a") as f:
        f.write("%d\\n" % os.getpid())
    best = grid.get_best_result()
    print("RESULT " + json.dumps({
        "num_errors": grid.num_errors,
        "num_terminated": grid.num_terminated,
        "errors": [str(e) for e in grid.errors],
        "best_x": best.config["x"],
        "best_y": best.metrics["y"],
        "best_path": best.path,
    }))
    '''
)

# A long trial for Ctrl-C: it reports a checkpoint each step and writes a
# marker file once it has reported; a restore continues it to step 10.
INTERRUPTED = textwrap.dedent(
    '''
    import json, os, sys, tempfile, time
    from tunejet import train, tune

    def slow(config):
        start = 0
        checkpoint = train.get_checkpoint()
        if checkpoint:
            with open(os.path.join(checkpoint.path, "step.json")) as f:
                start = json.load(f)
        first = start + 1
        for step in range(first, 11):
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "step.json"), "w") as f:
                    json.dump(step, f)
                train.report({"step": step, "first": first, "attempt": train.get_context().get_attempt()},
                             checkpoint=train.Checkpoint.from_directory(d))
            open(os.path.join(config["marker_dir"], "reported"), "w").close()
            if checkpoint is None:
                time.sleep(1)  # long enough for Ctrl-C to land first

    path = os.path.abspath(os.path.join("results", "interrupted"))
    if sys.argv[1] == "run":
        tuner = tune.Tuner(slow, param_space={"marker_dir": os.getcwd()},
                           run_config=train.RunConfig(name="interrupted", storage_path="results"))
    else:
        assert tune.Tuner.can_restore(path)
        tuner = tune.Tuner.restore(path, trainable=slow)
    grid = tuner.fit()
    print("RESULT " + json.dumps(grid[0].metrics))
    '''
)

# An experiment of 3 samples of TPE, run to its end, then restored with 5:
# the restore adds 2 trials.
EXTENDED = textwrap.dedent(
    '''
    import json, os, sys
    from tunejet import train, tune
    from tunejet.tune.search.optuna import OptunaSearch

    def quadratic(config):
        train.report({"loss": (config["x"] - 1) ** 2})

    path = os.path.abspath(os.path.join("results", "extended"))
    if sys.argv[1] == "run":
        tuner = tune.Tuner(quadratic, param_space={"x": tune.uniform(-4, 4)},
                           tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=3,
                                                       search_alg=OptunaSearch(n_startup_trials=2), seed=3),
                           run_config=train.RunConfig(name="extended", storage_path="results"))
    else:
        tuner = tune.Tuner.restore(path, trainable=quadratic, num_samples=5)
    grid = tuner.fit()
    print("RESULT " + json.dumps({"trials": len(grid), "ids": sorted(r.trial_id for r in grid),
                                  "terminated": grid.num_terminated}))
    '''
)

# Objects put by the driver: one passed in the param space, one held by
# the trainable's closure; each trial reads both, and writes down which
# process read them. The script's top level puts them in every trial too,
# where put() stores nothing and only names them again.
OBJECTS = textwrap.dedent(
    '''
    import json, os
    import tunejet
    from tunejet import train, tune

    table = {"rows": list(range(1000)), "name": "table"}
    in_config = tunejet.put(table)
    held = tunejet.put({"weights": [0.5, 0.25]})

    def trainable(config):
        data = tunejet.get(config["data"])
        weights = tunejet.get(held)["weights"]
        train.report({"rows": len(data["rows"]), "name": data["name"], "w": sum(weights) + config["x"]})

    grid = tune.Tuner(
        trainable,
        param_space={"data": in_config, "x": tune.grid_search([1, 2])},
        run_config=train.RunConfig(name="objects", storage_path="results"),
    ).fit()
    print("RESULT " + json.dumps({
        "metrics": sorted([r.metrics["rows"], r.metrics["name"], r.metrics["w"]] for r in grid),
        "errors": [str(e) for e in grid.errors],
        "driver_get": tunejet.get(held),
    }))
    '''
)

# Trials that ask for GPUs by their config: the embedded runner counts the
# devices of CUDA_VISIBLE_DEVICES (two fake ones here) and gives each trial
# its own.
GPUS = textwrap.dedent(
    '''
    import json, os
    import tunejet
    from tunejet import train, tune

    def trainable(config):
        train.report({
            "ids": tunejet.get_gpu_ids(),
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "resources": train.get_context().get_trial_resources(),
        })

    grid = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1, "gpu": {"config": "g"}}),
        param_space={"g": tune.grid_search([1, 0.5, 0])},
        run_config=train.RunConfig(name="gpus", storage_path="results"),
    ).fit()
    print("RESULT " + json.dumps({str(r.config["g"]): r.metrics for r in grid}))
    '''
)


# A checkpointing trainable whose first attempt crashes after epoch 2: the
# retry resumes from the latest checkpoint, by the route the script names
# (argv[1]): "storage" (the runner writes straight to storage_path) or
# "object_store" (through the JetStream Object Store and the syncer).
ROUTES = textwrap.dedent(
    '''
    import json, os, sys, tempfile
    from tunejet import train, tune

    def trainable(config):
        start = 1
        ckpt = train.get_checkpoint()
        if ckpt:
            with ckpt.as_directory() as d, open(os.path.join(d, "state.json")) as f:
                start = json.load(f)["epoch"] + 1
        for epoch in range(start, 5):
            if epoch == 3 and ckpt is None:
                raise RuntimeError("crash at epoch 3")
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"epoch": epoch}, f)
                train.report({"epoch": epoch}, checkpoint=train.Checkpoint.from_directory(d))

    grid = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1, 2])},
        run_config=train.RunConfig(
            name="routes_" + sys.argv[1], storage_path="results",
            failure_config=train.FailureConfig(max_failures=1),
            checkpoint_config=train.CheckpointConfig(route=sys.argv[1]),
        ),
    ).fit()
    print("RESULT " + json.dumps([[r.status, [h["epoch"] for h in r.history()], r.path] for r in grid]))
    '''
)


# A trainable that reports acc while the experiment's metric is loss: fit()
# raises Ray's strict metric check error at the first result, unless
# TUNE_DISABLE_STRICT_METRIC_CHECKING=1 (argv[1]).
WRONG_METRIC = textwrap.dedent(
    '''
    import json, os, sys
    from tunejet import train, tune

    os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] = sys.argv[1]

    def trainable(config):
        for i in range(3):
            train.report({"acc": 0.5 + i / 10})

    tuner = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=train.RunConfig(name="wrong_metric_" + sys.argv[1], storage_path="results"),
    )
    try:
        grid = tuner.fit()
    except tune.TuneError as e:
        print("RESULT " + json.dumps({"raised": str(e)}))
    else:
        print("RESULT " + json.dumps({"statuses": [r.status for r in grid]}))
'''
)


# One trial that reports twice; TUNE_DISABLE_AUTO_CALLBACK_LOGGERS is
# argv[1]. It prints each trial folder's files.
TENSORBOARD = textwrap.dedent(
    '''
    import json, os, sys
    from tunejet import train, tune

    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = sys.argv[1]

    def trainable(config):
        for i in range(2):
            train.report({"loss": 1.0 / (i + 1)})

    grid = tune.Tuner(
        trainable,
        param_space={"lr": tune.grid_search([0.1])},
        run_config=train.RunConfig(name="tensorboard_" + sys.argv[1], storage_path="results"),
    ).fit()
    print("RESULT " + json.dumps([sorted(os.listdir(r.path)) for r in grid]))
'''
)


UNWRITABLE = textwrap.dedent(
    '''
    import os, sys
    from tunejet import train, tune

    def trainable(config):
        open(os.path.join(os.environ["HOME"], "started"), "w").close()
        train.report({"loss": 1})

    try:
        tune.Tuner(trainable, run_config=train.RunConfig(name="unwritable", storage_path=sys.argv[1])).fit()
    except tune.TuneError as e:
        print("ERROR " + str(e).replace("\\n", "\\\\n"))
    '''
)


_result = support.result_line


def setUpModule():
    support.binary()


class DriverTest(support.HomeTest):
    def lines(self, name):
        with open(os.path.join(self.home, name)) as f:
            return f.read().split()

    def test_trials_run_the_trainable_not_the_experiment(self):
        script = self.write("driver.py", DRIVER)
        out = _result(support.run_script(self, script, "--flag", home=self.home))
        self.assertEqual(out["num_errors"], 1)
        self.assertEqual(out["num_terminated"], 2)
        self.assertEqual((out["best_x"], out["best_y"]), (3, 116))
        # The error is the trainable's traceback, from its frame on.
        error = out["errors"][0]
        self.assertIn("Traceback (most recent call last):", error)
        self.assertIn("in trainable", error)
        self.assertIn("in helper", error)
        self.assertIn("ValueError: bad x=2", error)
        self.assertNotIn("_worker.py", error)
        # The script ran only in the driver: the trials load the trainable
        # it pickled.
        self.assertEqual(len(self.lines("top_level.log")), 1)
        self.assertEqual(len(self.lines("after_fit.log")), 1)
        grid = _tuner.load_results(support.binary(), os.path.join(self.home, "results", "driver"))
        self.assertEqual(out["best_path"], os.path.join(self.home, "results", "driver", os.path.basename(out["best_path"])))
        for r in grid:
            self.assertEqual(r.config["nested"], {"a": "p"})
            if r.status != "TERMINATED":
                continue
            first, last = r.history()
            self.assertEqual(first["trial_id"], r.trial_id)
            self.assertEqual(first["cwd"], first["trial_dir"])
            self.assertEqual(first["argv"], ["--flag"])
            self.assertEqual(last["final"], True, "the dict the trainable returned is its last result")

    def test_checkpoints_resume_by_either_route(self):
        # Both routes of a checkpoint, as the experiment names them: the
        # trial's retry resumes from its checkpoint either way, and the
        # checkpoint ends in storage (with a manifest when the runner
        # wrote it there itself).
        script = self.write("routes.py", ROUTES)
        for route in ("storage", "object_store"):
            with self.subTest(route=route):
                out = _result(support.run_script(self, script, route, home=self.home))
                self.assertEqual(len(out), 2)
                for status, epochs, path in out:
                    self.assertEqual(status, "TERMINATED")
                    self.assertEqual(epochs, [1, 2, 3, 4], "resumed after epoch 2, not restarted")
                    with open(os.path.join(path, "checkpoint_000003", "state.json")) as f:
                        self.assertEqual(json.load(f), {"epoch": 4})
                    manifest = os.path.join(path, "checkpoint_000003", ".tunejet_manifest.json")
                    self.assertEqual(os.path.exists(manifest), route == "storage",
                                     "only a checkpoint the runner wrote itself has its manifest")

    def test_put_and_get(self):
        script = self.write("objects.py", OBJECTS)
        out = _result(support.run_script(self, script, home=self.home))
        self.assertEqual(out["errors"], [])
        self.assertEqual(out["metrics"], [[1000, "table", 1.75], [1000, "table", 2.75]])
        self.assertEqual(out["driver_get"], {"weights": [0.5, 0.25]})

    def test_put_refuses_what_cannot_be_pickled(self):
        import tunejet
        with self.assertRaisesRegex(TypeError, "cannot be pickled"):
            tunejet.put(lambda: 1)
        with self.assertRaisesRegex(TypeError, "not an object reference"):
            tunejet.get({"data": 1})

    def test_trials_get_their_gpus(self):
        script = self.write("gpus.py", GPUS)
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="0,1")
        with unittest.mock.patch.dict(os.environ, env):
            out = _result(support.run_script(self, script, home=self.home))
        whole, half, none = out["1"], out["0.5"], out["0"]
        self.assertEqual(len(whole["ids"]), 1)
        self.assertEqual(len(half["ids"]), 1)
        self.assertEqual(none["ids"], [])
        self.assertEqual(none["visible"], "", "a trial without GPUs sees none")
        for m in (whole, half):
            self.assertIn(m["ids"][0], (0, 1))
            self.assertEqual(m["visible"], str(m["ids"][0]))
        self.assertEqual(whole["resources"], {"cpu": 1, "gpu": 1})
        self.assertEqual(half["resources"], {"cpu": 1, "gpu": 0.5})

    def test_a_metric_no_trial_reports_fails_fit(self):
        script = self.write("wrong_metric.py", WRONG_METRIC)
        out = _result(support.run_script(self, script, "0", home=self.home))
        self.assertIn(
            "Trial returned a result which did not include the specified metric(s) `loss` "
            "that `tune.TuneConfig()` expects.", out.get("raised", "fit() did not raise: %s" % out))
        out = _result(support.run_script(self, script, "1", home=self.home))
        self.assertEqual(out, {"statuses": ["TERMINATED", "TERMINATED"]})

    def test_tensorboard_files_unless_the_auto_loggers_are_off(self):
        # Each trial folder gets a TensorBoard event file beside result.json,
        # as Ray's default loggers write one; TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1,
        # set by the script as for Ray, turns it off.
        script = self.write("tensorboard.py", TENSORBOARD)
        for switch, want in (("0", 1), ("1", 0)):
            with self.subTest(switch=switch):
                (files,) = _result(support.run_script(self, script, switch, home=self.home))
                self.assertIn("result.json", files)
                events = [f for f in files if f.startswith("events.out.tfevents.")]
                self.assertEqual(len(events), want, files)

    def test_ctrl_c_then_restore(self):
        script = self.write("interrupted.py", INTERRUPTED)
        # A process started in the background by a shell without job
        # control ignores SIGINT, and Python then installs no handler for
        # it: restore the default, as a terminal gives it.
        driver = subprocess.Popen(
            [sys.executable, script, "run"], cwd=self.home, env=support.environ(self.home),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.addCleanup(driver.kill)
        support.eventually(self, lambda: os.path.exists(os.path.join(self.home, "reported")), "the trial's first report")
        driver.send_signal(signal.SIGINT)
        out, err = driver.communicate(timeout=support.SCRIPT_TIMEOUT_S)
        self.assertNotEqual(driver.returncode, 0, out + err)
        self.assertIn("KeyboardInterrupt", err)
        self.assertIn("Tuner.restore(%r, trainable=slow)" % os.path.join(self.home, "results", "interrupted"), err)
        self.assertNotIn("RESULT", out)

        metrics = _result(support.run_script(self, script, "restore", home=self.home))
        self.assertEqual(metrics["step"], 10)
        self.assertGreater(metrics["first"], 1, "the restored trial resumed from its checkpoint")
        self.assertGreaterEqual(metrics["attempt"], 2)

    def test_restore_with_more_samples_adds_trials(self):
        script = self.write("extended.py", EXTENDED)
        first = _result(support.run_script(self, script, "run", home=self.home))
        self.assertEqual((first["trials"], first["terminated"]), (3, 3))
        more = _result(support.run_script(self, script, "restore", home=self.home))
        self.assertEqual((more["trials"], more["terminated"]), (5, 5))
        self.assertEqual(more["ids"][:3], first["ids"], "the finished trials are kept")
        with self.assertRaisesRegex(ValueError, "num_samples must be a count >= 1, or -1"):
            tune.Tuner.restore(os.path.join(self.home, "results", "extended"), trainable=print, num_samples=0)

    def test_a_bucket_without_credentials_is_an_exception(self):
        # The endpoint is a closed port on loopback: the AWS SDK finds no
        # credentials before it would connect, and asks no metadata service.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        url = "s3://bucket/results?endpoint=http://127.0.0.1:%d&use_path_style=true&disable_https=true&region=us-east-1" % port
        env = support.environ(self.home)
        for key in list(env):
            if key.startswith("AWS_"):
                del env[key]
        env.update(AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
        script = self.write("unwritable.py", UNWRITABLE)
        proc = subprocess.run(
            [sys.executable, script, url], cwd=self.home, env=env,
            capture_output=True, text=True, timeout=support.SCRIPT_TIMEOUT_S,
        )
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        errors = [line for line in proc.stdout.splitlines() if line.startswith("ERROR ")]
        self.assertEqual(len(errors), 1, "fit() raised no TuneError:\n" + proc.stdout + proc.stderr)
        self.assertIn("tunejet: storage_path s3://bucket/results?", errors[0])
        self.assertIn(": no credentials (", errors[0])
        self.assertFalse(os.path.exists(os.path.join(self.home, "started")), "a trial started")


if __name__ == "__main__":
    unittest.main()
