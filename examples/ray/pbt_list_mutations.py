# Covers Ray's python/ray/tune/examples/pbt_function.py: PopulationBasedTraining
# over a function trainable that checkpoints each step, with a distribution
# (lr) and a list ("some_other_factor": [1, 2]) in hyperparam_mutations; a
# list value is explored by moving to a neighbour in the list or
# resampling from it, so it never leaves the list.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune                            ->  from tunejet import train, tune
#   from ray.train import Checkpoint                       ->  from tunejet.train import Checkpoint
#   from ray.tune.schedulers import PopulationBasedTraining
#       ->  from tunejet.tune.schedulers import PopulationBasedTraining
import json
import os
import tempfile
import time

from tunejet import train, tune
from tunejet.train import Checkpoint
from tunejet.tune.schedulers import PopulationBasedTraining

STEPS = 40


def pbt_function(config):
    step, accuracy = 1, 0.0
    checkpoint = train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            state = json.load(f)
        step, accuracy = state["step"] + 1, state["accuracy"]
    while step <= STEPS:
        time.sleep(0.05)  # a step of training takes a while
        # The score of the current config: best with lr near 0.01 and the
        # larger factor, so that exploiting a better trial pays at once.
        accuracy = config["some_other_factor"] * (0.1 - abs(config["lr"] - 0.01))
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"step": step, "accuracy": accuracy}, f)
            train.report(
                {"mean_accuracy": accuracy, "lr": config["lr"], "factor": config["some_other_factor"]},
                checkpoint=Checkpoint.from_directory(d),
            )
        step += 1


if __name__ == "__main__":
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=4,
        hyperparam_mutations={
            "lr": tune.uniform(0.0001, 0.02),
            "some_other_factor": [1, 2],
        },
    )
    tuner = tune.Tuner(
        pbt_function,
        run_config=train.RunConfig(name="pbt_list_mutations", failure_config=train.FailureConfig(max_failures=3)),
        tune_config=tune.TuneConfig(metric="mean_accuracy", mode="max", scheduler=pbt, num_samples=8),
        param_space={"lr": tune.uniform(0.0001, 0.02), "some_other_factor": 1},
    )
    results = tuner.fit()

    assert results.num_errors == 0
    assert len(results) == 8
    seen = set()
    for r in results:
        for h in r.history():
            seen.add(h["factor"])
            assert h["factor"] in (1, 2), (r.trial_id, h)
            assert 0.0001 * 0.8 <= h["lr"] <= 0.02 * 1.2, (r.trial_id, h)
    # Exploitation copied better trials' configs, and exploration changed
    # them: some trial's lr changed during its run.
    assert any(len({h["lr"] for h in r.history()}) > 1 for r in results)
    print("factors seen:", sorted(seen))
