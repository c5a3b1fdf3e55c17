"""Class trainables end to end: tune.Trainable subclasses with Ray's API
(setup, step, save_checkpoint, load_checkpoint, cleanup) under a
scheduler, with checkpoint_frequency, and resumed after an error."""

import json
import os
import pickle
import textwrap
import unittest

from tests import support

# Four learning rates under ASHA; the loss after i steps is
# offset + (1 - lr) ** i, offset given by with_parameters.
ASHA = textwrap.dedent(
    '''
    import json, os
    from tunejet import train, tune
    from tunejet.tune.schedulers import ASHAScheduler

    class Curve(tune.Trainable):
        def setup(self, config, offset=0.0):
            self.lr, self.offset, self.loss = config["lr"], offset, 1.0

        def step(self):
            self.loss *= 1 - self.lr
            return {"loss": self.offset + self.loss, "step_of_instance": self.iteration + 1}

        def save_checkpoint(self, checkpoint_dir):
            return {"loss": self.loss}

        def load_checkpoint(self, checkpoint):
            self.loss = checkpoint["loss"]

        def cleanup(self):
            open(os.path.join(self.config["dir"], "cleanup_" + self.trial_id), "w").close()

    grid = tune.Tuner(
        tune.with_parameters(Curve, offset=0.5),
        param_space={"lr": tune.grid_search([0.05, 0.1, 0.2, 0.4]), "dir": os.getcwd()},
        tune_config=tune.TuneConfig(
            metric="loss", mode="min", scheduler=ASHAScheduler(max_t=8, grace_period=1, reduction_factor=2)),
        run_config=train.RunConfig(name="asha", storage_path="results", stop={"training_iteration": 8}),
    ).fit()
    best = grid.get_best_result()
    print("RESULT " + json.dumps({
        "errors": [str(e) for e in grid.errors],
        "trials": [{"id": r.trial_id, "status": r.status, "lr": r.config["lr"], "path": r.path,
                    "history": [[h["training_iteration"], h["loss"], h["step_of_instance"]] for h in r.history()],
                    "checkpoint": r.checkpoint.path if r.checkpoint else None} for r in grid],
        "best_lr": best.config["lr"],
    }))
    '''
)

# checkpoint_frequency=2 and a stop at iteration 5: checkpoints at 2 and
# 4, and at 5 unless checkpoint_at_end=False.
FREQUENCY = textwrap.dedent(
    '''
    import json, os, sys
    from tunejet import train, tune

    class Counter(tune.Trainable):
        def step(self):
            return {"n": self.iteration + 1}

        def save_checkpoint(self, checkpoint_dir):
            with open(os.path.join(checkpoint_dir, "state.json"), "w") as f:
                json.dump({"iteration": self.iteration}, f)

        def load_checkpoint(self, checkpoint):
            raise AssertionError("nothing resumes here")

    at_end = {"default": None, "no_end": False}[sys.argv[1]]
    grid = tune.Tuner(
        Counter,
        run_config=train.RunConfig(
            name="frequency_" + sys.argv[1], storage_path="results", stop={"training_iteration": 5},
            checkpoint_config=train.CheckpointConfig(checkpoint_frequency=2, checkpoint_at_end=at_end)),
    ).fit()
    print("RESULT " + json.dumps({"errors": [str(e) for e in grid.errors], "path": grid[0].path,
                                  "iterations": [h["training_iteration"] for h in grid[0].history()]}))
    '''
)

# A step that fails at iteration 3 the first time; a checkpoint every
# iteration. resume_errored continues from the checkpoint of iteration 2.
RESUME = textwrap.dedent(
    '''
    import json, os, sys
    from tunejet import train, tune

    class Flaky(tune.Trainable):
        def setup(self, config):
            self.total, self.loaded_from = 0, None

        def step(self):
            marker = os.path.join(self.config["dir"], "failed_once")
            if self.iteration + 1 == 3 and not os.path.exists(marker):
                open(marker, "w").close()
                raise RuntimeError("step 3 fails once")
            self.total += self.iteration + 1
            return {"total": self.total, "loaded_from": self.loaded_from}

        def save_checkpoint(self, checkpoint_dir):
            return {"total": self.total, "iteration": self.iteration}

        def load_checkpoint(self, checkpoint):
            self.total, self.loaded_from = checkpoint["total"], checkpoint["iteration"]

    path = os.path.abspath(os.path.join("results", "resume"))
    if sys.argv[1] == "run":
        tuner = tune.Tuner(
            Flaky, param_space={"dir": os.getcwd()},
            run_config=train.RunConfig(
                name="resume", storage_path="results", stop={"training_iteration": 5},
                checkpoint_config=train.CheckpointConfig(checkpoint_frequency=1)))
    else:
        tuner = tune.Tuner.restore(path, trainable=Flaky, resume_errored=True)
    grid = tuner.fit()
    r = grid[0]
    print("RESULT " + json.dumps({"status": r.status, "path": r.path, "errors": [str(e) for e in grid.errors],
                                  "history": [[h["training_iteration"], h["total"], h["loaded_from"]] for h in r.history()]}))
    '''
)


_result = support.result_line


def _checkpoints(trial_path):
    return sorted(n for n in os.listdir(trial_path) if n.startswith("checkpoint_"))


def setUpModule():
    support.binary()


class TrainableTest(support.HomeTest):
    def test_a_trainable_class_under_asha(self):
        out = _result(support.run_script(self, self.write("asha.py", ASHA), home=self.home))
        self.assertEqual(out["errors"], [])
        self.assertEqual(out["best_lr"], 0.4)
        reached_max = 0
        for trial in out["trials"]:
            self.assertEqual(trial["status"], "TERMINATED")
            history = trial["history"]
            self.assertGreaterEqual(len(history), 1)
            self.assertLessEqual(len(history), 8)
            for i, (iteration, loss, step_of_instance) in enumerate(history, start=1):
                # One step() per training_iteration, in one instance whose
                # setup got with_parameters' offset.
                self.assertEqual((iteration, step_of_instance), (i, i))
                self.assertAlmostEqual(loss, 0.5 + (1 - trial["lr"]) ** i)
            self.assertTrue(os.path.exists(os.path.join(self.home, "cleanup_" + trial["id"])), "cleanup() not called")
            if len(history) == 8:
                # Stopped by the stop dict: done, so checkpointed at its end
                # (checkpoint_at_end defaults to True for a class).
                reached_max += 1
                with open(os.path.join(trial["checkpoint"], "_dict_checkpoint.pkl"), "rb") as f:
                    self.assertAlmostEqual(pickle.load(f)["loss"], (1 - trial["lr"]) ** 8)
            else:
                self.assertIsNone(trial["checkpoint"], "a trial stopped by ASHA is not done: no checkpoint at end")
        self.assertGreaterEqual(reached_max, 1, "no trial reached max_t")

    def test_checkpoint_frequency(self):
        script = self.write("frequency.py", FREQUENCY)
        for mode, want in (("default", [2, 4, 5]), ("no_end", [2, 4])):
            with self.subTest(checkpoint_at_end=mode):
                out = _result(support.run_script(self, script, mode, home=self.home))
                self.assertEqual(out["errors"], [])
                self.assertEqual(out["iterations"], [1, 2, 3, 4, 5])
                names = _checkpoints(out["path"])
                self.assertEqual(len(names), len(want), names)
                got = []
                for name in names:
                    with open(os.path.join(out["path"], name, "state.json")) as f:
                        got.append(json.load(f)["iteration"])
                self.assertEqual(got, want)

    def test_resume_errored_loads_the_checkpoint(self):
        script = self.write("resume.py", RESUME)
        first = _result(support.run_script(self, script, "run", home=self.home))
        self.assertEqual(first["status"], "ERROR")
        self.assertIn("RuntimeError: step 3 fails once", first["errors"][0])
        self.assertEqual([h[0] for h in first["history"]], [1, 2])
        self.assertEqual(len(_checkpoints(first["path"])), 2)

        out = _result(support.run_script(self, script, "restore", home=self.home))
        self.assertEqual(out["errors"], [])
        self.assertEqual(out["status"], "TERMINATED")
        self.assertEqual(
            out["history"],
            [[1, 1, None], [2, 3, None], [3, 6, 2], [4, 10, 2], [5, 15, 2]],
            "the restored trial went on from load_checkpoint of iteration 2",
        )
        # The restored run kept checkpoint_frequency=1 (from the checkpoint
        # it resumed from): one checkpoint per iteration.
        self.assertEqual(len(_checkpoints(out["path"])), 5)


if __name__ == "__main__":
    unittest.main()
