"""Population Based Training through fit(), as Ray's pbt_function example
runs it: hyperparam_mutations holding a list and a distribution."""

import json
import os
import tempfile
import textwrap
import unittest

from tests import support

# Ray's python/ray/tune/examples/pbt_function.py (ray-project/ray at
# e7e78a0ce8c424884b9d657067e2ab50d1feb245), cut to what PBT sees: 8 trials,
# a checkpoint every step, a perturbation every 5 iterations, and its
# hyperparam_mutations {"lr": tune.uniform(0.0001, 0.02),
# "some_other_factor": [1, 2]}. The accuracy is the example's noise alone,
# so that each perturbation ranks the trials at random and about a quarter
# of them exploit another. Each result carries the trial's
# some_other_factor, so the history shows every value it took.
PBT_FUNCTION = textwrap.dedent(
    '''
    import json, os, random, tempfile
    from tunejet import train, tune
    from tunejet.tune.schedulers import PopulationBasedTraining

    def pbt_function(config):
        accuracy, step = 0.0, 1
        checkpoint = train.get_checkpoint()
        if checkpoint:
            with open(os.path.join(checkpoint.path, "state.json")) as f:
                state = json.load(f)
            accuracy, step = state["acc"], state["step"] + 1
        while True:
            accuracy = random.random()
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"acc": accuracy, "step": step}, f)
                train.report(
                    {"mean_accuracy": accuracy, "some_other_factor": config["some_other_factor"],
                     "cur_lr": config["lr"]},
                    checkpoint=train.Checkpoint.from_directory(d),
                )
            step += 1

    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=5,
        hyperparam_mutations={"lr": tune.uniform(0.0001, 0.02), "some_other_factor": [1, 2]},
    )
    grid = tune.Tuner(
        pbt_function,
        run_config=train.RunConfig(name="pbt_function", storage_path="results",
                                   stop={"training_iteration": 100}),
        tune_config=tune.TuneConfig(scheduler=pbt, metric="mean_accuracy", mode="max",
                                    num_samples=8, seed=25),
        param_space={"lr": 0.0001, "some_other_factor": 1},
    ).fit()
    print("RESULT " + json.dumps([
        {"status": r.status, "config": r.config,
         "factors": [h["some_other_factor"] for h in r.history()],
         "lrs": [h["cur_lr"] for h in r.history()],
         "iterations": r.metrics["training_iteration"]}
        for r in grid
    ]))
    '''
)


_result = support.result_line


def setUpModule():
    support.binary()


class PBTTest(support.HomeTest):
    def test_a_list_mutation_shifts_among_its_values(self):
        # Ray's _explore shifts a list value to a neighbour in the list or
        # resamples one from it; only a distribution is multiplied.
        script = os.path.join(self.home, "pbt_function.py")
        with open(script, "w") as f:
            f.write(PBT_FUNCTION)
        trials = _result(support.run_script(self, script, home=self.home))
        self.assertEqual(len(trials), 8)
        seen = set()
        for t in trials:
            self.assertEqual(t["status"], "TERMINATED", t)
            self.assertEqual(t["iterations"], 100, t)
            seen.update(t["factors"] + [t["config"]["some_other_factor"]])
            for f in t["factors"]:
                self.assertIsInstance(f, int, t)
        self.assertLessEqual(seen, {1, 2})
        # Trials were exploited: some lr left its start, and the list
        # mutation was applied (from 1, a shift right or a resample gives 2).
        self.assertTrue(any(lr != 0.0001 for t in trials for lr in t["lrs"]), "no trial was perturbed")
        self.assertEqual(seen, {1, 2}, "some_other_factor never moved")


if __name__ == "__main__":
    unittest.main()
