# Covers Ray's python/ray/tune/examples/pbt_ppo_example.py pattern and the
# PBT guide (doc/source/tune/examples/pbt_guide.ipynb): functions as
# hyperparam_mutations ("clip": lambda: random.uniform(...)), a list, and a
# custom_explore_fn that puts each explored config back within a rule
# (here: batch >= 2 * minibatch, lr capped). Ray calls these functions in
# the driver; so does tunejet.
#
# Ray's API; for tunejet only the imports changed:
#   from ray import train, tune                            ->  from tunejet import train, tune
#   from ray.train import Checkpoint                       ->  from tunejet.train import Checkpoint
#   from ray.tune.schedulers import PopulationBasedTraining
#       ->  from tunejet.tune.schedulers import PopulationBasedTraining
import json
import os
import random
import tempfile

from tunejet import train, tune
from tunejet.train import Checkpoint
from tunejet.tune.schedulers import PopulationBasedTraining

STEPS = 24
LR_CAP = 0.05


def explore(config):
    # Ray's example keeps its batch sizes consistent after a perturbation.
    if config["batch"] < config["minibatch"] * 2:
        config["batch"] = config["minibatch"] * 2
    config["lr"] = min(config["lr"], LR_CAP)
    config["explored"] = True
    return config


def trainable(config):
    step = 1
    checkpoint = train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            step = json.load(f)["step"] + 1
    while step <= STEPS:
        score = config["clip"] + config["lr"] + random.random() * 0.01
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"step": step}, f)
            train.report(
                {"score": score, "clip": config["clip"], "lr": config["lr"], "batch": config["batch"],
                 "minibatch": config["minibatch"], "explored": config.get("explored", False)},
                checkpoint=Checkpoint.from_directory(d),
            )
        step += 1


if __name__ == "__main__":
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=4,
        resample_probability=0.5,
        hyperparam_mutations={
            "clip": lambda: random.uniform(0.1, 0.3),
            "lr": lambda: random.uniform(0.01, 0.1),
            "minibatch": [32, 64, 128],
        },
        custom_explore_fn=explore,
    )
    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(metric="score", mode="max", scheduler=pbt, num_samples=6),
        # clip and lr are not in the param space: PBT fills them from their
        # functions, as Ray does.
        param_space={"minibatch": tune.choice([32, 64]), "batch": 64},
    )
    results = tuner.fit()

    assert results.num_errors == 0
    assert len(results) == 6
    explored = 0
    for r in results:
        for h in r.history():
            # Drawn by its function in [0.1, 0.3], then resampled so, or
            # multiplied by 0.8 or 1.2 at each of at most 5 perturbations.
            assert 0.1 * 0.8**5 <= h["clip"] <= 0.3 * 1.2**5, h
            assert h["minibatch"] in (32, 64, 128), h
            if h["explored"]:
                explored += 1
                assert h["lr"] <= LR_CAP, h  # custom_explore_fn ran on every explored config
                assert h["batch"] >= 2 * h["minibatch"], h
    assert explored > 0, "no trial ran an explored config"
    print("results with an explored config:", explored)
